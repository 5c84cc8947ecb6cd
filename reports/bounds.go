package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Record bounds (contract §8 evidence; docs/threat-model.md, Records and
// reports). One case's record is one line of evidence.jsonl, and every
// report, diff, merge and --resume reads the whole file: a record must
// stay far below what those readers accept (MaxLineBytes), whatever the
// harness made, or one hostile case takes every other case's reports
// with it. Writers bound a record here, in two steps: every list and
// string derived from harness input is capped field by field (Bound,
// with counts of what was left out), and a record still over
// MaxRecordBytes is cut by FitBudget's rule, which the writer must report
// as a failed check. This is the one place the bounds are named.

// MaxRecordBytes is one record's budget: its JSON line, without the
// newline, is at most this long. It is a sixteenth of MaxLineBytes, so a
// record written within it is always read.
const MaxRecordBytes = 1 << 20

// Caps are the field-by-field bounds of a record's harness-derived
// content. Bound applies them; FitBudget tightens them.
type Caps struct {
	// Text bounds a string from the harness (the deliverable, a path, a
	// receipt's error, runner_said, a step's text), in bytes.
	Text int
	// Detail bounds a check's detail (which may quote harness text).
	Detail int
	// Name bounds a name: a tool call id, a tool's name, an item type,
	// a process's comm.
	Name int
	// List bounds a list from the harness: processes, withheld captures,
	// observation gaps, item types, a receipt's lists.
	List int
	// StepIDs bounds each list of one model step: its tool calls (names
	// and ids) and the ids of the tool results its request carried.
	StepIDs int
	// Steps bounds the model steps kept.
	Steps int
}

// DefaultCaps are the bounds every record is written within.
var DefaultCaps = Caps{Text: 4096, Detail: 4096, Name: 64, List: 100, StepIDs: 8, Steps: MaxModelSteps}

// quarter is c with every bound a quarter (not below a floor that keeps
// the field legible).
func (c Caps) quarter() Caps {
	q := func(v, floor int) int { return max(floor, v/4) }
	return Caps{Text: q(c.Text, 64), Detail: q(c.Detail, 64), Name: q(c.Name, 24), List: q(c.List, 1),
		StepIDs: c.StepIDs / 4, Steps: c.Steps / 4}
}

func (c Caps) String() string {
	return fmt.Sprintf("text %d bytes, details %d, names %d, lists %d, %d ids per step, %d steps", c.Text, c.Detail, c.Name, c.List, c.StepIDs, c.Steps)
}

// Cut returns s if it has at most n bytes; otherwise its start, cut at a
// character boundary, and a note of how many bytes were cut
// ("…[3960 bytes cut]"), together at most n bytes (n of at least 32).
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	keep := max(0, n-len("…[ bytes cut]")-len(strconv.Itoa(len(s))))
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + "…[" + strconv.Itoa(len(s)-keep) + " bytes cut]"
}

// cutStrings keeps at most n strings (n >= 1), each Cut to size, the
// last of them noting how many were left out ("… 12 more").
func cutStrings(l []string, n, size int) []string {
	if len(l) > n {
		l = append(l[:n-1:n-1], fmt.Sprintf("… %d more", len(l)-n+1))
	}
	for i := range l {
		l[i] = Cut(l[i], size)
	}
	return l
}

// cutProcesses keeps at most n processes, their comm cut, and adds what
// it left out to *omitted.
func cutProcesses(l []Process, c Caps, omitted *int) []Process {
	if len(l) > c.List {
		*omitted += len(l) - c.List
		l = l[:c.List:c.List]
	}
	for i := range l {
		l[i].Comm = Cut(l[i].Comm, c.Name)
	}
	return l
}

// cutCounts keeps at most c.List keys of m (the first in sorted order),
// each cut to c.Name, and counts the rest under "…other": no count is
// lost, only its name.
func cutCounts(m map[string]int, c Caps) map[string]int {
	if len(m) <= c.List && !slices.ContainsFunc(keysOf(m), func(k string) bool { return len(k) > c.Name }) {
		return m
	}
	keys := keysOf(m)
	slices.Sort(keys)
	out := make(map[string]int, c.List)
	for i, k := range keys {
		if i >= c.List-1 && len(keys) > c.List {
			out["…other"] += m[k]
			continue
		}
		out[Cut(k, c.Name)] += m[k]
	}
	return out
}

