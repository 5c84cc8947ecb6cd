package certify

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/probe"
)

// The owner's deadlines (deadline.go), engine-free: an owner exec that
// never returns ends at the deadline with the documented status, where
// the owner execs (verify, setup's baseline), and a case whose owner
// could not look is never passed.
// No test times anything: each waits on what happened, and a minute is
// only the bound past which a hang is reported rather than waited out.

// stuckSandbox is an engine that stopped answering for some commands: an
// exec whose argv starts with block enters and never returns while the
// test runs (it ignores its context, as a lost connection would), and a
// streamed start of setup never prints its baseline. It refuses an exec
// whose context has no deadline, so a caller without the owner's
// deadline fails at once rather than hanging the test.
type stuckSandbox struct {
	memDiffer
	block   string
	entered atomic.Int32
	release chan struct{}
}

func newStuck(t *testing.T, mem memDiffer, block string) *stuckSandbox {
	s := &stuckSandbox{memDiffer: mem, block: block, release: make(chan struct{})}
	t.Cleanup(func() { close(s.release) })
	return s
}

func (s *stuckSandbox) matches(argv []string) bool {
	w := strings.Fields(s.block)
	return len(argv) >= len(w) && slices.Equal(argv[:len(w)], w)
}

func (s *stuckSandbox) Exec(ctx context.Context, spec provider.ExecSpec) (provider.ExecResult, error) {
	if !s.matches(spec.Argv) {
		return s.memDiffer.Exec(ctx, spec)
	}
	if _, ok := ctx.Deadline(); !ok {
		return provider.ExecResult{}, errors.New("stuck sandbox: an owner exec without a deadline")
	}
	s.entered.Add(1)
	<-s.release
	return provider.ExecResult{}, errors.New("stuck sandbox: released at the test's end")
}

// Start of a blocked command: its stdin is read and dropped, its stdout
// never written until its stdin is closed, then it exits 0.
func (s *stuckSandbox) Start(ctx context.Context, spec provider.ExecSpec, stderr io.Writer) (*provider.Process, error) {
	if !s.matches(spec.Argv) {
		return s.memDiffer.Start(ctx, spec, stderr)
	}
	s.entered.Add(1)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	closed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, inR)
		outW.Close()
		close(closed)
	}()
	return &provider.Process{Stdin: inW, Stdout: outR, Wait: func() (int, error) { <-closed; return 0, nil }}, nil
}

// await returns what fn returns, failing the test if it still waits after
// a minute (a hang, reported).
func await[T any](t *testing.T, what string, fn func() T) T {
	t.Helper()
	got := make(chan T, 1)
	go func() { got <- fn() }()
	select {
	case v := <-got:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("%s: still waiting after a minute", what)
		panic("unreachable")
	}
}

