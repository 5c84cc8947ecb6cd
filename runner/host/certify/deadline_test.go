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
	"github.com/sandproof/sandproof/runner/model"
	"github.com/sandproof/sandproof/runner/probe"
)

// The owner's deadlines (deadline.go), engine-free: an owner exec that
// never returns ends at the deadline with the documented status, at each
// place the owner execs (verify, setup's baseline, the cancel owner's
// wait), and a case whose owner could not look is unknown, never passed.
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
// deadline, with an error that says so and is no provider error (the
// sandbox may be fine); the run's own end, by contrast, is the hard stop
// (a provider error), and the wrapper keeps the sandbox's parts.
func TestOwnerExecThatNeverReturnsEndsAtTheDeadline(t *testing.T) {
	stuck := newStuck(t, memDiffer{newMemSandbox(nil)}, probePath+" snapshot")
	sb := withOwnerDeadline(stuck, 20*time.Millisecond)
	err := await(t, "snapshot", func() error { _, err := snapshot(context.Background(), sb, []string{Deliverable}); return err })
	if stuck.entered.Load() != 1 {
		t.Fatalf("positive control: the stuck exec was entered %d times, want once", stuck.entered.Load())
	}
	if !ownerBlind(err) || provider.IsProviderError(err) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "20ms") {
		t.Fatalf("snapshot: %v; want the owner's deadline (20ms), no provider error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = await(t, "snapshot, the run stopped", func() error { _, err := snapshot(ctx, sb, nil); return err })
	if !provider.IsProviderError(err) || ownerBlind(err) {
		t.Errorf("snapshot once the run's context ended: %v, want a provider error (the hard stop)", err)
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
// deadline too, by the probe itself.
func TestProbeOwnDeadlineIsTheOwners(t *testing.T) {
	mem := newMemSandbox(nil)
	mem.execs[probePath+" snapshot"] = func(provider.ExecSpec) (provider.ExecResult, error) {
		return provider.ExecResult{ExitCode: probe.ExitDeadline, Stderr: []byte("probe: the probe's deadline passed (1m0s)")}, nil
	}
	_, err := snapshot(context.Background(), mem, nil)
	if !ownerBlind(err) || !strings.Contains(err.Error(), "the probe itself") {
		t.Fatalf("snapshot whose probe exited %d: %v, want the owner's deadline, by the probe", probe.ExitDeadline, err)
	}
}

// A whole case whose verify snapshot never returns: verify ends at the
// deadline, the case is unknown (verify.owner, error_type
// owner_deadline), nothing verify was to read is judged, and teardown
// still runs. The same case with the probe answering passes (the
// positive control: the rest of it is good).
func TestWholeCaseVerifyPastTheDeadlineIsUnknown(t *testing.T) {
	w := newWholeCase(t)
	if ev := w.run(t, goodHarness); ev.Status != reports.StatusPassed {
		t.Fatalf("positive control: the good case is %s, failed %q", ev.Status, failedChecks(ev))
	}
	w = newWholeCase(t)
	var stuck *stuckSandbox
	w.wrap = func(m memDiffer) provider.Sandbox {
		stuck = newStuck(t, m, probePath+" snapshot")
		return stuck
	}
	w.cr.r.opts.OwnerDeadline = 20 * time.Millisecond
	ev := await(t, "the case", func() *reports.Evidence { return w.run(t, goodHarness) })
	if stuck.entered.Load() != 1 {
		t.Fatalf("positive control: verify's snapshot was entered %d times, want once", stuck.entered.Load())
	}
	c := checkByID(ev, "verify.owner")
	if c.Status != reports.StatusUnknown || !strings.Contains(c.Detail, "did not end within 20ms") {
		t.Errorf("verify.owner %+v, want unknown naming the deadline", c)
	}
	if ev.Status != reports.StatusUnknown || ev.Passed || ev.ErrorType == nil || *ev.ErrorType != "owner_deadline" {
		t.Errorf("status %s, passed %t, error_type %v; want unknown, owner_deadline", ev.Status, ev.Passed, ev.ErrorType)
	}
	for _, c := range ev.Checks {
		if strings.HasPrefix(c.ID, "verify.") && c.ID != "verify.owner" {
			t.Errorf("%s %s: judged although verify could not look", c.ID, c.Status)
		}
	}
	if c := checkByID(ev, "teardown.container_removed"); c.Status != reports.StatusPassed || ev.VerifierPassed {
		t.Errorf("teardown %+v, verifier_passed %t; want teardown passed, the verifier not", c, ev.VerifierPassed)
	}
}

// A probe that exits non-zero at verify (an owner's witness that broke)
// is recorded as verify.owner, unknown, never dropped: before, verify
// returned its error, no verify check was written, and the case was
// judged passed on the others.
func TestWholeCaseProbeFailureAtVerifyIsUnknown(t *testing.T) {
	w := newWholeCase(t)
	ev := w.run(t, func(w *wholeCase) {
		goodHarness(w)
		w.sb.mu.Lock()
		w.sb.execs[probePath+" snapshot"] = func(provider.ExecSpec) (provider.ExecResult, error) {
			return provider.ExecResult{ExitCode: 1, Stderr: []byte("probe: take snapshot: read /proc: boom")}, nil
		}
		w.sb.mu.Unlock()
	})
	c := checkByID(ev, "verify.owner")
	if c.Status != reports.StatusUnknown || !strings.Contains(c.Detail, "exit 1: probe: take snapshot: read /proc: boom") {
		t.Errorf("verify.owner %+v, want unknown with the probe's word", c)
	}
	if ev.Status != reports.StatusUnknown || ev.Passed || ev.ErrorType == nil || *ev.ErrorType != "owner_error" {
		t.Errorf("status %s, passed %t, error_type %v; want unknown, owner_error", ev.Status, ev.Passed, ev.ErrorType)
	}
}

// Setup's probe run that never prints its baseline: setup ends at the
// deadline, unknown (nothing of the harness ran, so it is the owner's,
// not the harness's); the case is unknown.
func TestWholeCaseBaselinePastTheDeadlineIsUnknown(t *testing.T) {
	w := newWholeCase(t)
	var stuck *stuckSandbox
	w.wrap = func(m memDiffer) provider.Sandbox {
		stuck = newStuck(t, m, probePath+" setup")
		return stuck
	}
	w.cr.r.opts.OwnerDeadline = 20 * time.Millisecond
	ev := await(t, "the case", func() *reports.Evidence { return w.run(t, goodHarness) })
	if stuck.entered.Load() != 1 {
		t.Fatalf("positive control: setup's run was started %d times, want once", stuck.entered.Load())
	}
	c := checkByID(ev, "setup")
	if c.Status != reports.StatusUnknown || !strings.Contains(c.Detail, "baseline") {
		t.Errorf("setup %+v, want unknown naming the baseline", c)
	}
	if ev.Status != reports.StatusUnknown || ev.ErrorType == nil || *ev.ErrorType != "owner_deadline" {
		t.Errorf("status %s, error_type %v; want unknown, owner_deadline", ev.Status, ev.ErrorType)
	}
}

// The cancel's owner, the harness having run the writer, looks for the
// writer's file with a snapshot that never returns: it closes the session
// at the deadline (scenario.writer_started then judges what verify finds)
// rather than waiting.
func TestCancelOwnerSnapshotPastTheDeadlineCloses(t *testing.T) {
	stuck := newStuck(t, memDiffer{newMemSandbox(nil)}, probePath+" snapshot")
	stalled, cancelled := make(chan struct{}), make(chan struct{})
	close(stalled)
	await(t, "the cancel owner", func() struct{} {
		cancelOnStall(context.Background(), stalled, func() int { return stalledAfterWriter }, func() []model.Call { return ranWriter },
			withOwnerDeadline(stuck, 20*time.Millisecond), func() { close(cancelled) })
		return struct{}{}
	})
	if stuck.entered.Load() != 1 || !isClosed(cancelled) {
		t.Fatalf("snapshot entered %d times, cancelled %t; want one stuck snapshot, then the close", stuck.entered.Load(), isClosed(cancelled))
	}
}

// The judge: a check unknown and none failed is an unknown case (--resume
// runs it again), error_type check_unknown unless a step named its own;
// a failed check still fails it; all passed passes (positive control).
func TestJudgeUnknownWithoutFailureIsUnknown(t *testing.T) {
	passed := reports.Check{ID: "setup", Status: reports.StatusPassed}
	unknown := reports.Check{ID: "verify.owner", Status: reports.StatusUnknown}
	failed := reports.Check{ID: "verify.markers", Status: reports.StatusFailed}
	for _, tc := range []struct {
		checks  []reports.Check
		status  reports.Status
		errType string
	}{
		{[]reports.Check{passed, passed}, reports.StatusPassed, ""},
		{[]reports.Check{passed, unknown}, reports.StatusUnknown, "check_unknown"},
		{[]reports.Check{unknown, failed}, reports.StatusFailed, "check_failed"},
	} {
		ev := &reports.Evidence{Status: reports.StatusUnknown, Checks: tc.checks}
		judge(ev, "")
		et := ""
		if ev.ErrorType != nil {
			et = *ev.ErrorType
		}
		if ev.Status != tc.status || et != tc.errType || ev.Passed != (tc.status == reports.StatusPassed) {
			t.Errorf("checks %v: %s (%q, passed %t), want %s (%q)", tc.checks, ev.Status, et, ev.Passed, tc.status, tc.errType)
		}
	}
}

// ownerCheck: passed without an error, failed on one the harness may
// have made, unknown on the owner's deadline.
func TestOwnerCheckStatuses(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want reports.Status
	}{
		{nil, reports.StatusPassed},
		{errors.New("probe setup: exit 1: mkdir /task: file exists"), reports.StatusFailed},
		{&ownerDeadlineError{op: "inspect", after: time.Second, by: "the host"}, reports.StatusUnknown},
	} {
		cr := &caseRun{ev: &reports.Evidence{}}
		cr.ownerCheck("setup", clauseSetup, tc.err, "x: %v", tc.err)
		if got := cr.ev.Checks[0].Status; got != tc.want {
			t.Errorf("ownerCheck(%v) = %s, want %s", tc.err, got, tc.want)
		}
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
