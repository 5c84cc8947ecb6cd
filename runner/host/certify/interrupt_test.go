package certify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/session"
	"github.com/sandproof/sandproof/runner/warden/receipt"
)

// The rules of contract §8 attempts and interrupts on the judge's path,
// without an engine: each test builds the caseRun a stage would leave.

// interruptedRun is the watch of a run whose interrupt came (cause
// SIGINT), or has not come when sig is false.
func interruptedRun(t *testing.T, sig bool) interruptWatch {
	ic, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	if sig {
		cancel(errors.New("SIGINT"))
	}
	return interruptWatch{ic: ic}
}

// interruptNow sends the case's run its interrupt (cause SIGINT) and
// waits for the interrupt's watch to record where it found the case.
func interruptNow(t *testing.T, cr *caseRun, cancel context.CancelCauseFunc) {
	t.Helper()
	cancel(errors.New("SIGINT"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		cr.intr.mu.Lock()
		at := cr.intr.interruptAt
		cr.intr.mu.Unlock()
		if at != "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the interrupt's watch recorded nothing in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func passedChecks(ids ...string) []reports.Check {
	var out []reports.Check
	for _, id := range ids {
		out = append(out, reports.Check{ID: id, Status: reports.StatusPassed})
	}
	return out
}

// A case the interrupt reached during verify (nothing is cut short
// there) is unknown all the same, not passed: the rule is "before its
// verdict", whatever stage. Without the interrupt the same checks pass
// (the positive control).
func TestJudgeInterruptReachedInVerifyIsUnknown(t *testing.T) {
	for _, sig := range []bool{false, true} {
		cr := &caseRun{intr: interruptedRun(t, sig), ev: &reports.Evidence{Status: reports.StatusUnknown,
			Checks: passedChecks("setup", "seed", "activation.receipt", "close.receipts", "verify.deliverable")}}
		cr.intr.stageBegins(reports.StageVerify)
		cr.verdict()
		want, why := reports.StatusPassed, ""
		if sig {
			want, why = reports.StatusUnknown, "SIGINT during verify"
		}
		if cr.ev.Status != want || cr.ev.Interrupted != why {
			t.Errorf("interrupt %t: status %s, interrupted %q; want %s, %q", sig, cr.ev.Status, cr.ev.Interrupted, want, why)
		}
		if sig && (checkOf(cr.ev, "interrupt") != reports.StatusUnknown || cr.ev.ErrorType == nil || *cr.ev.ErrorType != "interrupted") {
			t.Errorf("interrupted: checks %+v, error_type %v; want an unknown interrupt check, error_type interrupted", cr.ev.Checks, cr.ev.ErrorType)
		}
	}
}

// A skipped case stays skipped (final) when the interrupt comes after
// setup found the requirement missing.
func TestJudgeInterruptKeepsSkipped(t *testing.T) {
	cr := &caseRun{intr: interruptedRun(t, true), ev: &reports.Evidence{Status: reports.StatusSkipped,
		Checks: []reports.Check{{ID: "requirements", Status: reports.StatusSkipped}}}}
	cr.verdict()
	if cr.ev.Status != reports.StatusSkipped || cr.ev.Interrupted != "" {
		t.Errorf("skipped case: status %s, interrupted %q; want skipped, no reason", cr.ev.Status, cr.ev.Interrupted)
	}
}

// The interrupt's reason names where it found the case: the stage
// running, or the one that ended last, as the interrupt's own goroutine
// saw it, not where the case was when it looked.
func TestInterruptReasonNamesTheStage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before func(cr *caseRun)
		want   string
	}{
		{"during seed", func(cr *caseRun) { cr.intr.stageBegins(reports.StageSeed) }, "SIGINT during seed"},
		{"between stages", func(cr *caseRun) { cr.intr.stageBegins(reports.StageSeed); cr.intr.stageEnds(reports.StageSeed) }, "SIGINT after seed"},
		{"before any", func(*caseRun) {}, "SIGINT before setup"},
	} {
		ic, cancel := context.WithCancelCause(context.Background())
		cr := &caseRun{intr: interruptWatch{ic: ic}, ev: &reports.Evidence{}}
		stop := cr.intr.watch()
		tc.before(cr)
		interruptNow(t, cr, cancel)
		// The case moves on before it looks: the reason keeps where the
		// interrupt found it.
		cr.intr.stageBegins(reports.StageActivation)
		if !cr.intr.interruptReached() || cr.intr.reason != tc.want {
			t.Errorf("%s: interrupted %q, want %q", tc.name, cr.intr.reason, tc.want)
		}
		stop()
	}
}

