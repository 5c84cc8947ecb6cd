package certify

import (
	"context"
	"errors"
	"testing"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/receipt"
	"github.com/sandproof/sandproof/runner/session"
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
