package certify

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/canary"
	"github.com/sandproof/sandproof/runner/host/images"
	"github.com/sandproof/sandproof/runner/host/relay"
	"github.com/sandproof/sandproof/runner/model"
)

// Records and reports (issue 35, class C): every record is bounded and
// nothing is dropped. The two attacks first, engine-free, each on a
// whole case's evidence as its stages build it; they use only what main
// had, so they run against it too.

// writeRecord writes ev into dir's evidence file as certify does, with
// the case's key, and returns the file's bytes and the write's error.
func writeRecord(t *testing.T, dir string, ev *reports.Evidence, key string) ([]byte, error) {
	t.Helper()
	path := filepath.Join(dir, reports.EvidenceFile)
	f, err := appendEvidence(path)
	if err != nil {
		t.Fatal(err)
	}
	werr := f.Write(ev, key)
	f.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data, werr
}

// junkCalls are n model calls whose requests each carry results tool
// results, every one with an id of idBytes bytes (issue 35, attack 4).
func junkCalls(from, n, results, idBytes int) []relay.Call {
	var calls []relay.Call
	for i := 0; i < n; i++ {
		c := relay.Call{Seq: from + i, Status: 200, Auth: "canary"}
		for j := 0; j < results; j++ {
			id := fmt.Sprintf("junk-%d-%d-", i, j)
			c.ToolResultIDs = append(c.ToolResultIDs, id+strings.Repeat("j", idBytes-len(id)))
			c.ToolResults = append(c.ToolResults, "junk")
		}
		calls = append(calls, c)
	}
	return calls
}

