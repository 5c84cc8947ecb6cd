package certify_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/host/relay"
	"github.com/sandproof/sandproof/runner/model"
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
		why               string // in scenario.model_fault's detail; "|" separates words either of which will do
		calls             int    // model calls the relay counted: a positive control
	}{
		{crashAfter.Name, certify.ScenarioModel429, reports.StatusFailed, "was answered normally", 2},
		{crashAfter.Name, certify.ScenarioModel400, reports.StatusFailed, "said nothing of the context limit", 2},
		// The 429 is small: whether it was flushed whole before the agent
		// closed on its first byte is a race the relay records either way
		// (delivered, then the agent said nothing of it; or not delivered).
		{crashUnread.Name, certify.ScenarioModel429, reports.StatusFailed, "said nothing of the rate limit|the last answer delivered to it whole being none", 1},
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
		if mf.Status != c.want || !slices.ContainsFunc(strings.Split(c.why, "|"), func(w string) bool { return strings.Contains(mf.Detail, w) }) {
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
	// In the order of the requests: the relay records a call as it ends,
	// and under load a later request can end first.
	slices.SortFunc(out, func(a, b relay.Call) int { return a.Seq - b.Seq })
	return out
}

// warmUp is issue 35's D1/D2 wrapper (round 4): before it execs the
// harness it sends n throw-away Chat Completions requests with no tools
// straight to {model_url} (bash's /dev/tcp) and ignores their answers.
func warmUp(n int) string {
	return `u=$1; shift; hp=${u#http://}; host=${hp%%/*}; base=/${hp#*/}
body='{"model":"fake-model","stream":false,"messages":[{"role":"user","content":"warm-up"}]}'
i=0
while [ "$i" -lt ` + fmt.Sprint(n) + ` ]; do
	printf 'POST %s/chat/completions HTTP/1.0\r\nHost: %s\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\nContent-Length: %s\r\n\r\n%s' \
		"$base" "$host" "$FAKE_API_KEY" "${#body}" "$body" |
		bash -c 'exec 3<>"/dev/tcp/${0%:*}/${0##*:}"; cat >&3; cat <&3' "$host" >/dev/null 2>&1
	i=$((i+1))
done
exec "$@"`
}

// warmUpVariant wraps fake-exit0-on-429's launch in warmUp(n), with the
// mini-agent's switches old swapped for new.
func warmUpVariant(t *testing.T, variant string, n int, old, new string) *adapter.Manifest {
	t.Helper()
	return fixtureVariant(t, "fake-exit0-on-429", variant, func(src string) string {
		// Braces doubled: a literal one in a manifest's argv.
		q, _ := json.Marshal(strings.NewReplacer("{", "{{", "}", "}}").Replace(warmUp(n)))
		out := strings.Replace(src, "\n  argv: [\"{runtime_dir}/bin/miniagent\",", "\n  argv: [\"/bin/sh\", \"-c\", "+string(q)+", \"sh\", \"{model_url}\", \"{runtime_dir}/bin/miniagent\",", 1)
		out = strings.Replace(out, "api_key_env: FAKE_API_KEY\n", "requires: [sh, bash]\napi_key_env: FAKE_API_KEY\n", 1)
		out = strings.Replace(strings.Replace(out, old, new, 1), "name: fake-exit0-on-429\n", "name: fake-exit0-on-429-"+variant+"\n", 1)
		if !strings.Contains(out, `"/bin/sh", "-c"`) || !strings.Contains(out, "requires: [sh, bash]") || !strings.Contains(out, new) ||
			!strings.Contains(out, "name: fake-exit0-on-429-"+variant+"\n") {
			t.Fatalf("could not make the %s variant", variant)
		}
		return out
	})
}

// Issue 35, class D, round 4 (D1, D2): a harness that handles no fault
// (fake-exit0-on-429: exits 0 at once on a 429, and, Pi-like, exits 0 on
// any model error), behind a wrapper that first sends two throw-away
// requests with no tools and ignores their answers. main's scripts
// faulted requests by number (the 429 on request 1, the 400 on request
// 2), so the throw-aways took both faults, the harness's loop never met
// one and finished: model-429 and model-400 passed ("the harness went on
// and finished the challenge"). The fault now lands on what carries the
// task (the first request with the harness's tools and the challenge
// prompt; the one that carries the challenge's tool result), so the loop
// meets it and exits 0 without the deliverable: both fail. Positive
// controls: the relay recorded the two throw-aways (no tools, answered
// 200, delivered) before the fault; and the same wrapper around an agent
// that honours the faults (retries the 429 after its Retry-After; exits 1
// on the 400 saying so, no Pi-like events) passes both.
func TestCertifyWarmUpTakesNoFault(t *testing.T) {
	imgs := needEngine(t, "debian-12")
	warden, probe, _ := binaries(t)
	attack := warmUpVariant(t, "warm2", 2, `"--exit0-on-429"`, `"--exit0-on-429"`)
	honest := warmUpVariant(t, "warm2-honest", 2, `"--events", "pi",
         "--detach-tools", "--exit0-on-429"`, `"--detach-tools", "--retry-429", "2"`)
	out := t.TempDir()
	var progress syncBuf
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{attack, honest}, Images: imgs,
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
		faultAt           int    // the relay's number of the faulted request
	}{
		{attack.Name, certify.ScenarioModel429, reports.StatusFailed, "exit 0 without finishing", 3},
		{attack.Name, certify.ScenarioModel400, reports.StatusFailed, "exit 0 without finishing", 4},
		{honest.Name, certify.ScenarioModel429, reports.StatusPassed, "retried the 429's request (request 4", 3},
		{honest.Name, certify.ScenarioModel400, reports.StatusPassed, "filed as a model error", 4},
	} {
		id := certify.CaseID("debian-12", c.adapter, c.scenario)
		ev := evs[id]
		if ev == nil {
			t.Errorf("%s: no evidence\n%s", id, progress.String())
			continue
		}
		mf := checkOf(ev, "scenario.model_fault")
		t.Logf("%s: %s: %s", id, mf.Status, mf.Detail)
		if mf.Status != c.want || !strings.Contains(mf.Detail, c.why) || (c.want == reports.StatusFailed && ev.Status != c.want) {
			t.Errorf("%s: case %s, scenario.model_fault %s %q; want %s saying %q", id, ev.Status, mf.Status, mf.Detail, c.want, c.why)
		}
		// Positive controls: the throw-aways were sent and answered
		// (no tools, 200, delivered whole) before the fault, which fell
		// on the request that carries what the scenario targets.
		dir := filepath.Join(out, "cases", "debian-12__"+c.adapter+"__"+c.scenario)
		calls := relayRecord(t, filepath.Join(dir, "model_relay.jsonl"))
		if len(calls) < c.faultAt {
			t.Errorf("%s: %d relayed calls; want the fault on request %d", id, len(calls), c.faultAt)
			continue
		}
		for _, w := range calls[:2] {
			if len(w.Tools) != 0 || w.Status != 200 || !w.Delivered {
				t.Errorf("%s: throw-away request %d: %d tools, status %d, delivered %t; want none, 200, true", id, w.Seq, len(w.Tools), w.Status, w.Delivered)
			}
		}
		f := calls[c.faultAt-1]
		status, carries := 429, model.TargetTask
		if c.scenario == certify.ScenarioModel400 {
			status, carries = 400, model.TargetResult
		}
		if f.Status != status || f.Fault != fmt.Sprint(status) || len(f.Tools) == 0 || (carries == model.TargetResult) != (len(f.ToolResults) > 0) {
			t.Errorf("%s: request %d answered %d (fault %q) with %d tools and %d tool results; want the %d on the request that carries %s", id, f.Seq, f.Status, f.Fault, len(f.Tools), len(f.ToolResults), status, carries)
		}
		if mc := modelCallsOf(t, filepath.Join(dir, "model_calls.jsonl")); len(mc) < c.faultAt || mc[c.faultAt-1].Carries != carries || mc[c.faultAt-1].Counted != 1 {
			t.Errorf("%s: the scripted model's record %+v; want request %d the first that carries %s", id, mc, c.faultAt, carries)
		}
	}
}

