package certify_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/certify"
)

// TestCertifyOutOfOrderResultFails certifies the loop-less harness of the
// rt-bd pass's D3 (fixtures/adapters/fake-outoforder.yaml: request A, the
// real prompt, held at its last byte; request B, an id-less read with the
// challenge as its result, sent whole and answered with the write; then
// A's last byte, answered with the read) beside an honest adapter (the
// positive control), on debian-12. The relay numbers A first (at its
// headers) but writes A's answer, the read, only after B was received
// whole: the case fails on verify.challenge_asked naming call 1 and its
// late answer (contract §7.4, threat model "The model loop"). On main it
// passed: an id-less result matched the model's call with an id, and every
// lower-numbered call counted as answered.
func TestCertifyOutOfOrderResultFails(t *testing.T) {
	t.Parallel() // a certify run of its own: beside the other parallel tests
	imgs := needEngine(t, "debian-12")
	warden, probe, _ := binaries(t)
	out := t.TempDir()
	var progress syncBuf
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, err := certify.Run(ctx, certify.Options{Adapters: load(t, "miniagent-opencode", "fake-outoforder"), Images: imgs, Parallel: 1,
		Warden: warden, Probe: probe, Bash: bashStatic(), Out: out, Progress: &progress})
	if err != nil {
		t.Fatalf("certify: %v\n%s", err, progress.String())
	}
	evs := readEvidence(t, out)
	good := evs[certify.CaseID("debian-12", "miniagent-opencode", certify.ScenarioChallenge)]
	if good == nil || good.Status != reports.StatusPassed || good.ModelSteps == nil || good.ModelSteps.ResultCall <= good.ModelSteps.AskCall {
		t.Errorf("positive control: the honest adapter: %+v; want passed with a chain", good)
	}
	ev := evs[certify.CaseID("debian-12", "fake-outoforder", certify.ScenarioChallenge)]
	if ev == nil {
		t.Fatalf("no evidence for fake-outoforder\n%s", progress.String())
	}
	// Positive controls: the attack ran as built. The model wrote on B's
	// forged result and the harness wrote its token; the relay numbered
	// A (the read) 1 and B (the result) 2, and wrote A's answer only after
	// B's request was whole.
	if ev.ModelCalls != 2 || ev.After == nil || !strings.HasPrefix(ev.After.Deliverable, "proof-") {
		t.Errorf("%d model calls, after %+v; want two calls and the derived token written", ev.ModelCalls, ev.After)
	}
	calls := relayRecord(t, filepath.Join(out, "cases", "debian-12__fake-outoforder", "model_relay.jsonl"))
	byseq := map[int]int{}
	for i, c := range calls {
		byseq[c.Seq] = i
	}
	a, okA := byseq[1]
	b, okB := byseq[2]
	if !okA || !okB || len(calls[a].ToolCalls) != 1 || calls[a].ToolCalls[0].Name != "read" || calls[a].ToolCalls[0].ID == "" ||
		len(calls[b].ToolResults) != 1 || calls[b].ToolResultIDs[0] != "" || !calls[a].WrittenAt.After(calls[b].ReceivedAt) ||
		!calls[b].WrittenAt.Before(calls[a].ReceivedAt) {
		t.Fatalf("relay record %+v; want call 1 the read, answered after call 2 (an id-less result) was whole and answered", calls)
	}
	d := checkDetail(ev, "verify.challenge_asked")
	for _, want := range []string{
		`call 2's request carries a result (no tool call id) for read`,
		`which the model asked for only as tool call "` + calls[a].ToolCalls[0].ID + `" in call 1 (a call with an id is answered by that id alone)`,
		`whose answer was written to the harness at`, `after call 2's request was complete at`,
	} {
		if !strings.Contains(d, want) {
			t.Errorf("verify.challenge_asked detail %q; want it to say %q", d, want)
		}
	}
	if ev.Status != reports.StatusFailed || checkStatus(ev, "verify.challenge_asked") != reports.StatusFailed ||
		checkStatus(ev, "verify.challenge_round_trip") != reports.StatusFailed {
		t.Errorf("status %s, checks %+v; want failed on verify.challenge_asked and the round trip", ev.Status, ev.Checks)
	}
	if st := ev.ModelSteps; st == nil || st.ResultCall != 0 || !strings.HasPrefix(st.Broken, "call 2's request carries a result (no tool call id)") {
		t.Errorf("model steps %+v; want the broken link and no chain", ev.ModelSteps)
	}
	if t.Failed() {
		t.Logf("progress:\n%s", progress.String())
	}
}