// Attack 4: a harness that did its task honestly and sent eight junk
// requests of 1,000 tool results with 4,000-byte ids. Its case passes,
// and its record must neither exceed the record budget nor take the
// run's reports with it: on main the record's line was 32 MB, over the
// readers' 16 MiB, and reports.WriteAll (certify's reports) failed for
// the whole run.
func TestManyToolResultIDsKeepTheRunsReports(t *testing.T) {
	w := newWholeCase(t)
	ev := w.run(t, goodHarness)
	const ch, tok = model.ChallengePrefix + "00112233445566778899aabbccddeeff", "proof-0123"
	read := relay.ToolCall{ID: "call_a", Name: "read", Arguments: `{"path":"/task/challenge.txt"}`}
	write := relay.ToolCall{ID: "call_w", Name: "write", Arguments: `{"path":"/task/deliverable.txt","content":"` + tok + `"}`}
	calls := append([]relay.Call{call(1, nil, nil, read), call(2, []relay.ToolCall{{ID: "call_a", Arguments: "1\t" + ch}}, []relay.ToolCall{read}, write)},
		junkCalls(3, 8, 1000, 4000)...)
	p := analyse(calls, ch, tok, "scripted")
	if st := p.steps; st.AskCall != 1 || st.ResultCall != 2 || st.WriteCall != 2 || st.Broken != "" || ev.Status != reports.StatusPassed {
		t.Fatalf("positive control: the honest chain beside the junk: %+v, case %s", st, ev.Status)
	}
	ev.ModelSteps = p.steps
	if b, _ := json.Marshal(ev); len(b) < 32_000_000 {
		t.Fatalf("positive control: the record as analyse left it is %d bytes, want the issue's 32 MB", len(b))
	}
	out := w.cr.r.opts.Out
	data, err := writeRecord(t, out, ev, w.cr.r.key)
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	if len(data) > 1<<20 {
		t.Errorf("the record's line is %d bytes, over the record budget of 1 MiB", len(data))
	}
	rep, err := reports.WriteAll(out)
	if err != nil {
		t.Fatalf("the run's reports: %v", err)
	}
	for _, f := range []string{reports.HTMLFile, reports.MarkdownFile, reports.JUnitFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("report %s: %v", f, err)
		}
	}
	if rep.Counts.Passed != 1 {
		t.Errorf("counts %+v: the honest case, bounded, still passes", rep.Counts)
	}
	// Each step keeps a few ids, each short, and counts the rest.
	var rec struct {
		ModelSteps struct {
			Steps []struct {
				Seq     int      `json:"seq"`
				IDs     []string `json:"tool_result_ids"`
				Omitted int      `json:"tool_result_ids_omitted"`
			} `json:"steps"`
			AskID string `json:"ask_id"`
		} `json:"model_steps"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if s := rec.ModelSteps.Steps; len(s) != 10 || rec.ModelSteps.AskID != "call_a" {
		t.Fatalf("steps %d, ask_id %q; want all ten and the chain's id", len(s), rec.ModelSteps.AskID)
	}
	for _, s := range rec.ModelSteps.Steps[2:] {
		if len(s.IDs) > 8 || s.Omitted != 1000-len(s.IDs) {
			t.Errorf("step %d: %d ids kept, %d counted as omitted", s.Seq, len(s.IDs), s.Omitted)
		}
		for _, id := range s.IDs {
			if len(id) > 64 || !strings.HasPrefix(id, "junk-") {
				t.Errorf("step %d: an id of %d bytes (%.20q...)", s.Seq, len(id), id)
			}
		}
	}
}

// Attack 5: a harness that writes its own key into the deliverable. Its
// case fails, and its record must be written, redacted, failed on
// secrets.canary, so that --resume does not take the case for one never
// started: on main the record was refused (ErrCanaryLeaked) and nothing
// was written.
func TestKeyInTheDeliverableIsWrittenRedactedAndFailed(t *testing.T) {
	w := newWholeCase(t)
	key := w.cr.r.key
	ev := w.run(t, func(w *wholeCase) {
		goodHarness(w)
		w.sb.write(Deliverable, "here is my key: "+key)
	})
	if b, _ := json.Marshal(ev); !bytes.Contains(b, []byte(key)) || ev.Status != reports.StatusFailed {
		t.Fatalf("positive control: the record verify left (%s) does not quote the key", ev.Status)
	}
	out := w.cr.r.opts.Out
	data, err := writeRecord(t, out, ev, key)
	if err != nil {
		t.Errorf("the record was refused: %v", err)
	}
	if len(data) == 0 {
		t.Fatal("no record written: the case would be rerun by --resume as never started")
	}
	if how, found := canary.New(key).Find(data); found {
		t.Errorf("the evidence file holds the key (%s)", how)
	}
	var got reports.Evidence
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	c := checkOf(&got, "secrets.canary")
	if got.Status != reports.StatusFailed || c != reports.StatusFailed || !strings.Contains(checkDetail(&got, "secrets.canary"), "after.deliverable") {
		t.Errorf("status %s, secrets.canary %s (%s); want failed naming after.deliverable", got.Status, c, checkDetail(&got, "secrets.canary"))
	}
	if got.After == nil || !strings.Contains(got.After.Deliverable, "here is my key: [REDACTED]") {
		t.Errorf("after.deliverable %+v: want the harness's text kept, the key redacted", got.After)
	}
	if _, err := reports.WriteAll(out); err != nil {
		t.Errorf("the run's reports: %v", err)
	}
	done, _, err := openEvidence(filepath.Join(out, reports.EvidenceFile), true)
	if err != nil || done[ev.CaseID] != (lastAttempt{reports.StatusFailed, 1}) {
		t.Errorf("--resume reads %v (%v): want the case failed, attempt 1, final", done[ev.CaseID], err)
	}
}

// A key in any encoding of runner/host/canary, anywhere in a record (a
// check's detail, a receipt's kept fields, a map's key, a step's text),
// is redacted where it is and fails secrets.canary naming each field;
// the record is written, the key nowhere in the file.
func TestRecordRedactsTheKeyInEveryEncoding(t *testing.T) {
	const key = "sk-sandproof-canary-0123456789abcdef0123456789abcdef"
	ev := record("a", reports.StatusPassed)
	ev.Checks = append(ev.Checks, reports.Check{ID: "secrets.canary", Status: reports.StatusPassed, Clause: clauseSecrets, Detail: "no key"})
	ev.Checks[0].Detail = "the harness said " + hex.EncodeToString([]byte(key))
	ev.OutputItemTypes = map[string]int{"item-" + key: 3}
	ev.CloseReceipt = &reports.Receipt{Extra: map[string]json.RawMessage{"reached": json.RawMessage(`[{"comm":"x","why":"` + base64.StdEncoding.EncodeToString([]byte(key)) + `"}]`)}}
	ev.After = &reports.After{Deliverable: strings.ReplaceAll(key, "-", `\u002d`)}
	ev.ModelSteps = &reports.ModelSteps{Steps: []reports.ModelStep{{Seq: 1, Text: "reversed " + reverseString(key)}}}
	data, err := writeRecord(t, t.TempDir(), ev, key)
	if err != nil {
		t.Fatal(err)
	}
	if how, found := canary.New(key).Find(data); found {
		t.Errorf("the file holds the key (%s): %s", how, data)
	}
	detail := checkDetail(ev, "secrets.canary")
	for _, where := range []string{"checks[c].detail", "output_item_types key", "close_receipt.Extra.reached[0].why", "after.deliverable", "model_steps.steps[0].text"} {
		if !strings.Contains(detail, where) {
			t.Errorf("secrets.canary %q does not name %s", detail, where)
		}
	}
	if ev.Status != reports.StatusFailed || checkOf(ev, "secrets.canary") != reports.StatusFailed {
		t.Errorf("status %s, secrets.canary %s", ev.Status, checkOf(ev, "secrets.canary"))
	}
	if n := strings.Count(string(data), `"id":"secrets.canary"`); n != 1 {
		t.Errorf("secrets.canary %d times in the record", n)
	}
	if ev.OutputItemTypes["item-"+canary.Redacted] != 3 || !strings.Contains(ev.Checks[0].Detail, "the harness said "+canary.Redacted) {
		t.Errorf("redacted in place: item types %v, detail %q", ev.OutputItemTypes, ev.Checks[0].Detail)
	}
}

func reverseString(s string) string {
	b := []byte(s)
	slices.Reverse(b)
	return string(b)
}

// A record over the budget once bounded is cut by reports.FitBudget's
// rule, written within the budget, and fails record.bounded; a record
// within it is written as it came.
func TestRecordOverBudgetIsCutAndFailed(t *testing.T) {
	ev := record("a", reports.StatusPassed)
	ev.Passed = true
	for i := 0; i < 400; i++ {
		ev.Checks = append(ev.Checks, reports.Check{ID: fmt.Sprint("c", i), Status: reports.StatusPassed, Clause: clauseVerify, Detail: strings.Repeat("d", 4000)})
	}
	data, err := writeRecord(t, t.TempDir(), ev, "sk-key-123")
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > reports.MaxRecordBytes {
		t.Errorf("the line is %d bytes, over the budget %d", len(data), reports.MaxRecordBytes)
	}
	if ev.Status != reports.StatusFailed || checkOf(ev, checkRecordBounded) != reports.StatusFailed || len(ev.Checks) != 402 {
		t.Errorf("status %s, %s %s, %d checks", ev.Status, checkRecordBounded, checkOf(ev, checkRecordBounded), len(ev.Checks))
	}
	small := record("b", reports.StatusPassed)
	small.Passed = true
	if _, err := writeRecord(t, t.TempDir(), small, "sk-key-123"); err != nil || small.Status != reports.StatusPassed || len(small.Checks) != 1 {
		t.Errorf("a record within the budget: %v, %s, %+v", err, small.Status, small.Checks)
	}
}

// --resume runs again only a case whose last attempt is unknown (or that
// has none): a failed, passed or skipped last attempt is final, and the
// reports take each case's last attempt.
func TestResumeRerunsOnlyUnknownCases(t *testing.T) {
	out := t.TempDir()
	path := filepath.Join(out, reports.EvidenceFile)
	f, err := appendEvidence(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		id      string
		st      reports.Status
		attempt int
	}{{"a/h", reports.StatusUnknown, 1}, {"a/h", reports.StatusFailed, 2}, {"b/h", reports.StatusFailed, 1}, {"c/h", reports.StatusUnknown, 1},
		{"d/h", reports.StatusPassed, 1}, {"e/h", reports.StatusSkipped, 1}} {
		ev := record(w.id, w.st)
		ev.Attempt = w.attempt
		if w.st == reports.StatusFailed {
			ev.Checks[0].Status = reports.StatusFailed
		}
		if err := f.Write(ev, "sk-key"); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	var imgs []images.Image
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		imgs = append(imgs, images.Image{Name: n, Ref: "sandproof/" + n})
	}
	r := &runner{opts: Options{Out: out, Resume: true, Images: imgs, Adapters: []*adapter.Manifest{{Name: "h"}}}}
	sum, cases, err := r.plan()
	if err != nil {
		t.Fatal(err)
	}
	var planned []string
	for _, c := range cases {
		planned = append(planned, fmt.Sprintf("%s#%d", c.id, c.attempt))
	}
	if !slices.Equal(planned, []string{"c/h#2", "f/h#1"}) || sum.Resumed != 4 || sum.Counts[reports.StatusFailed] != 2 {
		t.Errorf("planned %q, %d resumed, counts %v; want only the unknown case and the new one", planned, sum.Resumed, sum.Counts)
	}
	rep, err := reports.WriteAll(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Runs[0].Cases {
		if c.ID == "a/h" && (c.Status != reports.StatusFailed || c.Evidence.Attempt != 2 || c.Attempts != 2) {
			t.Errorf("a/h in the reports: %s, attempt %d of %d; want its final attempt, 2, failed", c.Status, c.Evidence.Attempt, c.Attempts)
		}
	}
}

// One case's record that cannot be written (the disk is full) does not
// skip the run's reports nor its canary scan: the reports are written for
// what was written, the scan runs (and finds the key planted in the run
// dir), and the run's error is the write's (infrastructure, which
// outranks the key found: contract §9). A report that cannot be written
// does not skip the scan either.
func TestWriteErrorKeepsTheReportsAndTheScan(t *testing.T) {
	const key = "sk-sandproof-canary-0123456789abcdef0123456789abcdef"
	setup := func(t *testing.T, earlier string) (*runner, []caseSpec) {
		out := t.TempDir()
		if err := os.WriteFile(filepath.Join(out, reports.EvidenceFile), []byte(earlier), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, "leak.txt"), []byte("key="+key), 0o644); err != nil {
			t.Fatal(err)
		}
		full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
		if err != nil {
			testenv.Missing(t, fmt.Sprintf("/dev/full, to fail a write (%v)", err), "run the tests on a Linux host with devtmpfs (every Debian machine has it)")
		}
		m := &adapter.Manifest{Name: "h", Scenarios: map[string]adapter.ScenarioSpec{ScenarioChallenge: {Unsupported: "not in this test"}}}
		r := &runner{opts: Options{Out: out, Parallel: 1}, runID: "r1", key: key, ev: &evidenceFile{f: full}}
		c := caseSpec{id: "debian-12/h", attempt: 1, adapter: m, image: images.Image{Name: "debian-12"}, scenario: scenariosFor(m, nil)[0]}
		return r, []caseSpec{c}
	}
	good, _ := json.Marshal(record("earlier", reports.StatusPassed))
	t.Run("a case's write error", func(t *testing.T) {
		r, cases := setup(t, string(good)+"\n")
		sum, err := r.runAndFinish(context.Background(), cases, &Summary{Counts: map[reports.Status]int{}}, time.Now())
		if !errors.Is(err, syscall.ENOSPC) || errors.Is(err, ErrCanaryLeaked) || !strings.Contains(err.Error(), "leak.txt") {
			t.Errorf("run error %v: want the write's error (ENOSPC), naming the scan's finding, not a verdict", err)
		}
		if sum.Counts[reports.StatusSkipped] != 1 {
			t.Errorf("positive control: the case ran and ended %v", sum.Counts)
		}
		for _, f := range []string{reports.HTMLFile, reports.MarkdownFile, reports.JUnitFile} {
			if _, err := os.Stat(filepath.Join(r.opts.Out, f)); err != nil {
				t.Errorf("report %s: %v", f, err)
			}
		}
		if sum.Report == nil || sum.Report.Counts.Cases != 1 {
			t.Errorf("the reports are not of what was written: %+v", sum.Report)
		}
	})
	t.Run("reports that cannot be written", func(t *testing.T) {
		r, _ := setup(t, "{}\n")
		r.ev.f.Close()
		r.ev.f, _ = os.Create(filepath.Join(t.TempDir(), "x"))
		_, err := r.finish(context.Background(), &Summary{Counts: map[reports.Status]int{}}, time.Now())
		if !errors.Is(err, reports.ErrInvalidEvidence) || errors.Is(err, ErrCanaryLeaked) || !strings.Contains(err.Error(), "leak.txt") {
			t.Errorf("finish: %v; want the reports' error, naming the scan's finding", err)
		}
	})
}
