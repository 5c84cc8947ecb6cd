package certify_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/certify"
)

// interruptAt is a run's progress writer that interrupts the run, with
// cause SIGINT, the moment case begins stage: the progress line is written
// on the case's own goroutine as the stage begins, so the interrupt is in
// effect for the whole stage, on every run (no sleep, no race with the
// stage's end).
type interruptAt struct {
	caseID, stage string
	cancel        context.CancelCauseFunc

	mu    sync.Mutex
	lines []string
	fired bool
	after []string // the lines written after the interrupt
}

func (w *interruptAt) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.lines = append(w.lines, l)
		switch {
		case w.fired:
			w.after = append(w.after, l)
		case l == "certify: "+w.caseID+": "+w.stage+" ...":
			w.fired = true
			w.cancel(errors.New("SIGINT"))
		}
	}
	return len(p), nil
}

func (w *interruptAt) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}

// TestCertifyInterruptAtEveryStage interrupts one run of six cases (the
// three fixture adapters on two images, one case at a time) at each stage
// boundary in turn: every run but the first is a --resume of the one
// before, and each is interrupted as a chosen case begins setup, seed,
// activation, close or verify (miniagent-opencode, whose declared SQLite
// capture only a harness that ran writes, takes seed, activation and
// verify). Each interrupted case must be written unknown, no check
// failed, with the stage in its reason; every other case written must
// have its uninterrupted status, and no case may start after the
// interrupt. The last --resume, not interrupted, must leave every case
// with the status an uninterrupted run of the same matrix gives it, and
// no failed or unknown case (the CLI's exit 0).
func TestCertifyInterruptAtEveryStage(t *testing.T) {
	testenv.Long(t, "seven certify runs, 17 cases, against Docker")
	imgs := needEngine(t, "debian-12", "old-python")
	warden, probe, _ := binaries(t)
	adapters := load(t, "miniagent-pi", "miniagent-daemon", "miniagent-opencode")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	opts := func(out string, resume bool) certify.Options {
		return certify.Options{Adapters: adapters, Images: imgs, Parallel: 1, Warden: warden, Probe: probe,
			Bash: bashStatic(), Out: out, Resume: resume}
	}
	statusOf := func(dir string) map[string]reports.Status {
		out := map[string]reports.Status{}
		for id, ev := range readEvidence(t, dir) {
			out[id] = ev.Status
		}
		return out
	}

	// The uninterrupted run: the reference.
	ref := t.TempDir()
	var refProgress syncBuf
	o := opts(ref, false)
	o.Progress = &refProgress
	if _, err := certify.Run(ctx, o); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, refProgress.String())
	}
	want := statusOf(ref)
	if len(want) != 6 {
		t.Fatalf("uninterrupted run: %d cases, want 6: %v", len(want), want)
	}

	// Cases run in matrix order (image, then adapter), a resumed run's
	// from its first case not final: each interrupt below is reached
	// after the cases before it in that order ran whole.
	run := t.TempDir()
	for i, at := range []struct{ caseID, stage string }{
		{"debian-12/miniagent-daemon", reports.StageSetup},        // after debian-12/miniagent-pi
		{"debian-12/miniagent-opencode", reports.StageSeed},       // after debian-12/miniagent-daemon, attempt 2
		{"debian-12/miniagent-opencode", reports.StageActivation}, // its attempt 2, first
		{"old-python/miniagent-daemon", reports.StageClose},       // after debian-12/miniagent-opencode and old-python/miniagent-pi
		{"old-python/miniagent-opencode", reports.StageVerify},    // after old-python/miniagent-daemon, attempt 2
	} {
		stage := at.stage
		ic, stop := context.WithCancelCause(context.Background())
		w := &interruptAt{caseID: at.caseID, stage: stage, cancel: stop}
		o := opts(run, i > 0)
		o.Interrupt, o.Progress = ic, w
		sum, err := certify.Run(ctx, o)
		stop(nil)
		if err != nil {
			t.Fatalf("interrupt at %s: %v\n%s", stage, err, w.String())
		}
		if !w.fired {
			t.Fatalf("interrupt at %s: the run never reached %s's %s:\n%s", stage, at.caseID, stage, w.String())
		}
		if sum.Interrupted != "SIGINT" {
			t.Errorf("interrupt at %s: summary says interrupted %q, want SIGINT", stage, sum.Interrupted)
		}
		for _, l := range w.after {
			if strings.HasSuffix(l, ": "+reports.StageSetup+" ...") {
				t.Errorf("interrupt at %s: a case started after it: %q", stage, l)
			}
		}
		evs := readEvidence(t, run)
		ev := evs[at.caseID]
		if ev == nil {
			t.Fatalf("interrupt at %s: no record of %s, the case it reached", stage, at.caseID)
		}
		var notPassed []string
		for _, c := range ev.Checks {
			if c.Status != reports.StatusPassed {
				notPassed = append(notPassed, fmt.Sprintf("%s %s: %s", c.ID, c.Status, c.Detail))
			}
		}
		if ev.Status != reports.StatusUnknown || ev.Interrupted != "SIGINT during "+stage {
			t.Errorf("interrupt at %s: %s written %s (attempt %d), interrupted %q; want unknown, \"SIGINT during %s\"; checks not passed: %v",
				stage, at.caseID, ev.Status, ev.Attempt, ev.Interrupted, stage, notPassed)
		}
		for _, c := range ev.Checks {
			if c.Status == reports.StatusFailed {
				t.Errorf("interrupt at %s: %s has a failed check %s: %s", stage, at.caseID, c.ID, c.Detail)
			}
		}
		// The cases run before the interrupt ran whole.
		for id, e := range evs {
			if id != at.caseID && e.Status != want[id] {
				t.Errorf("interrupt at %s: %s is %s, uninterrupted %s", stage, id, e.Status, want[id])
			}
		}
		t.Logf("interrupt at %s: %s %s (attempt %d), %d of 6 cases written; not passed: %v", stage, at.caseID, ev.Status, ev.Attempt, len(evs), notPassed)
	}

	// The last --resume finishes the run.
	var progress syncBuf
	o = opts(run, true)
	o.Progress = &progress
	sum, err := certify.Run(ctx, o)
	if err != nil {
		t.Fatalf("final --resume: %v\n%s", err, progress.String())
	}
	got := statusOf(run)
	if !maps.Equal(got, want) {
		ids := slices.Sorted(maps.Keys(want))
		for _, id := range ids {
			if got[id] != want[id] {
				t.Errorf("%s: %s after the interrupts and --resume, %s uninterrupted", id, got[id], want[id])
			}
		}
		t.Errorf("statuses differ: got %v, want %v", got, want)
	}
	if sum.Failed() || sum.Interrupted != "" {
		t.Errorf("final --resume: counts %v, interrupted %q; want no failed or unknown case (exit 0)", sum.Counts, sum.Interrupted)
	}
}