// The case: the interrupt came while the case was in seed. The
// activation is not launched, so close has no receipt to judge:
// close.receipts is unknown (not failed) and the case is unknown, re-run
// by --resume.
func TestInterruptInSeedIsUnknownNotFailed(t *testing.T) {
	ic, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	cr := &caseRun{r: &runner{opts: Options{Interrupt: ic}}, c: caseSpec{adapter: &adapter.Manifest{}}, intr: interruptWatch{ic: ic},
		ev: &reports.Evidence{Status: reports.StatusUnknown, Checks: passedChecks("setup", "seed")}}
	defer cr.intr.watch()()
	cr.intr.stageBegins(reports.StageSeed)
	interruptNow(t, cr, cancel)
	cr.intr.stageEnds(reports.StageSeed)
	act, err := cr.activate(context.Background(), nil, modelSide{}, nil) // returns before the session: none is used
	if err != nil || act.launched || act.res != nil || checkOf(cr.ev, "activation.receipt") != "" {
		t.Fatalf("activate after the interrupt: %v, launched %t, result %+v, checks %+v; want nothing launched or judged", err, act.launched, act.res, cr.ev.Checks)
	}
	c, _ := closeReceipts(act.launched, closed{res: &session.CloseResult{Receipts: map[string]*receipt.Receipt{}}}, nil, cr.intr.reason, "")
	cr.ev.Checks = append(cr.ev.Checks, c)
	if st, d := checkOf(cr.ev, "close.receipts"), checkDetail(cr.ev, "close.receipts"); st != reports.StatusUnknown || !strings.Contains(d, "no launch ran") || !strings.Contains(d, "SIGINT during seed") {
		t.Errorf("close.receipts: %s %q; want unknown, saying no launch ran and why", st, d)
	}
	cr.verdict()
	if cr.ev.Status != reports.StatusUnknown || cr.ev.Interrupted != "SIGINT during seed" {
		t.Errorf("case: status %s, interrupted %q; want unknown, SIGINT during seed", cr.ev.Status, cr.ev.Interrupted)
	}
}

// close.receipts still fails what it must: a launch close could not
// confirm, an activation launched whose receipt is missing or not
// confirmed, interrupted or not. With every launch confirmed it passes
// (the positive control).
func TestCloseReceiptsJudgesTheLaunchesThatRan(t *testing.T) {
	confirmed := &receipt.Receipt{CleanupConfirmed: true}
	for _, tc := range []struct {
		name        string
		activated   bool
		receipts    map[string]*receipt.Receipt
		closeErr    error
		interrupted string
		want        reports.Status
		missing     []string // CloseResult.Missing
	}{
		{"all confirmed", true, map[string]*receipt.Receipt{"activation": confirmed, "install": confirmed}, nil, "", reports.StatusPassed, nil},
		{"install only, activation never launched", false, map[string]*receipt.Receipt{"install": confirmed}, nil, "SIGINT during seed", reports.StatusPassed, nil},
		{"close failed", false, map[string]*receipt.Receipt{}, errors.New("close launch \"install\": no receipt"), "SIGINT during seed", reports.StatusFailed, nil},
		{"activation launched, no receipt", true, map[string]*receipt.Receipt{"install": confirmed}, nil, "SIGINT during activation", reports.StatusFailed, nil},
		{"activation not confirmed", true, map[string]*receipt.Receipt{"activation": {CleanupConfirmed: false}}, nil, "", reports.StatusFailed, nil},
		{"no launch, seed failed", false, map[string]*receipt.Receipt{}, nil, "", reports.StatusUnknown, nil},
		// A declared capture the harness never wrote: the interrupt cut
		// it short (unknown), or it finished without it (failed).
		{"capture not there, interrupted", true, map[string]*receipt.Receipt{"activation": confirmed}, missingCapture(), "SIGINT during activation", reports.StatusUnknown, []string{"/s/db"}},
		{"capture not there, not interrupted", true, map[string]*receipt.Receipt{"activation": confirmed}, missingCapture(), "", reports.StatusFailed, []string{"/s/db"}},
		{"capture not there and a receipt not confirmed, interrupted", true, map[string]*receipt.Receipt{"activation": confirmed},
			fmt.Errorf("close session c-1: %w", errors.Join(errors.New("close launch \"install\": not confirmed"), missingCapture())), "SIGINT during activation", reports.StatusFailed, []string{"/s/db"}},
	} {
		var closeReceipt *reports.Receipt
		if rec, ok := tc.receipts[activation]; ok {
			closeReceipt = receiptOf(rec)
		}
		c, _ := closeReceipts(tc.activated, closed{res: &session.CloseResult{Receipts: tc.receipts, Missing: tc.missing}, err: tc.closeErr},
			closeReceipt, tc.interrupted, "")
		if c.Status != tc.want {
			t.Errorf("%s: close.receipts %s (%s), want %s", tc.name, c.Status, c.Detail, tc.want)
		}
	}
}

// missingCapture is close's error for a declared capture not there, as
// session.Close joins it.
func missingCapture() error {
	return fmt.Errorf("close session c-1: %w", errors.Join(fmt.Errorf("capture %q: %w", "/s/db",
		fmt.Errorf("download %q: %w", "/s/db", provider.ErrPathNotFound))))
}

func TestOnlyNotFound(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{missingCapture(), true},
		{errors.Join(missingCapture(), missingCapture()), true},
		{errors.Join(missingCapture(), errors.New("close launch \"activation\": no receipt")), false},
		{fmt.Errorf("close session: %w", errors.Join(fmt.Errorf("x: %w", provider.ErrPathNotFound), provider.Errorf("exec", "c", provider.ErrGone))), false},
		{errors.New("remove the session dir: exit 1"), false},
	} {
		if got := onlyNotFound(tc.err); got != tc.want {
			t.Errorf("onlyNotFound(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
}

func checkDetail(ev *reports.Evidence, id string) string {
	for _, c := range ev.Checks {
		if c.ID == id {
			return c.Detail
		}
	}
	return ""
}
