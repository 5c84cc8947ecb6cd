package certify

import (
	"context"
	"errors"
	"testing"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/relay"
	"github.com/sandproof/sandproof/runner/host/session"
	"github.com/sandproof/sandproof/runner/warden/receipt"
)

// The case's own rules outside verify, without an engine: the activation's
// receipt check, the interrupt's watch, and how a planned skip and what
// setup found join.

// activation.receipt passes only for an activation that ended without an
// error and whose receipt confirms its cleanup (the positive control is
// the first row).
func TestActivationReceiptCheck(t *testing.T) {
	rc := 0
	for _, tc := range []struct {
		name string
		res  *session.Result
		err  error
		want reports.Status
	}{
		{"confirmed", &session.Result{Receipt: &receipt.Receipt{CleanupConfirmed: true, ReturnCode: &rc}}, nil, reports.StatusPassed},
		{"not confirmed", &session.Result{Receipt: &receipt.Receipt{CleanupConfirmed: false, ReturnCode: &rc}}, nil, reports.StatusFailed},
		{"confirmed, but the launch failed", &session.Result{Receipt: &receipt.Receipt{CleanupConfirmed: true}}, errors.New("activation: exit 1"), reports.StatusFailed},
		{"no result", nil, errors.New("activate: no receipt"), reports.StatusFailed},
	} {
		c := activationReceiptCheck(tc.res, tc.err, "")
		if c.ID != "activation.receipt" || c.Status != tc.want || c.Clause != clauseSeed {
			t.Errorf("%s: %s %s (%s), want activation.receipt %s", tc.name, c.ID, c.Status, c.Detail, tc.want)
		}
	}
}

// Without an interrupt the case is never reached; once the interrupt
// came it is, and the reason is fixed the first time it is asked (the
// case moving on does not change it).
func TestInterruptReachedOnlyOnceItCame(t *testing.T) {
	var none interruptWatch
	none.stageBegins(reports.StageSeed)
	if none.interruptReached() || none.reason != "" {
		t.Fatalf("no interrupt: reached, reason %q", none.reason)
	}
	ic, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	w := interruptWatch{ic: ic}
	w.stageBegins(reports.StageSeed)
	if w.interruptReached() || w.reason != "" {
		t.Fatalf("before the interrupt: reached, reason %q", w.reason)
	}
	cancel(errors.New("SIGTERM"))
	if !w.interruptReached() || w.reason != "SIGTERM during seed" {
		t.Fatalf("after the interrupt: reason %q, want SIGTERM during seed", w.reason)
	}
	w.stageEnds(reports.StageSeed)
	w.stageBegins(reports.StageClose)
	if !w.interruptReached() || w.reason != "SIGTERM during seed" {
		t.Fatalf("asked again in close: reason %q, want it kept", w.reason)
	}
}

// A stage's provider error is recorded as its failed <stage>.provider
// check and stops the case (stopsCase); another error does not.
func TestStageProviderErrorStopsTheCase(t *testing.T) {
	for _, tc := range []struct {
		err   error
		stops bool
	}{
		{provider.Errorf("exec", "c1", provider.ErrGone), true},
		{errors.New("seed: install exited 1"), false},
	} {
		cr := &caseRun{r: &runner{}, ev: &reports.Evidence{}}
		err := cr.stage(reports.StageSeed, func() error { return tc.err })
		if stopsCase(err) != tc.stops {
			t.Errorf("%v: stops the case %t, want %t", tc.err, stopsCase(err), tc.stops)
		}
		st := checkOf(cr.ev, "seed.provider")
		if tc.stops && (st != reports.StatusFailed || cr.ev.ErrorType == nil || *cr.ev.ErrorType != "provider_error") {
			t.Errorf("%v: seed.provider %q, error_type %v; want failed, provider_error", tc.err, st, cr.ev.ErrorType)
		}
		if !tc.stops && st != "" {
			t.Errorf("%v: seed.provider %q recorded for an error of the harness's", tc.err, st)
		}
	}
}

// The error type names the first failure: a case stopped by a provider
// error and judged failed stays provider_error.
func TestErrorTypeKeepsTheFirst(t *testing.T) {
	ev := &reports.Evidence{Checks: []reports.Check{{ID: "seed.provider", Status: reports.StatusFailed}}}
	setErrType(ev, "provider_error")
	judge(ev, "")
	if ev.Status != reports.StatusFailed || ev.ErrorType == nil || *ev.ErrorType != "provider_error" {
		t.Fatalf("status %s, error_type %v; want failed, provider_error", ev.Status, ev.ErrorType)
	}
}

// A planned skip and the requirements setup found missing are both kept.
func TestJoinSkip(t *testing.T) {
	for _, tc := range [][3]string{
		{"", "", ""},
		{"no arm64 build", "", "no arm64 build"},
		{"", "image x lacks glibc", "image x lacks glibc"},
		{"no arm64 build", "image x lacks glibc", "no arm64 build; image x lacks glibc"},
	} {
		if got := joinSkip(tc[0], tc[1]); got != tc[2] {
			t.Errorf("joinSkip(%q, %q) = %q, want %q", tc[0], tc[1], got, tc[2])
		}
	}
}

// close.relay_bounded fails when the scripted model's own log left calls
// out past its budget, as when the relay's transcript did (red team rt2
// C1); the relay within its limits and the model's log whole passes.
func TestRelayBoundedCountsTheModelsLog(t *testing.T) {
	for _, tc := range []struct {
		unrecorded int
		want       reports.Status
	}{{0, reports.StatusPassed}, {3, reports.StatusFailed}} {
		cr := &caseRun{r: &runner{}, ev: &reports.Evidence{}}
		cr.checkRelay(relay.Bounds{Refused: map[string]int{}, Limits: relay.DefaultLimits}, tc.unrecorded)
		if st := checkOf(cr.ev, "close.relay_bounded"); st != tc.want {
			t.Errorf("%d model call(s) unrecorded: close.relay_bounded %q, want %q", tc.unrecorded, st, tc.want)
		}
	}
}