func keysOf(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// Bound caps every harness-derived list and string of e to c, field by
// field (docs/reports.md, Record bounds): lists keep their first entries
// and count the rest (`dropped`, `*_omitted`, a last "… N more" entry,
// "…other" for item types), strings keep their start and say how many
// bytes were cut. Nothing else is touched: the case's identity, its
// checks' ids, statuses and clauses, its stages. Bound with the same caps
// again changes nothing.
func (e *Evidence) Bound(c Caps) {
	e.SkipReason = Cut(e.SkipReason, c.Text)
	e.Interrupted = Cut(e.Interrupted, c.Text)
	e.Infrastructure = Cut(e.Infrastructure, c.Text)
	e.RunnerSaid = Cut(e.RunnerSaid, c.Text)
	e.OutputItemTypes = cutCounts(e.OutputItemTypes, c)
	e.CloseObservationGaps = cutStrings(e.CloseObservationGaps, c.List, c.Name)
	e.HarnessStderrTail = cutStrings(e.HarnessStderrTail, TailLines, min(c.Text, TailBytes))
	e.HarnessStdoutTail = cutStrings(e.HarnessStdoutTail, TailLines, min(c.Text, TailBytes))
	e.ActivationReceipt.bound(c)
	e.CloseReceipt.bound(c)
	if b := e.Before; b != nil {
		b.OS, b.Python3, b.Bash = Cut(b.OS, c.Text), Cut(b.Python3, c.Text), Cut(b.Bash, c.Text)
		b.Processes = cutProcesses(b.Processes, c, &b.ProcessesOmitted)
	}
	if a := e.After; a != nil {
		a.Deliverable, a.Python3, a.Bash = Cut(a.Deliverable, c.Text), Cut(a.Python3, c.Text), Cut(a.Bash, c.Text)
		a.HarnessProcesses = cutProcesses(a.HarnessProcesses, c, &a.HarnessProcessesOmitted)
	}
	if len(e.CapturesWithheld) > c.List {
		e.CapturesWithheldOmitted += len(e.CapturesWithheld) - c.List
		e.CapturesWithheld = e.CapturesWithheld[:c.List:c.List]
	}
	for i := range e.CapturesWithheld {
		w := &e.CapturesWithheld[i]
		w.Path, w.Target = Cut(w.Path, max(64, c.Text/4)), Cut(w.Target, max(64, c.Text/4))
	}
	for i := range e.Checks {
		e.Checks[i].Detail = Cut(e.Checks[i].Detail, c.Detail)
	}
	e.ModelSteps.bound(c)
	if h := e.HarnessRuntime; h != nil {
		h.CLIVersion, h.CLIVersionError = Cut(h.CLIVersion, c.Text), Cut(h.CLIVersionError, c.Text)
		h.VersionOutput = Cut(h.VersionOutput, c.Text)
	}
}

// bound caps the model steps: at most c.Steps steps (the rest counted in
// Dropped); in each, at most c.StepIDs tool calls and tool result ids
// (counted in ToolCallsOmitted and ToolResultIDsOmitted), every name and
// id cut to c.Name. The chain's own id is AskID, kept whatever its step.
func (m *ModelSteps) bound(c Caps) {
	if m == nil {
		return
	}
	m.Model, m.AskID = Cut(m.Model, c.Text), Cut(m.AskID, c.Name)
	m.Missing, m.Broken = Cut(m.Missing, c.Detail), Cut(m.Broken, c.Detail)
	m.SandboxAuth = cutCounts(m.SandboxAuth, c)
	if len(m.Steps) > c.Steps {
		m.Dropped += len(m.Steps) - c.Steps
		m.Steps = m.Steps[:c.Steps:c.Steps]
	}
	for i := range m.Steps {
		s := &m.Steps[i]
		if len(s.ToolCalls) > c.StepIDs {
			s.ToolCallsOmitted += len(s.ToolCalls) - c.StepIDs
			s.ToolCalls = s.ToolCalls[:c.StepIDs:c.StepIDs]
		}
		if len(s.ToolCallIDs) > len(s.ToolCalls) {
			s.ToolCallIDs = s.ToolCallIDs[:len(s.ToolCalls):len(s.ToolCalls)]
		}
		if len(s.ToolResultIDs) > c.StepIDs {
			s.ToolResultIDsOmitted += len(s.ToolResultIDs) - c.StepIDs
			s.ToolResultIDs = s.ToolResultIDs[:c.StepIDs:c.StepIDs]
		}
		for _, l := range [][]string{s.ToolCalls, s.ToolCallIDs, s.ToolResultIDs} {
			for j := range l {
				l[j] = Cut(l[j], c.Name)
			}
		}
		s.Text = Cut(s.Text, c.Text)
	}
}

// bound caps a receipt's error and every list and string of the fields
// it keeps as read (reached, survivors, ...: processes the harness made),
// counting a list's left-out entries in NAME_omitted.
func (r *Receipt) bound(c Caps) {
	if r == nil {
		return
	}
	if r.Error != nil {
		s := Cut(*r.Error, c.Text)
		r.Error = &s
	}
	r.Cause = Cut(r.Cause, c.Name)
	for k, raw := range r.Extra {
		out, omitted, changed := boundJSON(raw, c)
		if changed {
			r.Extra[k] = out
		}
		if omitted > 0 {
			prev, _ := strconv.Atoi(string(r.Extra[k+"_omitted"]))
			r.Extra[k+"_omitted"] = json.RawMessage(strconv.Itoa(prev + omitted))
		}
	}
}

// boundJSON caps a JSON value: arrays to c.List entries (how many were
// left out is returned), strings to c.Text bytes, at any depth. A value
// that is not JSON becomes a JSON string of its text, cut.
func boundJSON(raw json.RawMessage, c Caps) (json.RawMessage, int, bool) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		b, _ := json.Marshal(Cut(string(raw), c.Text))
		return b, 0, true
	}
	omitted, changed := 0, false
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case []any:
			if len(x) > c.List {
				omitted += len(x) - c.List
				x, changed = x[:c.List], true
			}
			for i := range x {
				x[i] = walk(x[i])
			}
			return x
		case map[string]any:
			for k := range x {
				x[k] = walk(x[k])
			}
		case string:
			if len(x) > c.Text {
				changed = true
				return Cut(x, c.Text)
			}
		}
		return v
	}
	v = walk(v)
	if !changed {
		return raw, 0, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(Cut(string(raw), c.Text))
	}
	return b, omitted, true
}

