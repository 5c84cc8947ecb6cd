package reports

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// WriteMarkdown renders rep as GitHub-flavoured Markdown with no HTML, so it
// can go straight into a GitHub step summary (which caps a summary at 1 MiB:
// passed cases take one table row each, only the others get a section).
func WriteMarkdown(w io.Writer, rep *Report) error {
	bw := bufio.NewWriter(w)
	// Every line is made Printable once more, whatever the field: text
	// from the sandbox never reaches a terminal that cats the file raw.
	p := func(format string, args ...any) { bw.WriteString(Printable(fmt.Sprintf(format, args...), true)) }

	var sl slugger
	title := "sandproof report: " + string(rep.Status)
	sl.add(title)
	p("# %s\n\n", mdText(title))
	p("%s in %d run(s).\n", countsLine(rep.Counts), len(rep.Runs))
	if len(rep.Runs) == 0 {
		p("\nNo cases were recorded, so nothing is proven: the status is unknown.\n")
	}
	for _, r := range rep.Runs {
		// The matrix links to headings further down, so their GitHub
		// slugs are worked out first, in document order.
		sl.add("Run " + r.ID + ": " + string(r.Status))
		sl.add("Cases")
		links := make(map[*Case]string)
		for i, c := range detailed(r) {
			if i == 0 {
				sl.add("Cases not passed")
			}
			links[c] = sl.add(c.Name)
		}
		p("\n## Run %s: %s\n\n", mdCode(r.ID), r.Status)
		p("%s.\n\n", countsLine(r.Counts))
		writeMarkdownMatrix(p, r, links)
		writeMarkdownProvenance(p, r)
		writeMarkdownCases(p, r)
		writeMarkdownDetails(p, r)
	}
	return bw.Flush()
}

func countsLine(c Counts) string {
	return fmt.Sprintf("%d case(s): %d passed, %d failed, %d skipped, %d unknown", c.Cases, c.Passed, c.Failed, c.Skipped, c.Unknown)
}

