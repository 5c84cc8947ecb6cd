package certify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/capture"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/model"
	"github.com/sandproof/sandproof/runner/probe"
	"github.com/sandproof/sandproof/runner/witness"
)

// The scenarios' verdict rules (scenario_checks.go), without an engine:
// each table's first row is the positive control (the rule passes), and
// each later row breaks one thing and sees the rule fail.

func scenario(t *testing.T, name string) Scenario {
	t.Helper()
	s, ok := ScenarioByName(name)
	if !ok {
		t.Fatalf("no scenario %q", name)
	}
	return s
}

func TestStopCheckRules(t *testing.T) {
	rc := 143
	good := func(cause string, timedOut bool) *reports.Receipt {
		return &reports.Receipt{Cause: cause, TimedOut: timedOut, CleanupConfirmed: true, ReturnCode: &rc}
	}
	timeout, cancel := scenario(t, ScenarioTimeout), scenario(t, ScenarioCancel)
	for _, tc := range []struct {
		name string
		sc   Scenario
		rec  *reports.Receipt
		want reports.Status
	}{
		{"timeout: deadline, timed out, confirmed", timeout, good("deadline", true), reports.StatusPassed},
		{"cancel: stopped, not timed out, confirmed", cancel, good("stopped", false), reports.StatusPassed},
		{"timeout: the harness exited by itself", timeout, good("exited", false), reports.StatusFailed},
		{"cancel: timed out instead of stopped", cancel, good("deadline", true), reports.StatusFailed},
		{"cancel: stopped but flagged timed_out", cancel, good("stopped", true), reports.StatusFailed},
		{"cancel: the harness exited before the close", cancel, good("exited", false), reports.StatusFailed},
		{"timeout: timed out, but the cause is a stop", timeout, good("stopped", true), reports.StatusFailed},
		{"timeout: cleanup not confirmed", timeout, &reports.Receipt{Cause: "deadline", TimedOut: true}, reports.StatusFailed},
		{"no receipt", timeout, nil, reports.StatusFailed},
	} {
		if c := stopCheck(tc.sc, tc.rec); c.ID != "scenario.stop" || c.Status != tc.want || c.Clause != clauseScenario {
			t.Errorf("%s: %s %s (%s), want %s", tc.name, c.ID, c.Status, c.Detail, tc.want)
		}
	}
}

func TestWriterCheckRules(t *testing.T) {
	stop := time.Unix(1_800_000_010, 500)
	good := writerSeen{state: writerRan, present: true, content: "0 1800000005\n1 1800000005\n", atClose: 26, then: 26, stopAt: stop}
	for _, tc := range []struct {
		name             string
		bend             func(*writerSeen)
		started, stopped reports.Status
	}{
		{"wrote before the stop, then still", func(*writerSeen) {}, reports.StatusPassed, reports.StatusPassed},
		{"first line in the stop's second", func(w *writerSeen) { w.content = "0 1800000010\n" }, reports.StatusPassed, reports.StatusPassed},
		{"grew after close: it survived", func(w *writerSeen) { w.then = 39 }, reports.StatusPassed, reports.StatusFailed},
		{"first line after the stop", func(w *writerSeen) { w.content = "0 1800000011\n" }, reports.StatusFailed, reports.StatusFailed},
		{"never wrote", func(w *writerSeen) { w.present, w.content, w.atClose, w.then = false, "", 0, 0 }, reports.StatusFailed, reports.StatusFailed},
		{"not the writer's lines", func(w *writerSeen) { w.content = "hello\n" }, reports.StatusFailed, reports.StatusFailed},
		{"no shell tool", func(w *writerSeen) { w.state, w.whyNot = writerNoShell, "no shell tool (tools: read)" }, reports.StatusSkipped, reports.StatusSkipped},
		{"the harness never got to the writer", func(w *writerSeen) { w.state, w.whyNot = writerNotReached, "0 model request(s)" }, reports.StatusFailed, reports.StatusFailed},
	} {
		w := good
		tc.bend(&w)
		cs := writerChecks(w)
		if len(cs) != 2 || cs[0].ID != "scenario.writer_started" || cs[1].ID != "scenario.writer_stopped" {
			t.Fatalf("%s: checks %+v", tc.name, cs)
		}
		if cs[0].Status != tc.started || cs[1].Status != tc.stopped {
			t.Errorf("%s: started %s (%s), stopped %s (%s); want %s, %s", tc.name, cs[0].Status, cs[0].Detail, cs[1].Status, cs[1].Detail, tc.started, tc.stopped)
		}
		if tc.stopped == reports.StatusSkipped && !strings.Contains(cs[0].Detail, "no shell tool") {
			t.Errorf("%s: the skip does not say why: %q", tc.name, cs[0].Detail)
		}
	}
}