// ErrOverBudget says a record could not be cut within the budget: what
// is left (its identity and its checks) is itself too large.
var ErrOverBudget = errors.New("record over its budget")

// EncodedSize is the length of e's JSON line, without the newline.
func EncodedSize(e *Evidence) int {
	b, err := json.Marshal(e)
	if err != nil {
		return 0
	}
	return len(b)
}

// FitBudget cuts e until its JSON line takes at most budget bytes, by
// this rule, one step at a time, stopping at the first that fits:
//  1. Bound with DefaultCaps (what every record gets);
//  2. Bound again with every cap a quarter, up to three times (text
//     4096 -> 1024 -> 256 -> 64 bytes, lists 100 -> 25 -> 6 -> 1, ids
//     per step 8 -> 2 -> 0, steps 32 -> 8 -> 2 -> 0);
//  3. only the case's identity, verdict, provenance digests, stages and
//     checks are kept (check details cut to 64 bytes).
//
// It returns the size e had before and which step made it fit ("" when it
// fitted as it came), or ErrOverBudget when even step 3 does not fit.
// The writer fails the case on a check naming what was cut.
func FitBudget(e *Evidence, budget int) (before int, step string, err error) {
	before = EncodedSize(e)
	if before <= budget {
		return before, "", nil
	}
	c := DefaultCaps
	e.Bound(c)
	for i := 0; ; i++ {
		if EncodedSize(e) <= budget {
			return before, "harness-derived fields cut to " + c.String(), nil
		}
		if i == 3 {
			break
		}
		c = c.quarter()
		e.Bound(c)
	}
	e.keepOnlyVerdict()
	if EncodedSize(e) <= budget {
		return before, "only the case's identity, verdict, provenance, stages and checks kept (details cut to 64 bytes)", nil
	}
	return before, "", fmt.Errorf("%w: case %q is still %d bytes with only its identity and checks (budget %d)", ErrOverBudget, e.CaseID, EncodedSize(e), budget)
}

// keepOnlyVerdict drops everything of e but what places the case and its
// verdict: identity, status, provenance digests, stages, and the checks
// with their details cut to 64 bytes.
func (e *Evidence) keepOnlyVerdict() {
	checks := slices.Clone(e.Checks)
	for i := range checks {
		checks[i].Detail = Cut(checks[i].Detail, 64)
	}
	*e = Evidence{Schema: e.Schema, RunID: e.RunID, CaseID: e.CaseID, TaskID: e.TaskID, Attempt: e.Attempt,
		Interrupted: Cut(e.Interrupted, 64), Infrastructure: Cut(e.Infrastructure, 64), Shard: e.Shard, ShardRunID: e.ShardRunID, MatrixSHA256: e.MatrixSHA256,
		MatrixCases: e.MatrixCases, Harness: e.Harness, Image: e.Image, Scenario: e.Scenario,
		LaunchDeadlineSeconds: e.LaunchDeadlineSeconds, ImageID: e.ImageID, Status: e.Status,
		SkipReason: Cut(e.SkipReason, 64), Passed: e.Passed, SeedSeconds: e.SeedSeconds, Seconds: e.Seconds,
		ModelCalls: e.ModelCalls, ErrorType: e.ErrorType, Checks: checks, Stages: e.Stages, CaseDir: e.CaseDir,
		Provenance: Provenance{WardenSHA256: e.WardenSHA256, AdapterSHA256: e.AdapterSHA256, SuiteVersion: e.SuiteVersion,
			StartedAt: e.StartedAt, EndedAt: e.EndedAt, Host: e.Host}}
}
