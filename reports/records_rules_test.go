package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The record budget is far below what every reader accepts: a record
// written within it is always read.
func TestRecordBudgetIsFarBelowTheReadersLimit(t *testing.T) {
	if MaxRecordBytes*16 > MaxLineBytes {
		t.Errorf("MaxRecordBytes %d is more than a sixteenth of MaxLineBytes %d", MaxRecordBytes, MaxLineBytes)
	}
}

// oversizedRecord is a record whose every harness-derived list and
// string is far past its cap.
func oversizedRecord() *Evidence {
	e := okEvidence("r", "big", "debian-12", "pi")
	long := strings.Repeat("x", 10_000)
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = fmt.Sprintf("%04d", i) + strings.Repeat("i", 4000)
	}
	var steps []ModelStep
	for i := 0; i < 40; i++ {
		steps = append(steps, ModelStep{Seq: i + 1, ToolResults: 100, ToolResultIDs: ids, ToolCalls: slices.Clone(ids[:20]), ToolCallIDs: slices.Clone(ids[:20]), Text: long})
	}
	e.ModelSteps = &ModelSteps{Model: "scripted", SandboxAuth: map[string]int{"canary": 40}, Steps: steps, AskID: ids[0], Broken: long}
	e.OutputItemTypes = map[string]int{}
	for i := 0; i < 500; i++ {
		e.OutputItemTypes[fmt.Sprintf("type-%03d-%s", i, long[:100])] = 1
	}
	e.CloseObservationGaps = []string{long}
	for i := 0; i < 500; i++ {
		e.CloseObservationGaps = append(e.CloseObservationGaps, fmt.Sprint("gap", i))
	}
	for i := 0; i < 500; i++ {
		e.CapturesWithheld = append(e.CapturesWithheld, Withheld{Path: "/p/" + long, Kind: "symlink", Target: long})
		e.After.HarnessProcesses = append(e.After.HarnessProcesses, Process{PID: i, StartTime: 1, Comm: long})
	}
	e.Before = &Before{OS: long, Python3: long, Bash: long, Processes: e.After.HarnessProcesses}
	e.After.Deliverable, e.RunnerSaid, e.Interrupted, e.Infrastructure = long, long, long, long
	reached, _ := json.Marshal(e.After.HarnessProcesses)
	e.CloseReceipt.Extra = map[string]json.RawMessage{"reached": reached, "launch_id": json.RawMessage(`"L1"`)}
	msg := long
	e.CloseReceipt.Error = &msg
	e.Checks[0].Detail = long
	e.HarnessRuntime = &HarnessRuntime{CLIVersion: long}
	e.HarnessStderrTail = strings.Split(strings.Repeat("line\n", 100), "\n")
	return e
}