// A probe snapshot whose exec never returns ends at the owner's
// deadline, as a provider error (the provider did not answer in time:
// the case stops, and the engine's word decides unknown or failed) that
// says so; the run's own end is the hard stop (a provider error, no
// deadline), and the wrapper keeps the sandbox's parts.
func TestOwnerExecThatNeverReturnsEndsAtTheDeadline(t *testing.T) {
	stuck := newStuck(t, memDiffer{newMemSandbox(nil)}, probePath+" snapshot")
	sb := withOwnerDeadline(stuck, 20*time.Millisecond)
	err := await(t, "snapshot", func() error { _, err := snapshot(context.Background(), sb, []string{Deliverable}); return err })
	if stuck.entered.Load() != 1 {
		t.Fatalf("positive control: the stuck exec was entered %d times, want once", stuck.entered.Load())
	}
	if !ownerBlind(err) || !provider.IsProviderError(err) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did not end within 20ms") {
		t.Fatalf("snapshot: %v; want a provider error naming the owner's deadline (20ms)", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = await(t, "snapshot, the run stopped", func() error { _, err := snapshot(ctx, sb, nil); return err })
	if !provider.IsProviderError(err) || ownerBlind(err) {
		t.Errorf("snapshot once the run's context ended: %v, want a provider error (the hard stop), not the deadline", err)
	}
	if _, ok := provider.As[provider.Differ](sb); !ok {
		t.Error("the bounded sandbox lost its Differ")
	}
	if _, ok := provider.As[provider.Streamer](sb); !ok {
		t.Error("the bounded sandbox lost its Streamer")
	}
	// Positive control: a command that answers answers through it.
	if res, err := sb.Exec(context.Background(), provider.ExecSpec{Argv: []string{"true"}}); err != nil || res.ExitCode != 127 {
		t.Errorf("an answered exec: %+v, %v; want the mem sandbox's 127", res, err)
	}
}

// The probe's own deadline (exit probe.ExitDeadline) is the owner's
// deadline too, by the probe itself; the exec answered, so it is no
// provider error.
func TestProbeOwnDeadlineIsTheOwners(t *testing.T) {
	mem := newMemSandbox(nil)
	mem.execs[probePath+" snapshot"] = func(provider.ExecSpec) (provider.ExecResult, error) {
		return provider.ExecResult{ExitCode: probe.ExitDeadline, Stderr: []byte("probe: the probe's deadline passed (1m0s)")}, nil
	}
	_, err := snapshot(context.Background(), mem, nil)
	if !ownerBlind(err) || provider.IsProviderError(err) || !strings.Contains(err.Error(), "the probe itself") {
		t.Fatalf("snapshot whose probe exited %d: %v, want the owner's deadline, by the probe, no provider error", probe.ExitDeadline, err)
	}
}

// A whole case whose verify snapshot never returns: verify ends at the
// deadline with its provider check (verify.provider, naming the
// deadline), nothing verify was to read is judged, teardown still runs,
// and the case is not passed. The same case with the probe answering
// passes (the positive control: the rest of it is good).
func TestWholeCaseVerifyPastTheDeadlineStops(t *testing.T) {
	w := newWholeCase(t)
	if ev := w.run(t, goodHarness); ev.Status != reports.StatusPassed {
		t.Fatalf("positive control: the good case is %s, failed %q", ev.Status, failedChecks(ev))
	}
	w = newWholeCase(t)
	var stuck *stuckSandbox
	w.wrap = func(sb provider.Sandbox) provider.Sandbox {
		stuck = newStuck(t, sb.(memDiffer), probePath+" snapshot")
		return stuck
	}
	w.cr.r.opts.OwnerDeadline = 20 * time.Millisecond
	ev := await(t, "the case", func() *reports.Evidence { return w.run(t, goodHarness) })
	if stuck.entered.Load() != 1 {
		t.Fatalf("positive control: verify's snapshot was entered %d times, want once", stuck.entered.Load())
	}
	c := checkByID(ev, "verify.provider")
	if c.Status != reports.StatusFailed || !strings.Contains(c.Detail, "did not end within 20ms") {
		t.Errorf("verify.provider %+v, want failed naming the owner's deadline", c)
	}
	if ev.Status == reports.StatusPassed || ev.Passed || ev.VerifierPassed {
		t.Errorf("status %s, passed %t, verifier_passed %t; want not passed", ev.Status, ev.Passed, ev.VerifierPassed)
	}
	for _, c := range ev.Checks {
		if strings.HasPrefix(c.ID, "verify.") && c.ID != "verify.provider" {
			t.Errorf("%s %s: judged although verify could not look", c.ID, c.Status)
		}
	}
	if c := checkByID(ev, "teardown.container_removed"); c.Status != reports.StatusPassed {
		t.Errorf("teardown %+v, want passed", c)
	}
}

// A probe that exits non-zero at verify (its own deadline, exit 3, or any
// other failure) is recorded as verify.owner, failed, never dropped:
// before, verify returned its error, no verify check was written, and
// the case was judged passed on the others.
func TestWholeCaseProbeFailureAtVerifyFails(t *testing.T) {
	for _, tc := range []struct {
		code    int
		said    string
		errType string
	}{
		{1, "probe: take snapshot: read /proc: boom", "owner_error"},
		{probe.ExitDeadline, "probe: the probe's deadline passed (1m0s)", "owner_deadline"},
	} {
		w := newWholeCase(t)
		ev := w.run(t, func(w *wholeCase) {
			goodHarness(w)
			w.sb.mu.Lock()
			w.sb.execs[probePath+" snapshot"] = func(provider.ExecSpec) (provider.ExecResult, error) {
				return provider.ExecResult{ExitCode: tc.code, Stderr: []byte(tc.said)}, nil
			}
			w.sb.mu.Unlock()
		})
		c := checkByID(ev, "verify.owner")
		if c.Status != reports.StatusFailed || !strings.Contains(c.Detail, tc.said) {
			t.Errorf("exit %d: verify.owner %+v, want failed with the probe's word", tc.code, c)
		}
		if ev.Status != reports.StatusFailed || ev.Passed || ev.ErrorType == nil || *ev.ErrorType != tc.errType {
			t.Errorf("exit %d: status %s, passed %t, error_type %v; want failed, %s", tc.code, ev.Status, ev.Passed, ev.ErrorType, tc.errType)
		}
	}
}

// Setup's probe run that never prints its baseline: setup ends at the
// deadline (a provider error: setup.provider names it), and the case
// stops there, not passed.
func TestWholeCaseBaselinePastTheDeadlineStops(t *testing.T) {
	w := newWholeCase(t)
	var stuck *stuckSandbox
	w.wrap = func(sb provider.Sandbox) provider.Sandbox {
		stuck = newStuck(t, sb.(memDiffer), probePath+" setup")
		return stuck
	}
	w.cr.r.opts.OwnerDeadline = 20 * time.Millisecond
	ev := await(t, "the case", func() *reports.Evidence { return w.run(t, goodHarness) })
	if stuck.entered.Load() != 1 {
		t.Fatalf("positive control: setup's run was started %d times, want once", stuck.entered.Load())
	}
	c := checkByID(ev, "setup.provider")
	if c.Status != reports.StatusFailed || !strings.Contains(c.Detail, "its baseline") || !strings.Contains(c.Detail, "did not end within 20ms") {
		t.Errorf("setup.provider %+v, want failed naming the baseline's deadline", c)
	}
	if ev.Status == reports.StatusPassed || checkByID(ev, "verify.deliverable").ID != "" {
		t.Errorf("status %s, checks %+v; want the case stopped at setup, not passed", ev.Status, ev.Checks)
	}
}

// Requirements are looked up with the probe's --present (links followed,
// nothing read): a library that is a link counts; a hashed marker of the
// same path does not stand in for the look.
func TestRequirementsComeFromPresent(t *testing.T) {
	if missing := missingRequirements([]string{"sh"}, probe.Snapshot{}, false); len(missing) != 1 {
		t.Fatalf("positive control: sh on an empty image is not missing: %q", missing)
	}
	s := probe.Snapshot{Present: []probe.Marker{{Path: "/bin/sh", Size: 125560}}}
	if missing := missingRequirements([]string{"sh"}, s, false); len(missing) != 0 {
		t.Errorf("sh present: missing %q", missing)
	}
	s = probe.Snapshot{Present: []probe.Marker{{Path: "/bin/sh", Missing: true}}, Markers: []probe.Marker{{Path: "/bin/sh", SHA256: "ab"}}}
	if missing := missingRequirements([]string{"sh"}, s, false); len(missing) != 1 {
		t.Errorf("sh missing by --present: missing %q, want it", missing)
	}
	argv := (&caseRun{owner: ownerPathsFor(Options{TaskHome: ruleHome}, []string{"sh"})}).setupArgv()
	if i := slices.Index(argv, "--present"); i < 0 || argv[i+1] != "/bin/sh" || slices.Contains(argv, "/bin/sh,") {
		t.Errorf("setup argv %q: want the requirement's paths after --present", argv)
	}
}

func checkByID(ev *reports.Evidence, id string) reports.Check {
	for _, c := range ev.Checks {
		if c.ID == id {
			return c
		}
	}
	return reports.Check{}
}
