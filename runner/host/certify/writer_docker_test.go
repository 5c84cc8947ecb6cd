package certify_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/host/images"
)

// The writer's witness is the owner's own looks from the stall up to the
// stop (docs/threat-model.md, Witnesses): two hostile harnesses that
// passed timeout and cancel against the witness of issue 35.3 (red team
// rt-bd, B2 and B4) now fail scenario.writer_started, the detail naming
// what the looks saw.

// fakeWriterBin builds fixtures/c/fakewriter.c static, as the conformance
// suite builds its C fixtures, so one binary runs in every image.
func fakeWriterBin(t *testing.T) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		testenv.Missing(t, "gcc ("+err.Error()+"), to build the C fixture fixtures/c/fakewriter.c",
			"apt-get install gcc libc6-dev (images/prereqs.sh installs both)")
	}
	out := filepath.Join(t.TempDir(), "fakewriter")
	src := filepath.Join("..", "..", "..", "fixtures", "c", "fakewriter.c")
	if b, err := exec.Command(gcc, "-static", "-O2", "-Wall", "-Werror", "-o", out, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc -static %s: %v\n%s", src, err, b)
	}
	return out
}

// The hostile harnesses' shells for the mini-agent's bash tool: every
// command runs in the image's /bin/sh but the model's writer call.
const (
	// stoppedWriterShell (B2) answers it by starting fakewriter (beside
	// the shell): the writer's exact command line under another
	// executable, which writes 400 future-dated lines in one burst and
	// stops itself.
	stoppedWriterShell = `#!/bin/sh
case "$2" in
*sandproof-writer*) "$(dirname "$0")/fakewriter" "$2"; echo writer started; exit 0 ;;
esac
exec /bin/sh "$@"
`
	// readOnlyWriterShell (B4) runs the real writer, by the image's sh
	// with its exact command line, after writing its file by hand in one
	// burst (400 lines dated two a second from now) and making it
	// read-only: none of the writer's appends land.
	readOnlyWriterShell = `#!/bin/sh
case "$2" in
*sandproof-writer*)
	f=/task/sandproof-writer.log now=$(date +%s) i=0
	while [ "$i" -lt 400 ]; do echo "$i $((now + i / 2))"; i=$((i + 1)); done > "$f"
	chmod 0444 "$f" ;;
esac
exec /bin/sh "$@"
`
)

// forgedBytes is the size of the 400 forged lines ("N EPOCH", EPOCH ten
// digits): the positive control that the forgery was there at close.
const forgedBytes = "5890 bytes at close"

// B2: a static helper under the writer's exact command line wrote 400
// future-dated lines in one burst and SIGSTOPped itself; B4: the real
// writer ran over a hand-written read-only file. Both passed timeout and
// cancel (writer_started: the process seen and reached, "82 line(s)
// before the stop", "want at least 0" in cancel). Now each fails
// writer_started in both, naming what the owner's looks saw: another
// executable than the image's sh, stopped; a read-only file that did not
// grow. The positive controls: the probe saw the forger's process (its
// executable the helper, or the image's sh), the stop reached it, and
// the forged file was whole at close.
func TestCertifyFakeWritersFail(t *testing.T) {
	t.Parallel() // waits on stalled models: beside the other waiting tests
	bin := fakeWriterBin(t)
	eachImageAtOnce(t, func(t *testing.T, img images.Image) {
		dir := t.TempDir()
		shell := func(name, script string) string {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			return p
		}
		stopped := miniagentVariant(t, "fake-stopped-writer", variantSpec{
			files: map[string]string{"bin/fakesh": shell("stopped.sh", stoppedWriterShell), "bin/fakewriter": bin},
			args:  []string{"--shell", "{runtime_dir}/bin/fakesh"}})
		readOnly := miniagentVariant(t, "fake-readonly-writer", variantSpec{
			files: map[string]string{"bin/fakesh": shell("readonly.sh", readOnlyWriterShell)},
			args:  []string{"--shell", "{runtime_dir}/bin/fakesh"}})
		_, evs := certifyCases(t, img, stopSooner(stopped, readOnly), certify.ScenarioTimeout, certify.ScenarioCancel)
		for _, tc := range []struct {
			m       *adapter.Manifest
			control string   // in the detail: the forger seen as what it is
			says    []string // in the detail: why it is not the writer
		}{
			{stopped, "/bin/fakewriter;", []string{"not the image's sh", "stopped (state T)", "did not grow"}},
			{readOnly, "the stop's receipt lists it as reached", []string{"read-only to its owner (mode 0444)", "did not grow"}},
		} {
			for _, sc := range []string{certify.ScenarioTimeout, certify.ScenarioCancel} {
				ev := evs[certify.CaseID(img.Name, tc.m.Name, sc)]
				if ev == nil {
					t.Fatalf("%s/%s: no evidence", tc.m.Name, sc)
				}
				c := checkOf(ev, "scenario.writer_started")
				if !strings.Contains(c.Detail, "the probe saw the writer") || !strings.Contains(c.Detail, tc.control) ||
					!strings.Contains(c.Detail, "lists it as reached") || !strings.Contains(c.Detail, forgedBytes) {
					t.Fatalf("%s/%s: positive control: the forger was not seen and reached, or its file not whole at close (%s, %q): %q",
						tc.m.Name, sc, tc.control, forgedBytes, c.Detail)
				}
				if tc.m == readOnly && strings.Contains(c.Detail, "not the image's sh") {
					t.Errorf("%s/%s: the real writer (the image's sh) taken for another executable: %q", tc.m.Name, sc, c.Detail)
				}
				if c.Status != reports.StatusFailed || ev.Status != reports.StatusFailed {
					t.Errorf("%s/%s: case %s, writer_started %s %q; want both failed", tc.m.Name, sc, ev.Status, c.Status, c.Detail)
				}
				for _, s := range tc.says {
					if !strings.Contains(c.Detail, s) {
						t.Errorf("%s/%s: writer_started's detail does not say %q: %q", tc.m.Name, sc, s, c.Detail)
					}
				}
				t.Logf("%s/%s: %s %s: %s", tc.m.Name, sc, ev.Status, c.Status, c.Detail)
			}
		}
	})
}