// Bound caps every harness-derived list and string, counting what it
// leaves out, and leaves the case's identity and verdict alone; it is
// idempotent.
func TestBoundCapsEveryHarnessDerivedField(t *testing.T) {
	e := oversizedRecord()
	if n := EncodedSize(e); n < 4*MaxRecordBytes {
		t.Fatalf("positive control: the record is %d bytes, want far more than the budget", n)
	}
	c := DefaultCaps
	e.Bound(c)
	m := e.ModelSteps
	if len(m.Steps) != c.Steps || m.Dropped != 8 {
		t.Errorf("%d steps kept, %d dropped; want %d and 8", len(m.Steps), m.Dropped, c.Steps)
	}
	for _, s := range m.Steps {
		if len(s.ToolResultIDs) != c.StepIDs || s.ToolResultIDsOmitted != 100-c.StepIDs || len(s.ToolCalls) != c.StepIDs ||
			len(s.ToolCallIDs) != c.StepIDs || s.ToolCallsOmitted != 20-c.StepIDs {
			t.Fatalf("step %d: %d result ids (%d omitted), %d calls (%d ids, %d omitted)", s.Seq, len(s.ToolResultIDs),
				s.ToolResultIDsOmitted, len(s.ToolCalls), len(s.ToolCallIDs), s.ToolCallsOmitted)
		}
		for _, id := range append(append(s.ToolResultIDs, s.ToolCallIDs...), s.ToolCalls...) {
			if len(id) > c.Name || !strings.HasPrefix(id, "0") || !strings.Contains(id, "bytes cut]") {
				t.Fatalf("id %q: want its start, at most %d bytes, saying it was cut", id, c.Name)
			}
		}
		if len(s.Text) > c.Text {
			t.Fatalf("step text of %d bytes", len(s.Text))
		}
	}
	if len(m.AskID) > c.Name || len(m.Broken) > c.Detail {
		t.Errorf("ask_id %d bytes, broken %d", len(m.AskID), len(m.Broken))
	}
	total := 0
	for k, n := range e.OutputItemTypes {
		total += n
		if len(k) > c.Name {
			t.Errorf("item type of %d bytes", len(k))
		}
	}
	if len(e.OutputItemTypes) != c.List || total != 500 || e.OutputItemTypes["…other"] != 500-c.List+1 {
		t.Errorf("%d item types, %d counted, %d other; want %d keys and every count kept", len(e.OutputItemTypes), total, e.OutputItemTypes["…other"], c.List)
	}
	if g := e.CloseObservationGaps; len(g) != c.List || g[len(g)-1] != "… 402 more" || len(g[0]) > c.Name {
		t.Errorf("gaps: %d, last %q", len(g), g[len(g)-1])
	}
	if len(e.CapturesWithheld) != c.List || e.CapturesWithheldOmitted != 400 || len(e.CapturesWithheld[0].Path) > c.Text || len(e.CapturesWithheld[0].Target) > c.Text {
		t.Errorf("withheld: %d listed, %d omitted", len(e.CapturesWithheld), e.CapturesWithheldOmitted)
	}
	if a := e.After; len(a.HarnessProcesses) != c.List || a.HarnessProcessesOmitted != 400 || len(a.HarnessProcesses[0].Comm) > c.Name || len(a.Deliverable) > c.Text {
		t.Errorf("after: %d processes, %d omitted, deliverable %d bytes", len(a.HarnessProcesses), a.HarnessProcessesOmitted, len(a.Deliverable))
	}
	if b := e.Before; len(b.Processes) != c.List || b.ProcessesOmitted != 400 || len(b.OS) > c.Text {
		t.Errorf("before: %d processes, %d omitted", len(b.Processes), b.ProcessesOmitted)
	}
	var reached []Process
	json.Unmarshal(e.CloseReceipt.Extra["reached"], &reached)
	if len(reached) != c.List || string(e.CloseReceipt.Extra["reached_omitted"]) != "400" || len(reached[0].Comm) > c.Text ||
		string(e.CloseReceipt.Extra["launch_id"]) != `"L1"` || len(*e.CloseReceipt.Error) > c.Text {
		t.Errorf("receipt: %d reached, omitted %s, launch_id %s", len(reached), e.CloseReceipt.Extra["reached_omitted"], e.CloseReceipt.Extra["launch_id"])
	}
	if len(e.RunnerSaid) > c.Text || len(e.Interrupted) > c.Text || len(e.Infrastructure) > c.Text || len(e.Checks[0].Detail) > c.Detail || len(e.HarnessRuntime.CLIVersion) > c.Text || len(e.HarnessStderrTail) > TailLines {
		t.Errorf("runner_said %d, interrupted %d, detail %d, cli_version %d, tail %d", len(e.RunnerSaid), len(e.Interrupted), len(e.Checks[0].Detail),
			len(e.HarnessRuntime.CLIVersion), len(e.HarnessStderrTail))
	}
	if e.CaseID != "big" || e.Status != StatusPassed || len(e.Checks) != 3 || e.Checks[0].ID != "deliverable" {
		t.Errorf("identity or verdict touched: %s %s %+v", e.CaseID, e.Status, e.Checks)
	}
	if n := EncodedSize(e); n > MaxRecordBytes {
		t.Errorf("bounded record is %d bytes, over the budget", n)
	}
	once, _ := json.Marshal(e)
	e.Bound(c)
	if twice, _ := json.Marshal(e); !bytes.Equal(once, twice) {
		t.Errorf("Bound is not idempotent")
	}
}

// Cut keeps a string's start within n bytes, on a character boundary,
// saying how much it cut.
func TestCut(t *testing.T) {
	if got := Cut("short", 64); got != "short" {
		t.Errorf("Cut of a short string: %q", got)
	}
	s := strings.Repeat("é", 100)
	got := Cut(s, 64)
	if len(got) > 64 || !strings.HasPrefix(s, strings.TrimSuffix(got, got[strings.Index(got, "…["):])) || !strings.HasSuffix(got, " bytes cut]") {
		t.Errorf("Cut = %q (%d bytes)", got, len(got))
	}
}

