package certify

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/reports"
)

func record(id string, st reports.Status) *reports.Evidence {
	ev := &reports.Evidence{Schema: reports.Schema, RunID: "r1", CaseID: id, Harness: "h", Image: "i", Status: st,
		Checks: []reports.Check{{ID: "c", Status: reports.StatusPassed, Clause: "§7.4 verify"}}}
	if st == reports.StatusSkipped {
		ev.SkipReason = "lacks glibc"
	}
	return ev
}

// TestResumeAfterTornWrite: cases written before a crash survive, a torn
// last line is cut and its case runs again, and a non-resume run refuses
// to append to the file.
func TestResumeAfterTornWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), reports.EvidenceFile)
	f, err := appendEvidence(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Write(record("a", reports.StatusPassed), "sk-key"); err != nil {
		t.Fatal(err)
	}
	if err := f.Write(record("b", reports.StatusSkipped), "sk-key"); err != nil {
		t.Fatal(err)
	}
	// An interrupted case, then its second attempt, then an interrupted
	// one whose last attempt is still unknown: resume takes the last.
	for _, w := range []struct {
		id      string
		st      reports.Status
		attempt int
	}{{"d", reports.StatusUnknown, 1}, {"d", reports.StatusPassed, 2}, {"e", reports.StatusUnknown, 1}, {"e", reports.StatusUnknown, 2}} {
		ev := record(w.id, w.st)
		ev.Attempt = w.attempt
		if err := f.Write(ev, "sk-key"); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	fh, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	fh.WriteString(`{"schema":"sandproof.evidence/v1","run_id":"r1","case_id":"c","harn`)
	fh.Close()

	if _, _, err := openEvidence(path, false); !errors.Is(err, ErrOutExists) {
		t.Fatalf("without --resume: %v, want ErrOutExists", err)
	}
	done, runID, err := openEvidence(path, true)
	if err != nil {
		t.Fatal(err)
	}
	if runID != "r1" || len(done) != 4 || done["a"] != (lastAttempt{reports.StatusPassed, 1}) || done["b"] != (lastAttempt{reports.StatusSkipped, 1}) ||
		done["d"] != (lastAttempt{reports.StatusPassed, 2}) || done["e"] != (lastAttempt{reports.StatusUnknown, 2}) {
		t.Fatalf("done %v run %q", done, runID)
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), `"case_id":"c"`) || !strings.HasSuffix(string(data), "\n") {
		t.Fatalf("torn line kept: %q", data)
	}
}

func TestFinishUnknownWithoutChecks(t *testing.T) {
	cr := &caseRun{ev: &reports.Evidence{Status: reports.StatusUnknown}}
	cr.finish()
	if cr.ev.Status != reports.StatusUnknown || cr.ev.Passed {
		t.Fatalf("no checks: %s passed=%t, want unknown", cr.ev.Status, cr.ev.Passed)
	}
	cr.ev.Checks = []reports.Check{{ID: "a", Status: reports.StatusPassed}, {ID: "b", Status: reports.StatusFailed}}
	cr.finish()
	if cr.ev.Status != reports.StatusFailed || cr.ev.Passed {
		t.Fatalf("one failed check: %s", cr.ev.Status)
	}
}

// An interrupted case is unknown, with the reason and an unknown check,
// unless a check failed on its own.
func TestFinishInterrupted(t *testing.T) {
	cr := &caseRun{intr: interruptWatch{reason: "SIGINT during activation"}, ev: &reports.Evidence{Status: reports.StatusUnknown,
		Checks: []reports.Check{{ID: "setup", Status: reports.StatusPassed}}}}
	cr.finish()
	if cr.ev.Status != reports.StatusUnknown || cr.ev.Interrupted != "SIGINT during activation" || checkOf(cr.ev, "interrupt") != reports.StatusUnknown {
		t.Fatalf("interrupted: status %s, interrupted %q, checks %+v", cr.ev.Status, cr.ev.Interrupted, cr.ev.Checks)
	}
	if st, _ := reports.Judge(cr.ev); st != reports.StatusUnknown {
		t.Fatalf("the report judges it %s, want unknown", st)
	}
	cr = &caseRun{intr: interruptWatch{reason: "SIGTERM before verify"}, ev: &reports.Evidence{Status: reports.StatusUnknown,
		Checks: []reports.Check{{ID: "setup", Status: reports.StatusFailed}}}}
	cr.finish()
	if cr.ev.Status != reports.StatusFailed {
		t.Fatalf("interrupted after a failed check: %s, want failed", cr.ev.Status)
	}
}

func checkOf(ev *reports.Evidence, id string) reports.Status {
	for _, c := range ev.Checks {
		if c.ID == id {
			return c.Status
		}
	}
	return ""
}

func TestDiffAllowList(t *testing.T) {
	allowed := []string{"/task", "/var/lib/sandproof", "/home/task/.config/sandproof-owner"}
	for _, tc := range []struct {
		p         string
		ancestors bool
		want      bool
	}{
		{"/task/deliverable.txt", true, true}, {"/var/lib", true, true}, {"/home/task", true, true},
		{"/home/task/.bashrc", true, false}, {"/tmp/x", true, false}, {"/home", false, false}, {"/taskx", true, false},
	} {
		if got := isAllowed(tc.p, allowed, tc.ancestors); got != tc.want {
			t.Errorf("isAllowed(%q, ancestors %t) = %t, want %t", tc.p, tc.ancestors, got, tc.want)
		}
	}
}
