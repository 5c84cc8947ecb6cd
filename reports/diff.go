package reports

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Missing stands for a case or check present on one side of a diff only.
const Missing Status = "missing"

// DiffResult compares two reports case by case. Cases are paired by image,
// harness, scenario and task id, not by case_id, because two runs need not
// name their cases alike; a challenge case pairs as it did before scenarios
// (an old record without the field is a challenge case), so an old
// evidence file diffs cleanly against a new one. The lists are symmetric: swapping OLD and NEW swaps
// regressions of passed cases that still exist with fixes, and new cases
// with missing ones.
type DiffResult struct {
	Old DiffSide `json:"old"`
	New DiffSide `json:"new"`
	// Regressions: passed in OLD and failed, unknown or skipped in NEW;
	// and, unless AllowMissing, passed in OLD and missing from NEW (a
	// case that vanished proves nothing any more).
	Regressions []CaseChange `json:"regressions"`
	// Fixes: failed, unknown or skipped in OLD, passed in NEW.
	Fixes []CaseChange `json:"fixes"`
	// Added: in NEW only. Missing: in OLD only.
	Added   []CaseChange `json:"added"`
	Missing []CaseChange `json:"missing"`
	// Unchanged counts paired cases that neither regressed nor were
	// fixed; StillNotPassed is how many of them are not passed.
	Unchanged      int  `json:"unchanged"`
	StillNotPassed int  `json:"still_not_passed"`
	AllowMissing   bool `json:"allow_missing"`
}

// DiffSide summarises one side of a diff.
type DiffSide struct {
	Sources []string `json:"sources"`
	Counts  Counts   `json:"counts"`
}

// CaseChange is one case on one list.
type CaseChange struct {
	Name    string `json:"name"`
	Image   string `json:"image"`
	Harness string `json:"harness"`
	// Scenario is the case's scenario; empty for challenge.
	Scenario string `json:"scenario,omitempty"`
	TaskID   string `json:"task_id,omitempty"`
	Old      Status `json:"old"`
	New      Status `json:"new"`
	// SkipReason is why the case is skipped on the side that skipped it
	// (NEW's, else OLD's): a requirement the image lacks, or a scenario
	// its manifest marks unsupported.
	SkipReason string `json:"skip_reason,omitempty"`
	// Checks lists the checks whose status differs, in OLD's order, then
	// those only NEW has.
	Checks []CheckChange `json:"checks,omitempty"`
}

// CheckChange is one check whose status differs between the runs.
type CheckChange struct {
	ID     string `json:"id"`
	Clause string `json:"clause"`
	Old    Status `json:"old"`
	New    Status `json:"new"`
	// Detail is NEW's detail, or OLD's when NEW lacks the check.
	Detail string `json:"detail"`
}

// DiffOptions tune a diff.
type DiffOptions struct {
	// AllowMissing keeps a passing case that vanished from NEW off the
	// regressions (it is still listed as missing).
	AllowMissing bool
}

// Regressed reports whether the diff should fail a CI gate.
func (d *DiffResult) Regressed() bool { return len(d.Regressions) > 0 }

// diffKey pairs cases: image, harness and task, and the scenario for every
// scenario but challenge, so a challenge case keeps the key it had before
// scenarios existed.
func diffKey(c *Case) string {
	k := c.Image + "\x00" + c.Harness + "\x00" + c.TaskID
	if c.Scenario != "" {
		k += "\x00" + c.Scenario
	}
	return k
}