// detailed lists the cases that get a section of their own: every case that
// did not plainly pass.
func detailed(r *Run) []*Case {
	var out []*Case
	for _, c := range r.Cases {
		if c.Status != StatusPassed || len(c.Reasons) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// writeMarkdownMatrix draws the run's verdictGrid: a row per harness x
// image (the harness named on its first row, the harnesses with a failure
// first), a column per scenario, each cell linked to its case.
func writeMarkdownMatrix(p func(string, ...any), r *Run, links map[*Case]string) {
	byAnchor := make(map[string]*Case, len(links))
	for c := range links {
		byAnchor[c.Anchor] = c
	}
	g := newVerdictGrid(r)
	p("| harness | image |")
	for _, col := range g.Columns {
		p(" %s |", mdText(col))
	}
	p("\n|---|---|")
	for range g.Columns {
		p("---|")
	}
	p("\n")
	for _, grp := range g.Groups {
		for i, row := range grp.Rows {
			name := ""
			if i == 0 {
				name = mdText(grp.Harness)
			}
			p("| %s | %s |", name, mdText(row.Image))
			for _, cell := range row.Cells {
				slug := links[byAnchor[cell.Anchor]]
				if cell.Anchor == "" || slug == "" {
					p(" %s |", cell.Label)
					continue
				}
				p(" [%s](#%s) |", cell.Label, slug)
			}
			p("\n")
		}
	}
	p("\n")
}

func writeMarkdownProvenance(p func(string, ...any), r *Run) {
	pv := r.Provenance
	p("**Provenance**\n\n")
	p("- warden sha256: %s\n", joinCode(pv.WardenSHA256))
	p("- adapter sha256: %s\n", joinDigests(pv.AdapterSHA256))
	for _, h := range pv.Harnesses {
		p("- harness %s: %s\n", mdText(h.Name), mdText(RuntimeSummary(&h.Runtime)))
	}
	p("- image ids: %s\n", joinDigests(pv.ImageIDs))
	p("- suite version: %s\n", joinCode(pv.SuiteVersions))
	p("- host: %s\n", joinCode(pv.Hosts))
	for _, n := range pv.Networks {
		if n == "host" {
			p("- network: %s **(%s)**\n", mdCode(n), NetworkFlag)
		} else {
			p("- network: %s\n", mdCode(n))
		}
	}
	if len(pv.Engines) > 0 {
		p("- engine: %s\n", joinCode(pv.Engines))
	}
	p("- started: %s, ended: %s%s\n\n", fmtTime(pv.StartedAt), fmtTime(pv.EndedAt), fmtSpan(pv.StartedAt, pv.EndedAt))
}

func writeMarkdownCases(p func(string, ...any), r *Run) {
	p("### Cases\n\n")
	p("| case | status | activation receipt | close receipt | markers | session dir removed | harness processes left | python3 before → after | observation gaps |\n")
	p("|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range r.Cases {
		e := c.Evidence
		status := ShortStatus(c.Status)
		if c.Status == StatusPassed || c.Status == StatusFailed {
			status += " " + FormatSeconds(e.Seconds)
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			mdText(c.Name), status,
			mdText(receiptSummary(e.ActivationReceipt, 60)), mdText(receiptSummary(e.CloseReceipt, 60)),
			markersSummary(e), yesNo(e.AdapterSessionDirRemoved, e), procsSummary(e),
			mdText(pythonSummary(e)), mdText(gapsSummary(e.CloseObservationGaps)))
	}
	p("\n")
}

// writeMarkdownDetails gives every case that did not plainly pass a
// section of its own: the failed checks with their clause, the full
// receipts, and the evidence behind the verdict.
func writeMarkdownDetails(p func(string, ...any), r *Run) {
	first := true
	for _, c := range detailed(r) {
		if first {
			p("### Cases not passed\n")
			first = false
		}
		e := c.Evidence
		p("\n#### %s\n\n", mdText(c.Name))
		p("- status: **%s** (record says %s); case %s from %s line %d\n", c.Status, c.RecordStatus, mdCode(c.ID), mdText(c.Source), c.Line)
		// The decisive lines first: what failed and what the harness
		// said (contract §9 reports).
		for _, ch := range e.Checks {
			if ch.Status == StatusPassed {
				continue
			}
			p("- check %s **%s** (%s): %s\n", mdCode(ch.ID), ch.Status, mdText(clauseOr(ch.Clause)), mdText(ch.Detail))
		}
		for _, why := range c.Reasons {
			p("- note: %s\n", mdText(why))
		}
		if e.SkipReason != "" {
			p("- skip reason: %s\n", mdText(e.SkipReason))
		}
		if e.Interrupted != "" {
			p("- interrupted: %s (attempt %d; `--resume` runs it again)\n", mdText(e.Interrupted), e.AttemptNumber())
		}
		if e.Infrastructure != "" {
			p("- infrastructure: %s (attempt %d; `--resume` runs it again)\n", mdText(e.Infrastructure), e.AttemptNumber())
		}
		if e.RunnerSaid != "" {
			p("- warden run said: %s\n", mdCode(e.RunnerSaid))
		}
		for _, tl := range []struct {
			name  string
			lines []string
		}{{"stderr", e.HarnessStderrTail}, {"stdout", e.HarnessStdoutTail}} {
			if len(tl.lines) > 0 {
				p("- harness %s, last %d line(s):\n\n%s\n", tl.name, len(tl.lines), mdFence(tl.lines, "  "))
			}
		}
		if e.CaseDir != "" {
			p("- case files: [%s/](%s/)\n", mdText(e.CaseDir), mdLink(e.CaseDir))
		}
		if e.ErrorType != nil {
			p("- error type: %s\n", mdCode(*e.ErrorType))
		}
		if c.Status == StatusSkipped {
			continue
		}
		p("- activation receipt: %s\n", mdText(receiptSummary(e.ActivationReceipt, 0)))
		p("- close receipt: %s\n", mdText(receiptSummary(e.CloseReceipt, 0)))
		if e.After != nil {
			for _, m := range e.After.MarkersLost {
				p("- marker lost: %s\n", mdCode(m))
			}
			for _, pr := range e.After.HarnessProcesses {
				p("- harness process left: pid %d start %d %s\n", pr.PID, pr.StartTime, mdText(pr.Comm))
			}
		}
		p("- adapter session dir removed: %s\n", yesNo(e.AdapterSessionDirRemoved, e))
		p("- python3 before → after: %s\n", mdText(pythonSummary(e)))
		p("- observation gaps: %s\n", mdText(gapsSummary(e.CloseObservationGaps)))
		if e.ModelSteps != nil {
			p("- model steps: %s\n", mdText(ModelStepsSummary(e)))
			for _, st := range stepLines(e) {
				p("  - %s\n", mdText(st))
			}
		}
	}
	if !first {
		p("\n")
	}
}

func clauseOr(c string) string {
	if c == "" {
		return "no clause"
	}
	return c
}

// receiptSummary puts the four receipt facts a reader checks first on one
// line; max > 0 cuts a long error message.
func receiptSummary(r *Receipt, max int) string {
	if r == nil {
		return "none"
	}
	var b strings.Builder
	if r.CleanupConfirmed {
		b.WriteString("confirmed")
	} else {
		b.WriteString("NOT confirmed")
	}
	b.WriteString(", rc ")
	if r.ReturnCode == nil {
		b.WriteString("null")
	} else {
		b.WriteString(strconv.Itoa(*r.ReturnCode))
	}
	if r.TimedOut {
		b.WriteString(", timed out")
	}
	if r.Cause != "" {
		b.WriteString(", cause " + r.Cause)
	}
	if r.Error != nil {
		msg := *r.Error
		if max > 0 && len([]rune(msg)) > max {
			msg = string([]rune(msg)[:max]) + "…"
		}
		b.WriteString(", error " + strconv.Quote(msg))
	}
	return b.String()
}

func markersSummary(e *Evidence) string {
	if e.After == nil {
		return "n/a"
	}
	return fmt.Sprintf("%d kept, %d lost", len(e.After.MarkersKept), len(e.After.MarkersLost))
}

func procsSummary(e *Evidence) string {
	if e.After == nil {
		return "n/a"
	}
	return strconv.Itoa(len(e.After.HarnessProcesses))
}

// yesNo shows a boolean the verifier recorded; for a case that never ran
// (no after-state) false means "not observed", not "no".
func yesNo(v bool, e *Evidence) string {
	switch {
	case v:
		return "yes"
	case e.After == nil:
		return "n/a"
	}
	return "no"
}

func pythonSummary(e *Evidence) string {
	before, after := "?", "?"
	if e.Before != nil {
		before = e.Before.Python3
	}
	if e.After == nil {
		return before + " → n/a"
	}
	after = e.After.Python3
	if before == after {
		return before + " → unchanged"
	}
	return before + " → " + after + " (changed)"
}

func gapsSummary(g []string) string {
	if len(g) == 0 {
		return "none"
	}
	return strings.Join(g, ", ")
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.UTC().Format(time.RFC3339)
}

func fmtSpan(a, b time.Time) string {
	if a.IsZero() || b.IsZero() {
		return ""
	}
	return " (" + b.Sub(a).Round(time.Second).String() + ")"
}

func joinCode(v []string) string {
	if len(v) == 0 {
		return "unknown"
	}
	out := make([]string, len(v))
	for i, s := range v {
		out[i] = mdCode(s)
	}
	if len(v) > 1 {
		return strings.Join(out, ", ") + " (more than one!)"
	}
	return out[0]
}

func joinDigests(v []Digest) string {
	if len(v) == 0 {
		return "unknown"
	}
	out := make([]string, len(v))
	for i, d := range v {
		out[i] = mdText(d.Name) + " " + mdCode(d.Value)
	}
	return strings.Join(out, ", ")
}

var mdEscaper = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`,
	"<", "&lt;", ">", "&gt;", "|", `\|`, "#", `\#`, "\r", " ", "\n", " ",
)

// mdText escapes s so that it shows literally inside a GFM table cell or a
// list item: no emphasis, links, HTML or cell breaks.
// mdFence shows lines verbatim in a fenced code block indented by indent
// (inside a list item), its fence longer than any backtick run in them so
// the text cannot close it.
func mdFence(lines []string, indent string) string {
	longest := 0
	for _, l := range lines {
		run := 0
		for _, r := range l {
			if r == '`' {
				run++
				longest = max(longest, run)
			} else {
				run = 0
			}
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	var b strings.Builder
	b.WriteString(indent + fence + "text\n")
	for _, l := range lines {
		b.WriteString(indent + Printable(l, false) + "\n")
	}
	b.WriteString(indent + fence + "\n")
	return b.String()
}

// mdLink escapes a relative path for a link target.
func mdLink(p string) string {
	return strings.NewReplacer(" ", "%20", "(", "%28", ")", "%29", "<", "%3C", ">", "%3E").Replace(Printable(p, false))
}

func mdText(s string) string { return mdEscaper.Replace(Printable(s, true)) }

var mdCodeEscaper = strings.NewReplacer("`", "'", "|", `\|`, "\r", " ", "\n", " ")

// mdCode shows s as a code span; GFM tables still split code spans at "|",
// hence the escape.
func mdCode(s string) string {
	if s == "" {
		return `""`
	}
	return "`" + mdCodeEscaper.Replace(Printable(s, true)) + "`"
}

// slugger gives headings the anchors GitHub gives them (github-slugger):
// lower case, punctuation and symbols dropped, spaces turned into "-", and
// "-1", "-2", ... appended to repeats.
type slugger struct{ seen map[string]int }

func (s *slugger) add(heading string) string {
	if s.seen == nil {
		s.seen = make(map[string]int)
	}
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	base := b.String()
	slug := base
	if n := s.seen[base]; n > 0 {
		slug = fmt.Sprintf("%s-%d", base, n)
	}
	s.seen[base]++
	return slug
}

// RuntimeSummary says in one line what harness was certified.
func RuntimeSummary(h *HarnessRuntime) string {
	if h == nil {
		return "unknown"
	}
	var parts []string
	if h.Package != "" {
		parts = append(parts, fmt.Sprintf("%s@%s (%s)", h.Package, h.Version, h.Integrity))
	} else if h.Preparer != "" {
		parts = append(parts, "prepared by "+h.Preparer)
	}
	for _, f := range h.Files {
		parts = append(parts, fmt.Sprintf("file %s sha256 %s", f.Name, f.Value))
	}
	if h.TreeSHA256 != "" {
		parts = append(parts, fmt.Sprintf("runtime tree sha256 %s (%d files)", h.TreeSHA256, h.TreeFiles))
	}
	switch {
	case h.CLIVersion != "" && h.CLIVersionError == "":
		parts = append(parts, fmt.Sprintf("--version %q", h.CLIVersion))
	case h.CLIVersionError != "":
		parts = append(parts, fmt.Sprintf("--version failed: %s", h.CLIVersionError))
	}
	if len(parts) == 0 {
		return "unknown"
	}
	return strings.Join(parts, "; ")
}

// ModelStepsSummary says in one line what the relay saw of the model: the
// calls, and where the challenge round trip happened or which step is
// missing.
func ModelStepsSummary(e *Evidence) string {
	m := e.ModelSteps
	if m == nil {
		return fmt.Sprintf("%d model calls (no relay transcript)", e.ModelCalls)
	}
	s := fmt.Sprintf("%d model calls to %s", e.ModelCalls, m.Model)
	var trip []string
	switch {
	case m.AskCall > 0 && m.AskID != "":
		trip = append(trip, fmt.Sprintf("call %d asked for the challenge (tool call %s)", m.AskCall, m.AskID))
	case m.AskCall > 0:
		trip = append(trip, fmt.Sprintf("call %d asked for the challenge", m.AskCall))
	}
	if m.ResultCall > 0 {
		trip = append(trip, fmt.Sprintf("call %d brought it back in a tool result", m.ResultCall))
	}
	if m.WriteCall > 0 {
		trip = append(trip, fmt.Sprintf("call %d wrote the deliverable", m.WriteCall))
	}
	if len(trip) > 0 {
		s += "; " + strings.Join(trip, ", ")
	}
	if m.Missing != "" {
		s += "; missing: " + m.Missing
	}
	if m.Broken != "" {
		s += "; broken: " + m.Broken
	}
	return s
}

// stepLines gives one line per model call.
func stepLines(e *Evidence) []string {
	if e.ModelSteps == nil {
		return nil
	}
	var out []string
	for _, st := range e.ModelSteps.Steps {
		l := fmt.Sprintf("call %d: HTTP %d", st.Seq, st.Status)
		if st.ToolResults > 0 {
			l += fmt.Sprintf(", %d tool result(s) in", st.ToolResults)
			if st.ChallengeBack {
				l += " (challenge back)"
			}
		}
		if len(st.ToolCalls) > 0 {
			l += ", called " + strings.Join(st.ToolCalls, ", ")
			if st.WritesDeliverable {
				l += " (writes the deliverable)"
			}
		}
		if st.Text != "" {
			l += fmt.Sprintf(", text %q", st.Text)
		}
		out = append(out, l)
	}
	if e.ModelSteps.Dropped > 0 {
		out = append(out, fmt.Sprintf("%d more call(s) not kept", e.ModelSteps.Dropped))
	}
	return out
}