// A record still over its budget once bounded is cut by FitBudget's rule,
// never past it: its checks stay (ids, statuses), and the step that made
// it fit is named.
func TestFitBudgetCutsByTheRule(t *testing.T) {
	small := okEvidence("r", "small", "debian-12", "pi")
	want, _ := json.Marshal(small)
	if _, step, err := FitBudget(small, MaxRecordBytes); err != nil || step != "" {
		t.Errorf("a record within the budget: step %q, err %v", step, err)
	}
	if got, _ := json.Marshal(small); !bytes.Equal(got, want) {
		t.Errorf("a record within the budget was changed")
	}
	// Within every field's cap, over the budget as a whole: 400 checks
	// of 4 KiB.
	e := okEvidence("r", "many", "debian-12", "pi")
	for i := 0; i < 400; i++ {
		e.Checks = append(e.Checks, Check{ID: fmt.Sprint("c", i), Status: StatusPassed, Clause: "§7.4", Detail: strings.Repeat("d", 4000)})
	}
	before, step, err := FitBudget(e, MaxRecordBytes)
	if err != nil || before <= MaxRecordBytes || !strings.Contains(step, "details 1024") {
		t.Fatalf("FitBudget: before %d, step %q, err %v", before, step, err)
	}
	if n := EncodedSize(e); n > MaxRecordBytes || len(e.Checks) != 403 || e.Checks[402].ID != "c399" {
		t.Errorf("after FitBudget: %d bytes, %d checks", n, len(e.Checks))
	}
	// What cannot fit even so is an error, never a record over it.
	e = okEvidence("r", "hopeless", "debian-12", "pi")
	for i := 0; i < 100; i++ {
		e.Checks = append(e.Checks, Check{ID: fmt.Sprint("c", i), Status: StatusPassed})
	}
	if _, _, err := FitBudget(e, 1000); !errors.Is(err, ErrOverBudget) {
		t.Errorf("a record that cannot fit: %v, want ErrOverBudget", err)
	}
}

// A line over the readers' limit (a record written before the budget)
// is read as its case's unknown record, named from the line's start,
// and the lines after it are read: report, report diff and --resume go
// on working on that evidence.
func TestReadEvidenceLineTooLong(t *testing.T) {
	huge := okEvidence("r", "huge", "debian-12", "pi")
	huge.Attempt = 1
	huge.After.Deliverable = strings.Repeat("x", MaxLineBytes+1)
	in := jsonl(t, okEvidence("r", "c1", "alpine", "pi"), huge, okEvidence("r", "c2", "debian-13", "pi"))
	var got []*Evidence
	for e, err := range ReadEvidence(strings.NewReader(in)) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if len(got) != 3 || got[0].CaseID != "c1" || got[2].CaseID != "c2" || got[2].Line != 3 {
		t.Fatalf("read %d records, want 3 with the two around the long line whole", len(got))
	}
	u := got[1]
	if u.CaseID != "huge" || u.RunID != "r" || u.Harness != "pi" || u.Image != "debian-12" || u.Attempt != 1 || u.Line != 2 ||
		u.Status != StatusUnknown || len(u.Checks) != 1 || u.Checks[0].ID != CheckRecordReadable || u.Checks[0].Status != StatusUnknown ||
		!strings.Contains(u.Checks[0].Detail, "over the readers' limit") {
		t.Errorf("the long line's record: %+v", u)
	}
	if err := u.Validate(); err != nil {
		t.Errorf("the unreadable record is not valid: %v", err)
	}

	// The renderers and diff read it as an unknown case.
	dir := t.TempDir()
	oldRun, newRun := filepath.Join(dir, "old.jsonl"), filepath.Join(dir, "new.jsonl")
	os.WriteFile(oldRun, []byte(jsonl(t, okEvidence("r0", "huge", "debian-12", "pi"))), 0o644)
	os.WriteFile(newRun, []byte(in), 0o644)
	oldRep, err := ReadFiles(oldRun)
	if err != nil {
		t.Fatal(err)
	}
	newRep, err := ReadFiles(newRun)
	if err != nil {
		t.Fatalf("report of evidence with a long line: %v", err)
	}
	if newRep.Counts.Unknown != 1 || newRep.Counts.Passed != 2 {
		t.Errorf("counts %+v, want the long line's case unknown", newRep.Counts)
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, newRep); err != nil || !strings.Contains(md.String(), CheckRecordReadable) {
		t.Errorf("report.md: %v; want it to name %s", err, CheckRecordReadable)
	}
	d, err := Diff(oldRep, newRep, DiffOptions{AllowMissing: true})
	if err != nil {
		t.Fatalf("diff: %v", err)
	}
	if len(d.Regressions) != 1 {
		t.Errorf("diff: %d regressions; want the passed case now unknown as one", len(d.Regressions))
	}
}

// A line too long whose start names nothing still stands for a case.
func TestUnreadableWithoutIdentity(t *testing.T) {
	u := Unreadable([]byte("garbage"), MaxLineBytes+1, 7)
	if err := u.Validate(); err != nil || u.CaseID != "unreadable-line-7" || u.Status != StatusUnknown {
		t.Errorf("%+v: %v", u, err)
	}
	if !reflect.DeepEqual(identityOf([]byte(`{"run_id":"r","checks":[{"id":`)), Evidence{RunID: "r"}) {
		t.Errorf("identityOf a cut line")
	}
}
