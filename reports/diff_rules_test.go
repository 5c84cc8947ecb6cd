package reports

import (
	"testing"
)

// The regression rules of report diff and the statuses they rest on, one
// by one (the host-path mutants, docs/mutation.md).

// withStatus is okEvidence with status st (an unknown case has an unknown
// check, a skipped one a reason).
func withStatus(run, id, image, harness string, st Status) *Evidence {
	e := okEvidence(run, id, image, harness)
	switch st {
	case StatusUnknown:
		e.Checks[0].Status = StatusUnknown
		e.Status, e.Passed = StatusUnknown, false
	case StatusSkipped:
		e.Status, e.Passed, e.SkipReason = StatusSkipped, false, "lacks glibc"
	case StatusFailed:
		e.Checks[0].Status = StatusFailed
		e.Status, e.Passed = StatusFailed, false
	}
	return e
}

// passed -> failed, unknown or skipped is a regression: a CI gate that
// runs `report diff` exits 1 on each; passed -> passed is not (control).
func TestDiffEveryNotPassedIsARegression(t *testing.T) {
	old := build(t, withStatus("old", "a", "debian", "pi", StatusPassed))
	for _, st := range []Status{StatusFailed, StatusUnknown, StatusSkipped} {
		d, err := Diff(old, build(t, withStatus("new", "a", "debian", "pi", st)))
		if err != nil {
			t.Fatal(err)
		}
		if !d.Regressed() || len(d.Regressions) != 1 || d.Regressions[0].New != st {
			t.Errorf("passed -> %s: regressions %+v, want one (the gate fails)", st, d.Regressions)
		}
	}
	d, err := Diff(old, build(t, withStatus("new", "a", "debian", "pi", StatusPassed)))
	if err != nil {
		t.Fatal(err)
	}
	if d.Regressed() || d.Unchanged != 1 {
		t.Fatalf("positive control: passed -> passed regressed (%+v) or is not unchanged (%d)", d.Regressions, d.Unchanged)
	}
}

// failed, unknown or skipped -> passed is a fix; a case that stays not
// passed is counted as such.
func TestDiffFixesAndStillNotPassed(t *testing.T) {
	cur := build(t, withStatus("new", "a", "debian", "pi", StatusPassed))
	for _, st := range []Status{StatusFailed, StatusUnknown, StatusSkipped} {
		d, err := Diff(build(t, withStatus("old", "a", "debian", "pi", st)), cur)
		if err != nil {
			t.Fatal(err)
		}
		if d.Regressed() || len(d.Fixes) != 1 || d.Fixes[0].Old != st {
			t.Errorf("%s -> passed: fixes %+v regressions %+v, want one fix", st, d.Fixes, d.Regressions)
		}
		same := build(t, withStatus("new", "a", "debian", "pi", st))
		d, err = Diff(build(t, withStatus("old", "a", "debian", "pi", st)), same)
		if err != nil {
			t.Fatal(err)
		}
		if d.Unchanged != 1 || d.StillNotPassed != 1 {
			t.Errorf("%s -> %s: unchanged %d, still not passed %d; want 1 and 1", st, st, d.Unchanged, d.StillNotPassed)
		}
	}
}

// A passed case missing from NEW is a regression, unless AllowMissing;
// it is listed as missing either way.
func TestDiffMissingPassedCase(t *testing.T) {
	old := build(t, withStatus("old", "a", "debian", "pi", StatusPassed), withStatus("old", "b", "debian", "kilo", StatusPassed))
	cur := build(t, withStatus("new", "a", "debian", "pi", StatusPassed))
	d, err := Diff(old, cur)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Regressed() || len(d.Missing) != 1 {
		t.Fatalf("missing passed case: regressions %+v missing %+v, want one of each", d.Regressions, d.Missing)
	}
	d, err = Diff(old, cur, DiffOptions{AllowMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	if d.Regressed() || len(d.Missing) != 1 {
		t.Fatalf("AllowMissing: regressions %+v missing %+v, want none and one", d.Regressions, d.Missing)
	}
}

// The folded status of a run: one unknown case makes it unknown, one
// failed case failed.
func TestCountsOneUnknownCase(t *testing.T) {
	var c Counts
	c.add(StatusPassed)
	c.add(StatusPassed)
	if c.Status() != StatusPassed {
		t.Fatalf("positive control: two passed cases fold to %s", c.Status())
	}
	c.add(StatusUnknown)
	if c.Status() != StatusUnknown {
		t.Fatalf("two passed and one unknown fold to %s, want unknown", c.Status())
	}
}

// A record that says passed is judged on its checks: one unknown check
// makes it unknown; passed false makes it failed; all checks skipped make
// it unknown.
func TestJudgeRecordSayingPassed(t *testing.T) {
	if st, why := Judge(okEvidence("r", "a", "debian", "pi")); st != StatusPassed {
		t.Fatalf("positive control: a passed record judged %s (%v)", st, why)
	}
	e := okEvidence("r", "a", "debian", "pi")
	e.Checks[1].Status = StatusUnknown
	if st, _ := Judge(e); st != StatusUnknown {
		t.Errorf("one unknown check: %s, want unknown", st)
	}
	e = okEvidence("r", "a", "debian", "pi")
	e.Passed = false
	if st, _ := Judge(e); st != StatusFailed {
		t.Errorf("passed field false: %s, want failed", st)
	}
	e = okEvidence("r", "a", "debian", "pi")
	for i := range e.Checks {
		e.Checks[i].Status = StatusSkipped
	}
	if st, _ := Judge(e); st != StatusUnknown {
		t.Errorf("every check skipped: %s, want unknown", st)
	}
}