// modelCallsOf reads a case's model_calls.jsonl, model requests only.
func modelCallsOf(t *testing.T, p string) []model.Call {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var out []model.Call
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var c model.Call
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if c.Seq > 0 {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b model.Call) int { return a.Seq - b.Seq })
	return out
}

// model-400's 400 falls on the turn that carries the challenge's tool
// result, and fake-forged's one request carries a read it made up with
// that read's result: the 400 lands on it and the fake exits 1 naming
// the context limit. That is no turn the harness ran, so the case fails
// (it failed before because the 400 was scripted on a request 2 it never
// sends; with the fault on its request and no chain rule it passed).
// Positive control: the relay recorded the scripted 400 on that request,
// carrying the challenge, and the fake exited 1 by itself.
func TestCertifyForgedResultFailsModel400(t *testing.T) {
	imgs := needEngine(t, "debian-12")
	warden, probe, _ := binaries(t)
	forged := load(t, "fake-forged")[0]
	out := t.TempDir()
	var progress syncBuf
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{forged}, Images: imgs, Scenarios: []string{certify.ScenarioModel400},
		Warden: warden, Probe: probe, Bash: bashStatic(), Out: out, Progress: &progress}); err != nil {
		t.Logf("certify: %v (the case fails on purpose)", err)
	}
	id := certify.CaseID("debian-12", forged.Name, certify.ScenarioModel400)
	ev := readEvidence(t, out)[id]
	if ev == nil {
		t.Fatalf("%s: no evidence\n%s", id, progress.String())
	}
	mf := checkOf(ev, "scenario.model_fault")
	t.Logf("%s: %s: %s", id, mf.Status, mf.Detail)
	if r := ev.ActivationReceipt; r == nil || r.ReturnCode == nil || *r.ReturnCode != 1 || r.Cause != "exited" {
		t.Errorf("%s: receipt %+v; want exited 1", id, ev.ActivationReceipt)
	}
	calls := relayRecord(t, filepath.Join(out, "cases", "debian-12__"+forged.Name+"__model-400", "model_relay.jsonl"))
	if len(calls) != 1 || calls[0].Fault != "400" || len(calls[0].ToolResults) != 1 || !strings.Contains(calls[0].ToolResults[0], model.ChallengePrefix) {
		t.Errorf("%s: relay record %+v; want the scripted 400 on its one request, which carries the challenge", id, calls)
	}
	if ev.Status != reports.StatusFailed || mf.Status != reports.StatusFailed || !strings.Contains(mf.Detail, "never ran the turn the fault is on") {
		t.Errorf("%s: case %s, scenario.model_fault %s %q; want failed naming the made-up turn", id, ev.Status, mf.Status, mf.Detail)
	}
}
