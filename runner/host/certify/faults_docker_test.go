package certify_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/host/relay"
)

// Issue 35's crashing harnesses against the model-fault scenarios on
// debian-12 (contract §7.6 scenarios): the fixture mini-agent that exits
// 1 right after the answer to its second request whatever it was
// (--crash-after 2, retrying the 429 so that it makes one), and the one
// that exits as soon as the answer to its first begins to arrive,
// reading none of it (--crash-unread 1). main passed the first on
// model-429 (its exit followed a 200) and model-400, the second on
// model-429; both fail both now (the second's model-400 ends before the
// fault). The positive control: the same agent exiting 1 on the model's
// error and saying so on its stderr (no Pi-like events: miniagent's
// plain mode) passes both as a model error, so the rule is live and
// reads what the harness said.
func TestCertifyCrashingHarnessesFailTheFaults(t *testing.T) {
	imgs := needEngine(t, "debian-12")
	warden, probe, _ := binaries(t)
	crashAfter := swapArg(t, "miniagent-pi", "crash-after-2", `"--detach-tools"`, `"--detach-tools", "--retry-429", "2", "--crash-after", "2"`)
	crashUnread := swapArg(t, "miniagent-pi", "crash-unread-1", `"--detach-tools"`, `"--detach-tools", "--crash-unread", "1"`)
	reportsIt := swapArg(t, "miniagent-pi", "exit1-reports", `"--events", "pi",`, ``)
	out := t.TempDir()
	var progress syncBuf
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{crashAfter, crashUnread, reportsIt}, Images: imgs,
		Scenarios: []string{certify.ScenarioModel429, certify.ScenarioModel400}, Parallel: 2,
		Warden: warden, Probe: probe, Bash: bashStatic(), Out: out, Progress: &progress})
	if err != nil {
		t.Logf("certify: %v (cases fail on purpose)", err)
	}
	evs := readEvidence(t, out)
	for _, c := range []struct {
		adapter, scenario string
		want              reports.Status
		why               string // in scenario.model_fault's detail
		calls             int    // model calls the relay counted: a positive control
	}{
		{crashAfter.Name, certify.ScenarioModel429, reports.StatusFailed, "was answered normally", 2},
		{crashAfter.Name, certify.ScenarioModel400, reports.StatusFailed, "said nothing of the context limit", 2},
		{crashUnread.Name, certify.ScenarioModel429, reports.StatusFailed, "said nothing of the rate limit", 1},
		{crashUnread.Name, certify.ScenarioModel400, reports.StatusFailed, "never answered", 1},
		{reportsIt.Name, certify.ScenarioModel429, reports.StatusPassed, `"rate limit" in its stderr`, 1},
		{reportsIt.Name, certify.ScenarioModel400, reports.StatusPassed, "in its stderr", 2},
	} {
		id := certify.CaseID("debian-12", c.adapter, c.scenario)
		ev := evs[id]
		if ev == nil {
			t.Errorf("%s: no evidence\n%s", id, progress.String())
			continue
		}
		mf := checkOf(ev, "scenario.model_fault")
		t.Logf("%s: %s: %s", id, mf.Status, mf.Detail)
		// Positive controls: the harness exited 1 by itself, after as
		// many requests as it was built to make.
		if r := ev.ActivationReceipt; r == nil || r.ReturnCode == nil || *r.ReturnCode != 1 || r.Cause != "exited" || ev.ModelCalls != c.calls {
			t.Errorf("%s: receipt %+v after %d model call(s); want exited 1 after %d", id, ev.ActivationReceipt, ev.ModelCalls, c.calls)
		}
		if mf.Status != c.want || !strings.Contains(mf.Detail, c.why) {
			t.Errorf("%s: scenario.model_fault %s %q; want %s saying %q", id, mf.Status, mf.Detail, c.want, c.why)
		}
		if (ev.ResponseStatus == "model_error") != (c.want == reports.StatusPassed) || ev.Status != c.want {
			t.Errorf("%s: case %s, response_status %s; want %s, a model error only when passed", id, ev.Status, ev.ResponseStatus, c.want)
		}
	}
	// The relay's record of the first crash on model-400: the 400
	// delivered whole and last, the harness's only word a crash.
	calls := relayRecord(t, filepath.Join(out, "cases", "debian-12__"+crashAfter.Name+"__model-400", "model_relay.jsonl"))
	if len(calls) != 2 || calls[1].Status != 400 || !calls[1].Delivered || !calls[0].Delivered || !calls[1].DeliveredAt.After(calls[0].DeliveredAt) {
		t.Errorf("crash-after on model-400: relay record %+v; want a 200 then the 400, both delivered, the 400 last", calls)
	}
}

// relayRecord reads a case's model_relay.jsonl.
func relayRecord(t *testing.T, p string) []relay.Call {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []relay.Call
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var c relay.Call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if c.Seq > 0 {
			out = append(out, c)
		}
	}
	return out
}
