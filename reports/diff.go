package reports

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Missing stands for a case or check present on one side of a diff only.
const Missing Status = "missing"

// DiffResult compares two reports case by case. Cases are paired by image,
// harness and task id, not by case_id, because two runs need not name their
// cases alike.
type DiffResult struct {
	Old, New DiffSide
	// Regressions: passed in OLD and not passed in NEW, or in OLD and
	// missing from NEW (a case that vanished proves nothing any more).
	Regressions []CaseChange
	// Fixes: not passed in OLD, passed in NEW.
	Fixes []CaseChange
	// Added: in NEW only.
	Added []CaseChange
	// Unchanged counts paired cases with the same status; StillNotPassed
	// is how many of them are not passed.
	Unchanged      int
	StillNotPassed int
}

// DiffSide summarises one side of a diff.
type DiffSide struct {
	Sources []string
	Counts  Counts
}

// CaseChange is one paired case whose status changed.
type CaseChange struct {
	Name     string
	Image    string
	Harness  string
	TaskID   string
	Old, New Status
	// Checks lists the checks whose status differs, in OLD's order, then
	// those only NEW has.
	Checks []CheckChange
}

// CheckChange is one check whose status differs between the runs.
type CheckChange struct {
	ID       string
	Clause   string
	Old, New Status
	// Detail is NEW's detail, or OLD's when NEW lacks the check.
	Detail string
}

// Regressed reports whether the diff should fail a CI gate.
func (d *DiffResult) Regressed() bool { return len(d.Regressions) > 0 }

func diffKey(c *Case) string { return c.Image + "\x00" + c.Harness + "\x00" + c.TaskID }

// index maps each case of rep by its pairing key; the same key twice (two
// runs of the same image x harness x task in one file) cannot be paired.
func index(rep *Report, side string) (map[string]*Case, []*Case, error) {
	m := make(map[string]*Case)
	var order []*Case
	for _, r := range rep.Runs {
		for _, c := range r.Cases {
			k := diffKey(c)
			if first := m[k]; first != nil {
				return nil, nil, fmt.Errorf("pair %s cases: %q appears twice (%s:%d and %s:%d)", side, c.Name, first.Source, first.Line, c.Source, c.Line)
			}
			m[k] = c
			order = append(order, c)
		}
	}
	return m, order, nil
}

// Diff compares OLD with NEW.
func Diff(old, new *Report) (*DiffResult, error) {
	oldIdx, oldOrder, err := index(old, "OLD")
	if err != nil {
		return nil, err
	}
	newIdx, newOrder, err := index(new, "NEW")
	if err != nil {
		return nil, err
	}
	d := &DiffResult{
		Old: DiffSide{Sources: old.Sources, Counts: old.Counts},
		New: DiffSide{Sources: new.Sources, Counts: new.Counts},
	}
	for _, o := range oldOrder {
		n := newIdx[diffKey(o)]
		ch := CaseChange{Name: o.Name, Image: o.Image, Harness: o.Harness, TaskID: o.TaskID, Old: o.Status, New: Missing}
		if n != nil {
			ch.New = n.Status
		}
		switch {
		case n == nil || (o.Status == StatusPassed && n.Status != StatusPassed):
			ch.Checks = checkChanges(o, n)
			d.Regressions = append(d.Regressions, ch)
		case o.Status != StatusPassed && n.Status == StatusPassed:
			ch.Checks = checkChanges(o, n)
			d.Fixes = append(d.Fixes, ch)
		default:
			d.Unchanged++
			if n.Status != StatusPassed {
				d.StillNotPassed++
			}
		}
	}
	for _, n := range newOrder {
		if oldIdx[diffKey(n)] == nil {
			d.Added = append(d.Added, CaseChange{Name: n.Name, Image: n.Image, Harness: n.Harness, TaskID: n.TaskID, Old: Missing, New: n.Status})
		}
	}
	return d, nil
}

func checkChanges(o, n *Case) []CheckChange {
	var newChecks []Check
	if n != nil {
		newChecks = n.Evidence.Checks
	}
	byID := make(map[string]Check, len(newChecks))
	for _, c := range newChecks {
		byID[c.ID] = c
	}
	var out []CheckChange
	seen := make(map[string]bool)
	for _, oc := range o.Evidence.Checks {
		seen[oc.ID] = true
		nc, ok := byID[oc.ID]
		switch {
		case !ok:
			if n != nil {
				out = append(out, CheckChange{ID: oc.ID, Clause: oc.Clause, Old: oc.Status, New: Missing, Detail: oc.Detail})
			}
		case nc.Status != oc.Status:
			out = append(out, CheckChange{ID: oc.ID, Clause: nc.Clause, Old: oc.Status, New: nc.Status, Detail: nc.Detail})
		}
	}
	for _, nc := range newChecks {
		if !seen[nc.ID] {
			out = append(out, CheckChange{ID: nc.ID, Clause: nc.Clause, Old: Missing, New: nc.Status, Detail: nc.Detail})
		}
	}
	return out
}

// WriteDiff prints the diff as plain text: the pass rates, then the
// pass->fail and fail->pass lists with the checks that changed.
func WriteDiff(w io.Writer, d *DiffResult) error {
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	side := func(label string, s DiffSide) {
		p("%s %s: %d/%d passed (%.1f%%; %d skipped, not counted), %d failed, %d unknown\n", label, strings.Join(s.Sources, ", "),
			s.Counts.Passed, s.Counts.Cases-s.Counts.Skipped, 100*s.Counts.PassRate(), s.Counts.Skipped, s.Counts.Failed, s.Counts.Unknown)
	}
	side("OLD", d.Old)
	side("NEW", d.New)
	p("pass rate: %.1f%% -> %.1f%% (%+.1f points)\n", 100*d.Old.Counts.PassRate(), 100*d.New.Counts.PassRate(),
		100*(d.New.Counts.PassRate()-d.Old.Counts.PassRate()))
	list := func(title string, cs []CaseChange) {
		p("\n%s: %d\n", title, len(cs))
		for _, c := range cs {
			p("  %s: %s -> %s\n", c.Name, c.Old, c.New)
			for _, ch := range c.Checks {
				p("    %s (%s): %s -> %s", ch.ID, clauseOr(ch.Clause), ch.Old, ch.New)
				if ch.Detail != "" {
					p(": %s", oneLine(ch.Detail))
				}
				p("\n")
			}
		}
	}
	list("pass->fail (regressions, including cases missing from NEW)", d.Regressions)
	list("fail->pass (fixes)", d.Fixes)
	list("new in NEW", d.Added)
	p("\nregressions: %d, fixes: %d, new: %d, unchanged: %d (%d of them not passed)\n",
		len(d.Regressions), len(d.Fixes), len(d.Added), d.Unchanged, d.StillNotPassed)
	return bw.Flush()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