// change starts the CaseChange of a case on one side (old or new may be
// nil, the side that lacks it).
func change(old, new *Case) CaseChange {
	c, ch := old, CaseChange{Old: Missing, New: Missing}
	if c == nil {
		c = new
	}
	ch.Name, ch.Image, ch.Harness, ch.Scenario, ch.TaskID = c.Name, c.Image, c.Harness, c.Scenario, c.TaskID
	for _, side := range []*Case{old, new} {
		if side != nil && side.Evidence != nil && side.Evidence.SkipReason != "" {
			ch.SkipReason = side.Evidence.SkipReason
		}
	}
	if old != nil {
		ch.Old = old.Status
	}
	if new != nil {
		ch.New = new.Status
	}
	return ch
}

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
func Diff(old, new *Report, opts ...DiffOptions) (*DiffResult, error) {
	var o DiffOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	oldIdx, oldOrder, err := index(old, "OLD")
	if err != nil {
		return nil, err
	}
	newIdx, newOrder, err := index(new, "NEW")
	if err != nil {
		return nil, err
	}
	d := &DiffResult{
		Old:          DiffSide{Sources: old.Sources, Counts: old.Counts},
		New:          DiffSide{Sources: new.Sources, Counts: new.Counts},
		Regressions:  []CaseChange{},
		Fixes:        []CaseChange{},
		Added:        []CaseChange{},
		Missing:      []CaseChange{},
		AllowMissing: o.AllowMissing,
	}
	for _, oc := range oldOrder {
		n := newIdx[diffKey(oc)]
		ch := change(oc, n)
		if n == nil {
			d.Missing = append(d.Missing, ch)
			if oc.Status == StatusPassed && !o.AllowMissing {
				d.Regressions = append(d.Regressions, ch)
			}
			continue
		}
		switch {
		case oc.Status == StatusPassed && n.Status != StatusPassed:
			ch.Checks = checkChanges(oc, n)
			d.Regressions = append(d.Regressions, ch)
		case oc.Status != StatusPassed && n.Status == StatusPassed:
			ch.Checks = checkChanges(oc, n)
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
			d.Added = append(d.Added, change(nil, n))
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
			if c.SkipReason != "" {
				p("    skipped: %s\n", oneLine(c.SkipReason))
			}
			for _, ch := range c.Checks {
				p("    %s (%s): %s -> %s", ch.ID, clauseOr(ch.Clause), ch.Old, ch.New)
				if ch.Detail != "" {
					p(": %s", oneLine(ch.Detail))
				}
				p("\n")
			}
		}
	}
	list(regressionsTitle(d), d.Regressions)
	list("fixes (failed, unknown or skipped -> passed)", d.Fixes)
	list("new (in NEW only)", d.Added)
	list("missing (in OLD only)", d.Missing)
	p("\nregressions: %d, fixes: %d, new: %d, missing: %d, unchanged: %d (%d of them not passed)\n",
		len(d.Regressions), len(d.Fixes), len(d.Added), len(d.Missing), d.Unchanged, d.StillNotPassed)
	return bw.Flush()
}

func regressionsTitle(d *DiffResult) string {
	if d.AllowMissing {
		return "regressions (passed -> failed, unknown or skipped)"
	}
	return "regressions (passed -> failed, unknown, skipped or missing)"
}

// WriteDiffJSON writes the diff as one JSON document.
func WriteDiffJSON(w io.Writer, d *DiffResult) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return fmt.Errorf("write diff: %w", err)
	}
	return nil
}

// WriteDiffMarkdown writes the diff as GitHub-flavoured Markdown, to post
// on a pull request or a step summary: a table per list.
func WriteDiffMarkdown(w io.Writer, d *DiffResult) error {
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { bw.WriteString(Printable(fmt.Sprintf(format, args...), true)) }
	verdict := "no regression"
	if d.Regressed() {
		verdict = fmt.Sprintf("%d regression(s)", len(d.Regressions))
	}
	p("## sandproof diff: %s\n\n", verdict)
	p("| | OLD | NEW |\n|---|---|---|\n")
	src := func(s DiffSide) string {
		var v []string
		for _, x := range s.Sources {
			v = append(v, mdCode(x))
		}
		return strings.Join(v, "<br>")
	}
	rate := func(s DiffSide) string {
		return fmt.Sprintf("%d/%d (%.1f%%)", s.Counts.Passed, s.Counts.Cases-s.Counts.Skipped, 100*s.Counts.PassRate())
	}
	p("| evidence | %s | %s |\n", src(d.Old), src(d.New))
	p("| passed (skipped not counted) | %s | %s |\n", rate(d.Old), rate(d.New))
	p("| failed, unknown, skipped | %d, %d, %d | %d, %d, %d |\n", d.Old.Counts.Failed, d.Old.Counts.Unknown, d.Old.Counts.Skipped,
		d.New.Counts.Failed, d.New.Counts.Unknown, d.New.Counts.Skipped)
	list := func(title string, cs []CaseChange) {
		p("\n### %s: %d\n\n", mdText(strings.ReplaceAll(title, "->", "→")), len(cs))
		if len(cs) == 0 {
			p("None.\n")
			return
		}
		p("| case | OLD | NEW | checks that changed |\n|---|---|---|---|\n")
		for _, c := range cs {
			var checks []string
			for _, ch := range c.Checks {
				line := fmt.Sprintf("%s (%s): %s → %s", mdCode(ch.ID), mdText(clauseOr(ch.Clause)), ch.Old, ch.New)
				if ch.Detail != "" {
					line += ": " + mdText(oneLine(ch.Detail))
				}
				checks = append(checks, line)
			}
			if c.SkipReason != "" {
				checks = append(checks, "skipped: "+mdText(oneLine(c.SkipReason)))
			}
			p("| %s | %s | %s | %s |\n", mdText(c.Name), c.Old, c.New, strings.Join(checks, "<br>"))
		}
	}
	list(regressionsTitle(d), d.Regressions)
	list("fixes (failed, unknown or skipped -> passed)", d.Fixes)
	list("new (in NEW only)", d.Added)
	list("missing (in OLD only)", d.Missing)
	p("\n%d unchanged (%d of them not passed).\n", d.Unchanged, d.StillNotPassed)
	return bw.Flush()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
