package certify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/certify"
)

// TestCertifyForgedToolResultFails certifies the forging harness of issue 25
// (fixtures/adapters/fake-forged.yaml: a POSIX sh script that reads the
// challenge itself and sends one request whose history holds a read it
// made up and that read's result carrying the challenge, then writes what
// the model answers) in each API shape, beside an honest adapter (the
// positive control), on every image. The forgery reaches the model (it
// answers with the write of its derived token, which the harness writes),
// and every forged case fails on verify.challenge_asked naming the tool
// call no model answer asked for (contract §7.4, threat model "The model
// loop"); the honest adapter passes with its chain.
func TestCertifyForgedToolResultFails(t *testing.T) {
	t.Parallel() // a certify run of its own: beside the other parallel tests
	imgs := needEngine(t, "debian-12", "alpine-class", "old-python")
	warden, probe, _ := binaries(t)
	forged := map[string]string{"fake-forged": "call_forged"}
	adapters := load(t, "miniagent-opencode", "fake-forged")
	for api, id := range map[string]string{"responses": "call_forged", "messages": "toolu_forged"} {
		name := "fake-forged-" + api
		adapters = append(adapters, fixtureVariant(t, "fake-forged", api, func(src string) string {
			out := strings.Replace(strings.Replace(src, "FORGE_API: chat", "FORGE_API: "+api, 1), "name: fake-forged\n", "name: "+name+"\n", 1)
			if !strings.Contains(out, "FORGE_API: "+api) || !strings.Contains(out, "name: "+name+"\n") {
				t.Fatalf("could not make the %s variant of fake-forged", api)
			}
			return out
		}))
		forged[name] = id
	}
	out := t.TempDir()
	var progress syncBuf
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	_, err := certify.Run(ctx, certify.Options{Adapters: adapters, Images: imgs, Parallel: 2, Warden: warden, Probe: probe,
		Bash: bashStatic(), Out: out, Progress: &progress})
	if err != nil {
		t.Fatalf("certify: %v\n%s", err, progress.String())
	}
	evs := readEvidence(t, out)
	for _, img := range imgs {
		good := evs[certify.CaseID(img.Name, "miniagent-opencode", certify.ScenarioChallenge)]
		if good == nil {
			t.Fatalf("%s: no evidence for the honest adapter\n%s", img.Name, progress.String())
		}
		if st := good.ModelSteps; good.Status != reports.StatusPassed || st == nil || st.AskID == "" || st.ResultCall <= st.AskCall || st.WriteCall < st.ResultCall {
			t.Errorf("%s: positive control: the honest adapter: status %s, checks %+v, model steps %+v; want passed with a chain", img.Name, good.Status, good.Checks, st)
		}
		for name, id := range forged {
			ev := evs[certify.CaseID(img.Name, name, certify.ScenarioChallenge)]
			if ev == nil {
				t.Errorf("%s/%s: no evidence", img.Name, name)
				continue
			}
			// Positive control: the forgery got through to the model,
			// whose write the harness carried out.
			if ev.ModelCalls != 1 || ev.After == nil || !strings.HasPrefix(ev.After.Deliverable, "proof-") || strings.Contains(ev.After.Deliverable, "challenge") {
				t.Errorf("%s/%s: %d model calls, after %+v; want one call answered with the derived token, written", img.Name, name, ev.ModelCalls, ev.After)
			}
			link := `call 1's request carries a result for tool call "` + id + `"`
			if ev.Status != reports.StatusFailed || checkStatus(ev, "verify.challenge_asked") != reports.StatusFailed ||
				!strings.Contains(checkDetail(ev, "verify.challenge_asked"), link) ||
				!strings.Contains(checkDetail(ev, "verify.challenge_asked"), "which no model answer asked for") {
				t.Errorf("%s/%s: status %s, verify.challenge_asked %s %q; want failed naming %s", img.Name, name, ev.Status,
					checkStatus(ev, "verify.challenge_asked"), checkDetail(ev, "verify.challenge_asked"), id)
			}
			if st := ev.ModelSteps; st == nil || !strings.HasPrefix(st.Broken, link) || st.ResultCall != 0 {
				t.Errorf("%s/%s: model steps %+v; want the broken link and no chain", img.Name, name, ev.ModelSteps)
			}
		}
	}
	if t.Failed() {
		t.Logf("progress:\n%s", progress.String())
	}
}
