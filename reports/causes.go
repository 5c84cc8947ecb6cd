package reports

import (
	"fmt"
	"strings"
)

// CauseHeadline is one line saying why a case did not pass: its first
// failed (else unknown) check and that check's detail, else the report's
// reason, else the skip reason.
func CauseHeadline(c *Case) string {
	e := c.Evidence
	for _, want := range []Status{StatusFailed, StatusUnknown} {
		for _, ch := range e.Checks {
			if ch.Status == want {
				return fmt.Sprintf("%s %s: %s", ch.ID, ch.Status, ch.Detail)
			}
		}
	}
	if len(c.Reasons) > 0 {
		return strings.Join(c.Reasons, "; ")
	}
	if e.SkipReason != "" {
		return e.SkipReason
	}
	return string(c.Status)
}

// CauseLines are the decisive lines of a case that did not pass, in the
// order a reader needs them (contract §9 reports): every failed or unknown
// check with its clause and detail, the report's reasons, the interrupt,
// warden's runner's own line, the last lines of the harness's stderr and
// stdout, and where the case's files are. Text from the sandbox is made
// Printable by each renderer.
func CauseLines(c *Case) []string {
	e := c.Evidence
	var out []string
	for _, ch := range e.Checks {
		if ch.Status == StatusFailed || ch.Status == StatusUnknown {
			out = append(out, fmt.Sprintf("check %s %s (%s): %s", ch.ID, ch.Status, clauseOr(ch.Clause), ch.Detail))
		}
	}
	for _, why := range c.Reasons {
		out = append(out, "note: "+why)
	}
	if e.SkipReason != "" {
		out = append(out, "skipped: "+e.SkipReason)
	}
	if e.Interrupted != "" {
		out = append(out, fmt.Sprintf("interrupted: %s (attempt %d; --resume runs it again)", e.Interrupted, e.AttemptNumber()))
	}
	if e.Infrastructure != "" {
		out = append(out, fmt.Sprintf("infrastructure: %s (attempt %d; --resume runs it again)", e.Infrastructure, e.AttemptNumber()))
	}
	if e.RunnerSaid != "" {
		out = append(out, "warden run said: "+e.RunnerSaid)
	}
	for _, t := range []struct {
		name  string
		lines []string
	}{{"stderr", e.HarnessStderrTail}, {"stdout", e.HarnessStdoutTail}} {
		if len(t.lines) == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("harness %s, last %d line(s):", t.name, len(t.lines)))
		for _, l := range t.lines {
			out = append(out, "  "+l)
		}
	}
	if e.CaseDir != "" {
		out = append(out, "case files: "+e.CaseDir+"/")
	}
	return out
}
