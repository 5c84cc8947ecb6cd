package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"
)

// benchCases is the size of the full evaluation in BACKGROUND.md: 731 tasks,
// two receipts each (1,462 close and activation receipts).
const benchCases = 731

// genRun writes an evidence.jsonl of n cases shaped like a task-set run:
// a dozen repository images, one harness, about half the tasks passing,
// receipts carrying warden's full fields.
func genRun(tb testing.TB, w io.Writer, n int) {
	tb.Helper()
	repos := []string{"django", "sympy", "astropy", "matplotlib", "requests", "pytest", "sphinx", "xarray", "scikit-learn", "flask", "pylint", "seaborn"}
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	enc := json.NewEncoder(w)
	for i := range n {
		repo := repos[i%len(repos)]
		e := okEvidence("eval-731", fmt.Sprintf("case-%04d", i), "swebench/"+repo, "opencode")
		e.TaskID = fmt.Sprintf("%s__%s-%d", repo, repo, 10000+i)
		e.Checks = append(e.Checks,
			Check{ID: "session_dir_removed", Status: StatusPassed, Clause: "§6", Detail: "ok"},
			Check{ID: "python3_unchanged", Status: StatusPassed, Clause: "§7.4", Detail: "ok"},
			Check{ID: "activation_receipt_confirmed", Status: StatusPassed, Clause: "§3", Detail: "ok"},
			Check{ID: "close_receipt_confirmed", Status: StatusPassed, Clause: "§3", Detail: "ok"},
		)
		if i%2 == 1 {
			e.Status, e.Passed = StatusFailed, false
			e.Checks[0] = Check{ID: "deliverable", Status: StatusFailed, Clause: "§7.4", Detail: "deliverable.txt holds the wrong token"}
		}
		extra := map[string]json.RawMessage{
			"schema":    json.RawMessage(`"warden.receipt/v1"`),
			"launch_id": json.RawMessage(fmt.Sprintf(`"%032x"`, i)),
			"reached":   json.RawMessage(`[{"pid":41,"start_time":123456,"comm":"bash","why":"orphan"},{"pid":42,"start_time":123460,"comm":"sleep","why":"marker"}]`),
			"tier":      json.RawMessage(`"subreaper+pidfd"`),
		}
		e.ActivationReceipt.Extra, e.CloseReceipt.Extra = extra, extra
		e.CloseObservationGaps = []string{"cached_token_usage_unavailable"}
		e.OutputItemTypes = map[string]int{"reasoning": 9, "function_call": 14, "function_call_output": 14, "message": 2}
		e.Before = &Before{OS: "ubuntu-22.04", Python3: "/usr/bin/python3 Python 3.9.7", Bash: "/usr/bin/bash", Markers: []string{"/root/.config/m", "/root/.local/share/m", "/root/.cache/m", "/root/.local/state/m"}}
		e.After = &After{Deliverable: "deliverable-x", MarkersKept: e.Before.Markers, Python3: e.Before.Python3}
		start := t0.Add(time.Duration(i) * 3 * time.Second)
		for j, name := range StageNames {
			e.Stages = append(e.Stages, Stage{Name: name, StartedAt: start.Add(time.Duration(j) * 10 * time.Second), Seconds: 9.5})
		}
		e.StartedAt, e.EndedAt = start, start.Add(60*time.Second)
		if err := enc.Encode(e); err != nil {
			tb.Fatal(err)
		}
	}
}

func benchInput(b *testing.B) []byte {
	var buf bytes.Buffer
	genRun(b, &buf, benchCases)
	return buf.Bytes()
}

func BenchmarkRead(b *testing.B) {
	in := benchInput(b)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		bl := NewBuilder()
		if err := bl.Read("bench", bytes.NewReader(in)); err != nil {
			b.Fatal(err)
		}
		if rep := bl.Report(); rep.Counts.Cases != benchCases {
			b.Fatalf("%d cases", rep.Counts.Cases)
		}
	}
}

func BenchmarkRender(b *testing.B) {
	in := benchInput(b)
	bl := NewBuilder()
	if err := bl.Read("bench", bytes.NewReader(in)); err != nil {
		b.Fatal(err)
	}
	rep := bl.Report()
	for _, f := range []struct {
		name   string
		render func(io.Writer, *Report) error
	}{{"md", WriteMarkdown}, {"html", WriteHTML}, {"junit", WriteJUnit}, {"json", WriteJSON}} {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			var size int64
			for b.Loop() {
				cw := &countWriter{}
				if err := f.render(cw, rep); err != nil {
					b.Fatal(err)
				}
				size = cw.n
			}
			b.ReportMetric(float64(size), "out-bytes")
		})
	}
}

func BenchmarkDiff(b *testing.B) {
	in := benchInput(b)
	old, cur := NewBuilder(), NewBuilder()
	if err := old.Read("old", bytes.NewReader(in)); err != nil {
		b.Fatal(err)
	}
	if err := cur.Read("new", bytes.NewReader(in)); err != nil {
		b.Fatal(err)
	}
	o, n := old.Report(), cur.Report()
	b.ReportAllocs()
	for b.Loop() {
		d, err := Diff(o, n)
		if err != nil {
			b.Fatal(err)
		}
		if err := WriteDiff(io.Discard, d); err != nil {
			b.Fatal(err)
		}
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// bigLines streams n records, each padded with a large field no reader
// knows, without ever holding the whole input.
type bigLines struct {
	n, pad int
	read   int64 // bytes handed out, for the test's positive control
	cur    *strings.Reader
}

func (r *bigLines) Read(p []byte) (int, error) {
	for r.cur == nil || r.cur.Len() == 0 {
		if r.n == 0 {
			return 0, io.EOF
		}
		r.n--
		e := okEvidence("r", fmt.Sprintf("c%d", r.n), "debian", "pi")
		line, err := json.Marshal(e)
		if err != nil {
			return 0, err
		}
		s := `{"padding":"` + strings.Repeat("x", r.pad) + `",` + string(line[1:]) + "\n"
		r.cur = strings.NewReader(s)
	}
	n, err := r.cur.Read(p)
	r.read += int64(n)
	return n, err
}

// TestMemoryFollowsCases checks that reading keeps what the cases need and
// not the raw lines: 64 records padded to 1 MiB each must not leave 64 MiB
// on the heap.
func TestMemoryFollowsCases(t *testing.T) {
	const records, pad = 64, 1 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b := NewBuilder()
	in := &bigLines{n: records, pad: pad}
	if err := b.Read("big", in); err != nil {
		t.Fatal(err)
	}
	rep := b.Report()
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if rep.Counts.Cases != records {
		t.Fatalf("%d cases, want %d", rep.Counts.Cases, records)
	}
	// Positive control: the input really was large.
	if in.read < records*pad {
		t.Fatalf("read only %d bytes, want at least %d", in.read, records*pad)
	}
	if grew > in.read/8 {
		t.Errorf("heap grew by %d bytes after reading %d bytes of input; the raw lines are being kept", grew, in.read)
	}
	runtime.KeepAlive(rep)
}
