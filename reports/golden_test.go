package reports

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run go test ./reports -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; rerun with -update if the change is intended\n%s", name, firstDifference(got, want))
	}
}

// firstDifference shows the first differing line, which is what a reader
// needs to judge a golden failure.
func firstDifference(got, want []byte) string {
	g, w := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl []byte
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if !bytes.Equal(gl, wl) {
			return "line " + strconv.Itoa(i+1) + "\n got: " + string(gl) + "\nwant: " + string(wl)
		}
	}
	return ""
}

func mustReport(t testing.TB, paths ...string) *Report {
	t.Helper()
	rep, err := ReadFiles(paths...)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestGolden(t *testing.T) {
	renderers := []struct {
		golden string
		render func(io.Writer, *Report) error
	}{
		{"smoke.md.golden", WriteMarkdown},
		{"smoke.html.golden", WriteHTML},
		{"smoke.junit.xml.golden", WriteJUnit},
		{"smoke.json.golden", WriteJSON},
	}
	rep := mustReport(t, "testdata/smoke.jsonl")
	for _, r := range renderers {
		t.Run(r.golden, func(t *testing.T) {
			var buf bytes.Buffer
			if err := r.render(&buf, rep); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, r.golden, buf.Bytes())
		})
	}
	t.Run("smoke.diff.golden", func(t *testing.T) {
		d, err := Diff(rep, mustReport(t, "testdata/smoke-regressed.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WriteDiff(&buf, d); err != nil {
			t.Fatal(err)
		}
		checkGolden(t, "smoke.diff.golden", buf.Bytes())
	})
}
