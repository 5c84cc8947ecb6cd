package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// okEvidence is a valid, passing record with three passed checks.
func okEvidence(run, id, image, harness string) *Evidence {
	rc := 0
	return &Evidence{
		Schema: Schema, RunID: run, CaseID: id, Image: image, Harness: harness,
		ImageID: "sha256:img-" + image, Status: StatusPassed, Passed: true, Seconds: 12,
		ActivationReceipt: &Receipt{CleanupConfirmed: true, ReturnCode: &rc},
		CloseReceipt:      &Receipt{CleanupConfirmed: true, ReturnCode: &rc},
		After:             &After{MarkersKept: []string{"/m"}},
		Checks: []Check{
			{ID: "deliverable", Status: StatusPassed, Clause: "§7.4", Detail: "ok"},
			{ID: "markers_kept", Status: StatusPassed, Clause: "§7.4", Detail: "ok"},
			{ID: "no_new_processes", Status: StatusPassed, Clause: "§7.4", Detail: "ok"},
		},
		Provenance: Provenance{WardenSHA256: "sha256:w", AdapterSHA256: "sha256:a-" + harness, SuiteVersion: "0.1.0", Host: "h",
			StartedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)},
	}
}

func jsonl(t testing.TB, recs ...any) string {
	t.Helper()
	var b strings.Builder
	for _, r := range recs {
		switch r := r.(type) {
		case string:
			b.WriteString(r)
		default:
			line, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(line)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(e *Evidence)
		want   Status
		reason string // a substring of the reasons; "" means no reasons
	}{
		{"all checks passed", func(e *Evidence) {}, StatusPassed, ""},
		{"no checks is unknown, never passed", func(e *Evidence) { e.Checks = nil }, StatusUnknown, "no checks"},
		{"a failed check outranks a passed record", func(e *Evidence) { e.Checks[1].Status = StatusFailed }, StatusFailed, "record says passed, but failed check(s): markers_kept"},
		{"a failed check outranks a skipped record", func(e *Evidence) {
			e.Status, e.SkipReason, e.Checks[0].Status = StatusSkipped, "glibc", StatusFailed
		}, StatusFailed, "record says skipped"},
		{"a failed check outranks an unknown check", func(e *Evidence) {
			e.Checks[0].Status, e.Checks[1].Status = StatusUnknown, StatusFailed
		}, StatusFailed, "markers_kept"},
		{"passed record with passed=false", func(e *Evidence) { e.Passed = false }, StatusFailed, "passed field is false"},
		{"an unknown check keeps the case unknown", func(e *Evidence) { e.Checks[2].Status = StatusUnknown }, StatusUnknown, "no_new_processes"},
		{"only skipped checks prove nothing", func(e *Evidence) {
			for i := range e.Checks {
				e.Checks[i].Status = StatusSkipped
			}
		}, StatusUnknown, "no check passed"},
		{"a failed record stays failed without a failed check", func(e *Evidence) { e.Status = StatusFailed }, StatusFailed, "record says failed"},
		{"a failed record with no checks is failed", func(e *Evidence) { e.Status, e.Checks = StatusFailed, nil }, StatusFailed, "record says failed"},
		{"a skipped record with no checks is skipped", func(e *Evidence) {
			e.Status, e.SkipReason, e.Checks = StatusSkipped, "needs glibc", nil
		}, StatusSkipped, ""},
		{"an unknown record stays unknown", func(e *Evidence) { e.Status = StatusUnknown }, StatusUnknown, "record says unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := okEvidence("r", "c", "img", "pi")
			tc.edit(e)
			got, why := Judge(e)
			if got != tc.want {
				t.Errorf("status = %q, want %q (reasons %q)", got, tc.want, why)
			}
			joined := strings.Join(why, "; ")
			if tc.reason == "" && joined != "" {
				t.Errorf("reasons = %q, want none", joined)
			}
			if !strings.Contains(joined, tc.reason) {
				t.Errorf("reasons = %q, want one containing %q", joined, tc.reason)
			}
		})
	}
}

func TestCountsStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []Status
		want Status
	}{
		{"a run with no cases is unknown", nil, StatusUnknown},
		{"skipped cases do not fail a run", []Status{StatusPassed, StatusSkipped}, StatusPassed},
		{"failed outranks everything", []Status{StatusPassed, StatusUnknown, StatusSkipped, StatusFailed}, StatusFailed},
		{"an unknown case keeps the run unknown", []Status{StatusPassed, StatusUnknown}, StatusUnknown},
		{"only skipped cases is skipped, not passed", []Status{StatusSkipped, StatusSkipped}, StatusSkipped},
		{"all passed", []Status{StatusPassed, StatusPassed}, StatusPassed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Counts
			for _, s := range tc.in {
				c.add(s)
			}
			if got := c.Status(); got != tc.want {
				t.Errorf("Status() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestBuilderStatuses(t *testing.T) {
	lying := okEvidence("r1", "lying", "alpine", "pi")
	lying.Checks[0].Status = StatusFailed
	skipped := okEvidence("r1", "skipped", "alpine", "codex")
	skipped.Status, skipped.SkipReason, skipped.Checks = StatusSkipped, "needs glibc", nil
	empty := okEvidence("r2", "empty", "debian", "pi")
	empty.Checks = nil
	okay := okEvidence("r3", "ok", "debian", "pi")
	skip3 := okEvidence("r3", "skip", "debian", "codex")
	skip3.Status, skip3.SkipReason, skip3.Checks = StatusSkipped, "needs glibc", nil

	b := NewBuilder()
	if err := b.Read("e.jsonl", strings.NewReader(jsonl(t, lying, skipped, empty, okay, skip3))); err != nil {
		t.Fatal(err)
	}
	rep := b.Report()
	if len(rep.Runs) != 3 {
		t.Fatalf("got %d runs, want 3", len(rep.Runs))
	}
	r1, r2, r3 := rep.Runs[0], rep.Runs[1], rep.Runs[2]
	if got := r1.Cases[0]; got.Status != StatusFailed || got.RecordStatus != StatusPassed {
		t.Errorf("lying case: status %q record %q, want failed over passed", got.Status, got.RecordStatus)
	}
	if r1.Status != StatusFailed {
		t.Errorf("run r1 status %q, want failed", r1.Status)
	}
	if r2.Status != StatusUnknown || r2.Cases[0].Status != StatusUnknown {
		t.Errorf("run r2 (a case without checks): run %q case %q, want unknown", r2.Status, r2.Cases[0].Status)
	}
	if r3.Status != StatusPassed || r3.Counts.Skipped != 1 {
		t.Errorf("run r3 (passed + skipped): %q %+v, want passed with 1 skipped", r3.Status, r3.Counts)
	}
	if rep.Status != StatusFailed || rep.Counts.Cases != 5 {
		t.Errorf("report: %q %+v, want failed over 5 cases", rep.Status, rep.Counts)
	}
	// The matrix cell of the lying case says fail and links to it.
	cell := r1.Matrix[0][0]
	if cell.Label != "fail 12 s" || cell.Anchor != r1.Cases[0].Anchor {
		t.Errorf("cell = %+v, want label %q anchored at %q", cell, "fail 12 s", r1.Cases[0].Anchor)
	}
	if got := r1.Matrix[0][1].Label; got != "skip" {
		t.Errorf("skipped cell label = %q, want skip", got)
	}
}

func TestEmptyReportIsUnknown(t *testing.T) {
	b := NewBuilder()
	if err := b.Read("empty.jsonl", strings.NewReader("\n\n")); err != nil {
		t.Fatal(err)
	}
	rep := b.Report()
	if rep.Status != StatusUnknown || len(rep.Runs) != 0 {
		t.Fatalf("empty evidence: status %q, %d runs; want unknown, 0", rep.Status, len(rep.Runs))
	}
	var x bytes.Buffer
	if err := WriteJUnit(&x, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(x.String(), `<error message="no cases recorded: status unknown"`) {
		t.Errorf("junit of an empty report has no error testcase:\n%s", x.String())
	}
}

func TestRejections(t *testing.T) {
	good := okEvidence("r", "c1", "debian", "pi")
	mod := func(f func(e *Evidence)) *Evidence {
		e := okEvidence("r", "c2", "debian", "kilo")
		f(e)
		return e
	}
	for _, tc := range []struct {
		name   string
		second any // the line after one good record
		want   string
		is     error
	}{
		{"duplicate case", okEvidence("r", "c1", "alpine", "pi"), `duplicate case: run_id "r" case_id "c1" attempt 1, first at in.jsonl:1`, ErrDuplicateCase},
		{"wrong schema", mod(func(e *Evidence) { e.Schema = "sandproof.evidence/v2" }), `schema "sandproof.evidence/v2"`, ErrInvalidEvidence},
		{"missing schema", `{"run_id":"r","case_id":"x","status":"passed"}`, `schema ""`, ErrInvalidEvidence},
		{"missing run_id", mod(func(e *Evidence) { e.RunID = "" }), "missing run_id", ErrInvalidEvidence},
		{"missing case_id", mod(func(e *Evidence) { e.CaseID = "" }), "missing case_id", ErrInvalidEvidence},
		{"bad status", mod(func(e *Evidence) { e.Status = "ok" }), `status "ok" is not`, ErrInvalidEvidence},
		{"bad check status", mod(func(e *Evidence) { e.Checks[0].Status = "PASS" }), `check "deliverable": status "PASS"`, ErrInvalidEvidence},
		{"duplicate check", mod(func(e *Evidence) { e.Checks[1].ID = "deliverable" }), `check "deliverable" appears twice`, ErrInvalidEvidence},
		{"skipped without reason", mod(func(e *Evidence) { e.Status = StatusSkipped }), "skipped without skip_reason", ErrInvalidEvidence},
		{"bad stage", mod(func(e *Evidence) { e.Stages = []Stage{{Name: "install", Seconds: 1}} }), `stage "install"`, ErrInvalidEvidence},
		{"negative seconds", mod(func(e *Evidence) { e.Seconds = -1 }), "seconds -1 is negative", ErrInvalidEvidence},
		{"not json", `{"schema":`, "decode record", nil},
		{"not an object", `[1,2]`, "decode record", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A blank line between the two records checks that line
			// numbers count every line, blank or not.
			in := jsonl(t, good, "", tc.second)
			err := NewBuilder().Read("in.jsonl", strings.NewReader(in))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.HasPrefix(err.Error(), "in.jsonl:3: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want in.jsonl:3: ... %q", err, tc.want)
			}
			var le *LineError
			if !errors.As(err, &le) || le.Line != 3 || le.File != "in.jsonl" {
				t.Errorf("error %#v is not a LineError at in.jsonl:3", err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q does not wrap %v", err, tc.is)
			}
		})
	}
}

func TestDuplicateAcrossFiles(t *testing.T) {
	b := NewBuilder()
	if err := b.Read("a.jsonl", strings.NewReader(jsonl(t, okEvidence("r", "c", "i", "pi")))); err != nil {
		t.Fatal(err)
	}
	// The same case_id in another run is a different case.
	if err := b.Read("b.jsonl", strings.NewReader(jsonl(t, okEvidence("other", "c", "i", "pi")))); err != nil {
		t.Fatalf("same case_id in another run rejected: %v", err)
	}
	err := b.Read("c.jsonl", strings.NewReader(jsonl(t, okEvidence("r", "c", "i", "pi"))))
	if !errors.Is(err, ErrDuplicateCase) || !strings.Contains(err.Error(), "c.jsonl:1:") || !strings.Contains(err.Error(), "first at a.jsonl:1") {
		t.Errorf("error %v, want a duplicate at c.jsonl:1 naming a.jsonl:1", err)
	}
}

func TestReadEvidenceAcceptsUnknownFields(t *testing.T) {
	line := `{"schema":"sandproof.evidence/v1","run_id":"r","case_id":"c","harness":"pi","image":"i","status":"passed","passed":true,` +
		`"future_field":{"x":[1,2]},"checks":[{"id":"a","status":"passed","clause":"§7","detail":"","weight":3}],` +
		`"close_receipt":{"cleanup_confirmed":true,"return_code":null,"error":"boom","timed_out":true,"launch_id":"L1","reached":[{"pid":41}]}}`
	var got []*Evidence
	for e, err := range ReadEvidence(strings.NewReader(line)) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if len(got) != 1 {
		t.Fatalf("got %d records, want 1", len(got))
	}
	r := got[0].CloseReceipt
	if r.ReturnCode != nil || r.Error == nil || *r.Error != "boom" || !r.TimedOut || !r.CleanupConfirmed {
		t.Errorf("receipt summary decoded wrong: %+v", r)
	}
	if string(r.Extra["launch_id"]) != `"L1"` || string(r.Extra["reached"]) != `[{"pid":41}]` {
		t.Errorf("receipt extras = %q, want launch_id and reached kept", r.Extra)
	}
	// Round trip: the unknown receipt fields are written back.
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"cleanup_confirmed":true,"return_code":null,"error":"boom","timed_out":true,"launch_id":"L1","reached":[{"pid":41}]}`
	if string(out) != want {
		t.Errorf("receipt marshals as\n %s\nwant\n %s", out, want)
	}
}

// The last attempt of a case is the case, whatever order the lines come
// in; the earlier attempt is counted, not shown.
func TestLastAttemptWins(t *testing.T) {
	first := okEvidence("r", "c1", "alpine", "pi")
	first.Status, first.Passed, first.Interrupted = StatusUnknown, false, "SIGINT during activation"
	first.Checks = append(first.Checks, Check{ID: "interrupt", Status: StatusUnknown, Clause: "§8 attempts and interrupts"})
	first.Attempt = 1
	second := okEvidence("r", "c1", "alpine", "pi")
	second.Attempt = 2
	other := okEvidence("r", "c2", "debian", "pi")
	for name, lines := range map[string][]any{"in order": {first, other, second}, "reversed": {second, other, first}} {
		b := NewBuilder()
		if err := b.Read("in.jsonl", strings.NewReader(jsonl(t, lines...))); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rep := b.Report()
		r := rep.Runs[0]
		if len(r.Cases) != 2 || r.Cases[0].ID != "c1" || r.Cases[0].Status != StatusPassed || r.Cases[0].Attempts != 2 || r.Cases[0].Evidence.Attempt != 2 {
			t.Fatalf("%s: cases %+v", name, r.Cases[0])
		}
		if rep.Counts != (Counts{Cases: 2, Passed: 2}) {
			t.Errorf("%s: counts %+v, want 2 passed", name, rep.Counts)
		}
	}
	// The same attempt twice is still a duplicate.
	again := okEvidence("r", "c1", "alpine", "pi")
	again.Attempt = 2
	if err := NewBuilder().Read("in.jsonl", strings.NewReader(jsonl(t, second, again))); !errors.Is(err, ErrDuplicateCase) {
		t.Errorf("attempt 2 twice: %v, want ErrDuplicateCase", err)
	}
}