func TestPartialTranscriptRules(t *testing.T) {
	calls := []model.Call{{Seq: 1, Reply: "read_challenge"}, {Seq: 2, Reply: "start_writer"}, {Seq: 3, Reply: "stall"}, {Seq: 0, Path: "/v1/models"}}
	good := transcriptSeen{calls: calls, relayCalls: 3, records: 2, eventLines: 40, roundTripped: true, gaps: []string{}}
	for _, tc := range []struct {
		name string
		bend func(*transcriptSeen)
		want reports.Status
	}{
		{"kept up to the stall", func(*transcriptSeen) {}, reports.StatusPassed},
		{"the model never stalled", func(s *transcriptSeen) { s.calls = calls[:2] }, reports.StatusFailed},
		{"the relay lost a call", func(s *transcriptSeen) { s.relayCalls = 2 }, reports.StatusFailed},
		{"the challenge never came back", func(s *transcriptSeen) { s.roundTripped = false }, reports.StatusFailed},
		{"the captures gave nothing", func(s *transcriptSeen) { s.records, s.eventLines = 0, 0 }, reports.StatusFailed},
		{"the result could not be read", func(s *transcriptSeen) { s.gaps = []string{capture.GapResult} }, reports.StatusFailed},
	} {
		s := good
		tc.bend(&s)
		if c := partialTranscriptCheck(s); c.ID != "scenario.partial_transcript" || c.Status != tc.want {
			t.Errorf("%s: %s %s (%s), want %s", tc.name, c.ID, c.Status, c.Detail, tc.want)
		}
	}
}

func TestModelFaultRules(t *testing.T) {
	zero, one, sigterm := 0, 1, 143
	rec := func(rc *int) *reports.Receipt {
		return &reports.Receipt{Cause: "exited", CleanupConfirmed: true, ReturnCode: rc}
	}
	finished := faultSeen{fault: model.Fault429, answered: 1, rec: rec(&zero), response: capture.ResponseCompleted, delivered: true}
	for _, tc := range []struct {
		name     string
		bend     func(*faultSeen)
		want     reports.Status
		modelErr bool
	}{
		{"went on and finished", func(*faultSeen) {}, reports.StatusPassed, false},
		{"exited 1: a model error", func(f *faultSeen) { f.rec, f.delivered, f.response = rec(&one), false, capture.ResponseFailed }, reports.StatusPassed, true},
		{"exit 0 without the deliverable", func(f *faultSeen) { f.delivered, f.response = false, capture.ResponseIncomplete }, reports.StatusFailed, false},
		{"exit 0, the deliverable, its own result reporting the fault it got past", func(f *faultSeen) { f.response = capture.ResponseFailed }, reports.StatusPassed, false},
		{"hung to the deadline", func(f *faultSeen) { r := rec(&sigterm); r.TimedOut, r.Cause = true, "deadline"; f.rec = r }, reports.StatusFailed, false},
		{"cleanup not confirmed", func(f *faultSeen) { f.rec = &reports.Receipt{ReturnCode: &one} }, reports.StatusFailed, false},
		{"no return code", func(f *faultSeen) { f.rec = rec(nil) }, reports.StatusFailed, false},
		{"the fault never answered", func(f *faultSeen) { f.answered = 0 }, reports.StatusFailed, false},
		{"no receipt", func(f *faultSeen) { f.rec = nil }, reports.StatusFailed, false},
	} {
		f := finished
		tc.bend(&f)
		c, modelErr := modelFaultCheck(f)
		if c.ID != "scenario.model_fault" || c.Status != tc.want || modelErr != tc.modelErr {
			t.Errorf("%s: %s %s model error %t (%s), want %s, %t", tc.name, c.ID, c.Status, modelErr, c.Detail, tc.want, tc.modelErr)
		}
	}
}

