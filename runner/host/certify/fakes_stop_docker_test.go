package certify_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/model"
)

// certifyAgainst runs one adapter on one image against a scripted model
// of its own (the script's request numbers count that case's requests
// only) and returns the case's evidence.
func certifyAgainst(t *testing.T, m *adapter.Manifest, image string, opts model.Options) *reports.Evidence {
	t.Helper()
	imgs := needEngine(t, image)
	warden, probe, _ := binaries(t)
	opts.APIKey = "sk-upstream-" + m.Name
	srv, err := model.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	out := t.TempDir()
	var progress syncBuf
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{m}, Images: imgs, Warden: warden, Probe: probe,
		Bash: bashStatic(), Out: out, Progress: &progress, ModelURL: srv.URL(), APIKey: opts.APIKey}); err != nil {
		t.Fatalf("certify: %v\n%s", err, progress.String())
	}
	ev := readEvidence(t, out)[certify.CaseID(image, m.Name, certify.ScenarioChallenge)]
	if ev == nil {
		t.Fatalf("no evidence for %s\n%s", m.Name, progress.String())
	}
	return ev
}

// swapArg makes a variant of fixture name with one launch argument
// replaced (and a name of its own).
func swapArg(t *testing.T, name, variant, old, new string) *adapter.Manifest {
	t.Helper()
	return fixtureVariant(t, name, variant, func(src string) string {
		out := strings.Replace(strings.Replace(src, old, new, 1), "name: "+name+"\n", "name: "+name+"-"+variant+"\n", 1)
		if !strings.Contains(out, new) || !strings.Contains(out, "name: "+name+"-"+variant+"\n") {
			t.Fatalf("could not make the %s variant of %s", variant, name)
		}
		return out
	})
}

// The model answers the case's first request 429, then the challenge
// flow. fixtures/adapters/fake-exit0-on-429.yaml exits 0 at once, with no
// deliverable and no failure event: its exit 0 is in the receipt, and the
// case fails (the checks of today's challenge flow already catch it; the
// scenario model-429 adds its own rule). The same agent retrying the 429
// (--retry-429 2) passes: the positive control, that the 429 alone does
// not fail a case.
func TestCertifyFakeExit0On429Fails(t *testing.T) {
	t.Parallel() // a certify run of its own: beside the other parallel tests
	script := model.Options{Script: model.Script{Fault: model.Fault429, Only: []int{1}}}
	fake := certifyAgainst(t, load(t, "fake-exit0-on-429")[0], "debian-12", script)
	if r := fake.ActivationReceipt; r == nil || r.ReturnCode == nil || *r.ReturnCode != 0 || r.Cause != "exited" {
		t.Fatalf("fake: activation receipt %+v; want exited 0 (the made-up success)", r)
	}
	if fake.ModelCalls != 1 || fake.Status != reports.StatusFailed || checkStatus(fake, "verify.deliverable") != reports.StatusFailed {
		t.Errorf("fake: %d model call(s), status %s, verify.deliverable %s; want 1, failed, failed", fake.ModelCalls, fake.Status, checkStatus(fake, "verify.deliverable"))
	}

	retry := certifyAgainst(t, swapArg(t, "fake-exit0-on-429", "retry", `"--exit0-on-429"`, `"--retry-429", "2"`), "debian-12", script)
	// The 429, then the challenge flow's read, write and "done".
	if retry.Status != reports.StatusPassed || retry.ModelCalls != 4 {
		t.Errorf("positive control: the retrying agent: status %s after %d model calls (checks %+v); want passed after 4 (the 429 and the flow's 3)",
			retry.Status, retry.ModelCalls, retry.Checks)
	}
}

// receiptField reads one field of a receipt that Receipt keeps in Extra.
func receiptField(t *testing.T, r *reports.Receipt, name string) string {
	t.Helper()
	var v any
	if raw, ok := r.Extra[name]; !ok || json.Unmarshal(raw, &v) != nil {
		return ""
	}
	s, _ := v.(string)
	return s
}

// The model stalls the case's second request past a 6 s launch deadline.
// fixtures/adapters/fake-ignores-term.yaml ignores the deadline's TERM: it
// is still stopped, by the KILL after the grace, and its receipt names
// that (timed out, signal KILL, 137, confirmed). The same agent without
// --ignore-term ends on the TERM, by itself (its handler exits 143, so no
// signal ended it): the positive control, that the KILL is the fake's doing.
func TestCertifyFakeIgnoresTermIsStillStopped(t *testing.T) {
	t.Parallel() // waits on its harnesses more than it computes: beside the other waiting tests
	script := model.Options{Script: model.Script{Fault: model.FaultStall, Only: []int{2}}, StallMax: time.Minute}
	deadline6 := func(variant, old, new string) *adapter.Manifest {
		return fixtureVariant(t, "fake-ignores-term", variant, func(src string) string {
			out := strings.Replace(strings.Replace(strings.Replace(src, "deadline: 120", "deadline: 6", 1), old, new, 1),
				"name: fake-ignores-term\n", "name: fake-ignores-term-"+variant+"\n", 1)
			if !strings.Contains(out, "deadline: 6\n") || !strings.Contains(out, new) || (new == "") == strings.Contains(out, `"--ignore-term"`) {
				t.Fatalf("could not make the %s variant", variant)
			}
			return out
		})
	}
	for _, c := range []struct {
		variant, old, new string
		signal            string
		code              int
	}{
		{"dl6", `"--ignore-term"`, `"--ignore-term"`, "KILL", 137},
		{"dl6-honest", `"--ignore-term", `, ``, "", 143},
	} {
		ev := certifyAgainst(t, deadline6(c.variant, c.old, c.new), "debian-12", script)
		r := ev.ActivationReceipt
		if r == nil || !r.TimedOut || r.Cause != "deadline" || !r.CleanupConfirmed || r.ReturnCode == nil {
			t.Fatalf("%s: activation receipt %+v; want timed out at the deadline, confirmed", c.variant, r)
		}
		if got := receiptField(t, r, "signal"); got != c.signal || *r.ReturnCode != c.code {
			t.Errorf("%s: the stop ended it with signal %q, return code %d; want %q, %d", c.variant, got, *r.ReturnCode, c.signal, c.code)
		}
		if checkStatus(ev, "activation.receipt") != reports.StatusPassed || !strings.Contains(checkDetail(ev, "activation.receipt"), "cause deadline") {
			t.Errorf("%s: activation.receipt %s %q; want passed naming the deadline", c.variant, checkStatus(ev, "activation.receipt"), checkDetail(ev, "activation.receipt"))
		}
		if ev.LaunchDeadlineSeconds != 6 {
			t.Errorf("%s: launch_deadline_seconds %v, want the manifest's 6", c.variant, ev.LaunchDeadlineSeconds)
		}
		if checkStatus(ev, "verify.no_new_processes") != reports.StatusPassed {
			t.Errorf("%s: verify.no_new_processes %s %q", c.variant, checkStatus(ev, "verify.no_new_processes"), checkDetail(ev, "verify.no_new_processes"))
		}
	}
}