// borrowed on the in-memory sandbox: the owner's service in the process
// table after close and its state as written pass scenario.borrowed_kept,
// and the service is not a new process of the harness's; the service
// gone, or its state changed or removed, fails it.
func TestBorrowedRules(t *testing.T) {
	svc := probe.Process{PID: 40, StartTime: 400, Comm: "sleep", State: "S", UID: 1000}
	state := "owner task state 1\n"
	sum := sha256.Sum256([]byte(state))
	for _, tc := range []struct {
		name string
		bend func(w *world)
		want reports.Status
	}{
		{"service alive, state intact", func(*world) {}, reports.StatusPassed},
		{"the stop killed the service", func(w *world) { w.sb.procs = w.sb.procs[:1] }, reports.StatusFailed},
		{"the service is a zombie", func(w *world) { w.sb.procs[1].State = "Z" }, reports.StatusFailed},
		{"another process reuses its pid", func(w *world) { w.sb.procs[1].StartTime = 401 }, reports.StatusFailed},
		{"the state was rewritten", func(w *world) { w.sb.write(borrowedState, "clobbered") }, reports.StatusFailed},
		{"the state was removed", func(w *world) { w.sb.remove(borrowedState) }, reports.StatusFailed},
	} {
		w := cleanWorld(t)
		w.sb.spawn(svc)
		w.sb.write(borrowedState, state)
		tc.bend(w)
		cr := &caseRun{r: &runner{opts: Options{TaskHome: ruleHome}}, ev: &reports.Evidence{Status: reports.StatusUnknown}}
		owner := []witness.ID{svc.ID()}
		in := verifyInput{before: w.before, allMarkers: append(slices.Clone(ruleMarkers), ruleReq), markers: ruleMarkers,
			sessDir: ruleSession, proof: w.proof, allowed: cr.allowed(), ownerProcs: owner, scenarioPaths: []string{borrowedState}}
		v, err := cr.verify(context.Background(), memDiffer{w.sb}, in)
		if err != nil {
			t.Fatalf("%s: verify: %v", tc.name, err)
		}
		// A process on the service's pid with another start time is not
		// the owner's: it is new.
		if st, detail := statusOf(cr.ev, "verify.no_new_processes"); st != reports.StatusPassed && !strings.Contains(tc.name, "reuses") {
			t.Errorf("%s: verify.no_new_processes %s (%s): the owner's service counted as the harness's", tc.name, st, detail)
		}
		b := borrowedAfter(borrowedSeen{service: "40/400 sleep", stateBefore: hex.EncodeToString(sum[:])}, owner, v.after)
		if c := borrowedCheck(b); c.ID != "scenario.borrowed_kept" || c.Status != tc.want {
			t.Errorf("%s: %s %s (%s), want %s", tc.name, c.ID, c.Status, c.Detail, tc.want)
		}
	}
}

// readWriter on the in-memory sandbox: a writer that stopped leaves its
// file's size still between verify's snapshot and the one a second
// later; one that survived grows it (the probe's snapshot is scripted to
// append a line each time it looks, as a live writer would), and
// scenario.writer_stopped names it.
func TestReadWriterSeesASurvivingWriter(t *testing.T) {
	for _, survived := range []bool{false, true} {
		sb := newMemSandbox(map[string]string{writerFile: "0 1800000000\n"})
		sb.execs[probePath+" snapshot"] = func(spec provider.ExecSpec) (provider.ExecResult, error) {
			if survived {
				sb.files[writerFile] += "1 1800000000\n" // sb.mu is held by Exec
			}
			var paths []string
			if i := slices.Index(spec.Argv, "--markers"); i >= 0 {
				paths = strings.Split(spec.Argv[i+1], ",")
			}
			out, err := json.Marshal(sb.snapshotLocked(paths))
			return provider.ExecResult{Stdout: out}, err
		}
		first, err := snapshot(context.Background(), sb, []string{writerFile})
		if err != nil {
			t.Fatal(err)
		}
		a := afterClose{snap: first, seen: map[string]probe.Marker{}}
		for _, m := range first.Markers {
			a.seen[m.Path] = m
		}
		cr := &caseRun{r: &runner{}, ev: &reports.Evidence{}}
		calls := []model.Call{{Seq: 1, Reply: "read_challenge"}, {Seq: 2, Reply: "start_writer"}, {Seq: 3, Reply: "stall"}}
		w, err := cr.readWriter(context.Background(), sb, calls, verified{after: a}, activationResult{cancelled: time.Unix(1_800_000_001, 0)})
		if err != nil {
			t.Fatal(err)
		}
		cs := writerChecks(w)
		want := reports.StatusPassed
		if survived {
			want = reports.StatusFailed
		}
		if cs[0].Status != reports.StatusPassed || cs[1].Status != want {
			t.Errorf("survived %t: started %s (%s), stopped %s (%s); want passed, %s", survived, cs[0].Status, cs[0].Detail, cs[1].Status, cs[1].Detail, want)
		}
		if survived && !strings.Contains(cs[1].Detail, "survived") {
			t.Errorf("the survivor is not named: %q", cs[1].Detail)
		}
	}
}

// writerCalled: the writer counts as started once a request came after
// the model asked for it (the harness ran the call); a harness with no
// shell tool is named with its tools.
func TestWriterCalled(t *testing.T) {
	for _, tc := range []struct {
		calls []model.Call
		want  writerState
		why   string
	}{
		{[]model.Call{{Seq: 1, Reply: "read_challenge", ToolNames: []string{"read", "bash"}}, {Seq: 2, Reply: "start_writer"}, {Seq: 3, Reply: "stall"}}, writerRan, ""},
		{[]model.Call{{Seq: 1, Reply: "read_challenge"}, {Seq: 2, Reply: "start_writer"}}, writerNotReached, "request 2"},
		{[]model.Call{{Seq: 1, Reply: "read_challenge", ToolNames: []string{"read"}}, {Seq: 2, Reply: "stall"}}, writerNoShell, "tools: read"},
		{[]model.Call{{Seq: 0, Path: "/v1/models"}}, writerNotReached, "0 model request(s)"},
	} {
		if got, why := writerCalled(tc.calls); got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%+v: %v %q, want %v and %q", tc.calls, got, why, tc.want, tc.why)
		}
	}
}
