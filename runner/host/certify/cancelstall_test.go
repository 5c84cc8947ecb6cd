package certify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/model"
	"github.com/sandproof/sandproof/runner/probe"
)

// The owner's watch at the stall (watchStall) on the in-memory sandbox:
// it looks only once the model stalls; when the harness ran the writer
// it looks for the process running the writer's command (the witness of
// scenario.writer_started), and a cancel's owner closes only once it saw
// that process and the writer's file holds a line, so the positive
// control never races the writer; a harness that never ran it is closed
// at the stall. Each test waits on what the owner did (its snapshots
// counted, its cancel seen), never on a sleep.

// ranWriter is the model's record at the stall when the harness ran the
// writer: the request that asked for it, and not yet the one after it
// (the tool's result), which stalls: the model records a request once it
// is answered. stalledAfterWriter is that stalled request's number.
var ranWriter = []model.Call{{Seq: 1, Reply: "tool_call"}, {Seq: 2, Reply: "start_writer"}}

const stalledAfterWriter = 3

// ownerRun is one watchStall running in the background.
type ownerRun struct {
	stalled   chan struct{}
	cancelled chan struct{}
	forwarded chan struct{} // a timeout's owner brought the deadline forward
	returned  chan struct{}
	snapshots atomic.Int32  // the probe snapshots it took
	witness   writerWitness // what it returned, once returned is closed
	// onLook, when set, runs (sb.mu held) before each snapshot is
	// answered: a writer appending as time passes.
	onLook func()
}

// writerProc is the writer as the probe lists it: uid 1000's `sh -c` of
// the writer's loop, the image's sh (the mem sandbox resolves sh to
// /usr/bin/dash).
func writerProc(pid int) probe.Process {
	return probe.Process{PID: pid, StartTime: uint64(pid) * 10, PPID: 1, UID: 1000, Comm: "sh", State: "S",
		Detail: &probe.Detail{GID: 1000, Cmdline: []string{"sh", "-c", model.WriterLoop(writerFile)}, Exe: "/usr/bin/dash"}}
}

// startOwner starts a cancel's owner.
func startOwner(ctx context.Context, sb *memSandbox, calls []model.Call, stallSeq int) *ownerRun {
	return startWatch(ctx, sb, calls, stallSeq, true, timeoutStop{}, nil)
}

// timeoutStop is a timeout owner's stop for startWatch: forward answers
// for `warden renew --deadline` (the instant it set, or its error);
// ceiling is the launch's own deadline.
type timeoutStop struct {
	forward func() (time.Time, error)
	ceiling time.Time
}

// startWatch starts a cancel's owner (cancels) or a timeout's (ts).
func startWatch(ctx context.Context, sb *memSandbox, calls []model.Call, stallSeq int, cancels bool, ts timeoutStop, onLook func()) *ownerRun {
	o := &ownerRun{stalled: make(chan struct{}), cancelled: make(chan struct{}), forwarded: make(chan struct{}), returned: make(chan struct{}), onLook: onLook}
	sb.now = time.Now
	// The probe's snapshot as the mem sandbox answers it, counted.
	sb.execs[probePath+" snapshot"] = func(spec provider.ExecSpec) (provider.ExecResult, error) {
		o.snapshots.Add(1)
		if o.onLook != nil {
			o.onLook()
		}
		out, err := json.Marshal(sb.probeLocked(spec.Argv))
		return provider.ExecResult{Stdout: out}, err
	}
	var once atomic.Bool
	cancel := func() {
		if once.CompareAndSwap(false, true) {
			close(o.cancelled)
		}
	}
	stop := stallStop{cancel: cancel}
	if !cancels {
		stop = stallStop{ceiling: ts.ceiling, forward: func() (time.Time, error) {
			close(o.forwarded)
			return ts.forward()
		}}
	}
	go func() {
		defer close(o.returned)
		o.witness = watchStall(ctx, o.stalled, func() int { return stallSeq }, func() []model.Call { return calls }, memDiffer{sb}, 1000, stop)
	}()
	return o
}

// liveWriter is the writer's file as a live writer keeps it, for onLook
// (sb.mu held): from its start, a line a period, each dated when it is
// written. Until start is set (a pointer, so a test starts it late) it
// writes nothing.
func liveWriter(sb *memSandbox, start *atomic.Pointer[time.Time]) func() {
	return func() {
		t0 := start.Load()
		if t0 == nil {
			return
		}
		have := strings.Count(sb.files[writerFile], "\n")
		for n := int(time.Since(*t0)/writerPeriod) + 1; have < n; have++ {
			sb.files[writerFile] += fmt.Sprintf("%d %d\n", have, time.Now().Unix())
		}
	}
}

// awaitSnapshots waits until the owner has taken n snapshots since the
// call, failing the test after d.
func (o *ownerRun) awaitSnapshots(t *testing.T, n int32, d time.Duration) {
	t.Helper()
	want := o.snapshots.Load() + n
	for end := time.Now().Add(d); o.snapshots.Load() < want; {
		if isClosed(o.cancelled) {
			t.Fatalf("the owner closed after %d snapshot(s), before the writer's file held a line", o.snapshots.Load())
		}
		if time.Now().After(end) {
			t.Fatalf("the owner took %d snapshot(s), want %d within %s", o.snapshots.Load(), want, d)
		}
		time.Sleep(5 * time.Millisecond) // polling a counter, not standing in for it
	}
}

// waitFor fails the test unless ch is closed within d.
func waitFor(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not within %s", what, d)
	}
}

// isClosed reports whether ch is closed now.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// The harness ran the writer: after the stall the owner keeps looking
// while the writer's process is not in the table or its file is missing
// (a file the harness wrote by hand, with no writer running, does not end
// the look); once it saw the writer it looks on until its file grows at
// the writer's pace across looks, and only then closes: the witness is
// the writer's process and the looks that saw it write.
func TestCancelOwnerWaitsForTheWriterToWrite(t *testing.T) {
	t.Parallel() // waits on the owner's real looks (seconds): after the quick tests, which -failfast may stop at
	sb := newMemSandbox(nil)
	var start atomic.Pointer[time.Time]
	o := startWatch(context.Background(), sb, ranWriter, stalledAfterWriter, true, timeoutStop{}, liveWriter(sb, &start))
	close(o.stalled)
	o.awaitSnapshots(t, 2, 5*time.Second)
	sb.write(writerFile, "0 1765000000\n")
	o.awaitSnapshots(t, 2, 5*time.Second)
	// A process with the writer's mark but not its command is not it.
	fake := writerProc(60)
	fake.Detail.Cmdline = []string{"sh", "-c", ": sandproof-writer; sleep 100"}
	sb.spawn(fake)
	o.awaitSnapshots(t, 2, 5*time.Second)
	// The writer starts, its file anew.
	sb.mu.Lock()
	delete(sb.files, writerFile)
	sb.procs = append(sb.procs, writerProc(61))
	now := time.Now()
	start.Store(&now)
	sb.mu.Unlock()
	seenAt := o.snapshots.Load()
	waitFor(t, o.cancelled, 10*time.Second, "close once the writer's file grew")
	waitFor(t, o.returned, 5*time.Second, "owner returns")
	if o.witness.proc.ID() != writerProc(61).ID() {
		t.Errorf("witness %+v, want the writer's process 61", o.witness.proc)
	}
	if n := o.snapshots.Load(); n < seenAt+2 {
		t.Errorf("%d snapshot(s), %d once the writer was in the table: the owner did not wait for it to write", n, seenAt)
	}
	if v := o.witness.judge(1000, time.Time{}); !v.ok {
		t.Errorf("the looks at a live writer: %s; want them to show it writing", v.text())
	}
}

// A writer that does not write (stopped, or its file written in a burst
// and read-only) is closed on once the owner's growth wait is over, not
// before it looked several times; its looks show what was wrong.
func TestCancelOwnerClosesOnAWriterThatDoesNotWrite(t *testing.T) {
	t.Parallel() // waits on the owner's real looks (seconds): after the quick tests, which -failfast may stop at
	sb := newMemSandbox(map[string]string{writerFile: writerLines(time.Now().Unix(), 400)})
	p := writerProc(62)
	p.State = "T"
	sb.spawn(p)
	sb.identify(writerFile, probe.FileID{UID: 1000, GID: 1000, Mode: syscall.S_IFREG | 0o444})
	o := startOwner(context.Background(), sb, ranWriter, stalledAfterWriter)
	close(o.stalled)
	waitFor(t, o.cancelled, 10*time.Second, "close past the growth wait")
	waitFor(t, o.returned, 5*time.Second, "owner returns")
	if n := o.snapshots.Load(); n < 4 {
		t.Errorf("closed after %d look(s); want the owner to look again for growth first", n)
	}
	v := o.witness.judge(1000, time.Time{})
	for _, says := range []string{"stopped (state T)", "did not grow", "read-only"} {
		if v.ok || !strings.Contains(v.text(), says) {
			t.Errorf("the looks at a writer that does not write: ok %t, %s; want them failed, saying %q", v.ok, v.text(), says)
		}
	}
}

// A timeout's watch (no cancel) looks until the writer's file grew, then
// brings the launch's deadline forward (warden renew --deadline) and looks
// once more nearStopLead before the instant it set, so its looks span the
// writer's run up to the stop; it closes nothing.
func TestTimeoutWatchBringsTheDeadlineForwardThenLooksAgain(t *testing.T) {
	t.Parallel() // waits on the owner's real looks (seconds): after the quick tests, which -failfast may stop at
	sb := newMemSandbox(nil)
	var start atomic.Pointer[time.Time]
	now := time.Now()
	start.Store(&now)
	var stopAt time.Time
	ts := timeoutStop{ceiling: now.Add(time.Hour), forward: func() (time.Time, error) {
		stopAt = time.Now().Add(stallStopAfter)
		return stopAt, nil
	}}
	o := startWatch(context.Background(), sb, ranWriter, stalledAfterWriter, false, ts, liveWriter(sb, &start))
	close(o.stalled)
	o.awaitSnapshots(t, 1, 5*time.Second)
	if isClosed(o.forwarded) {
		t.Fatal("the deadline was brought forward before the owner saw the writer")
	}
	sb.spawn(writerProc(70))
	waitFor(t, o.returned, 10*time.Second, "the watch returns after its last look")
	if !isClosed(o.forwarded) {
		t.Fatal("a timeout's watch never brought the deadline forward")
	}
	ls := o.witness.sights
	lastLook := stopAt.Add(-nearStopLead)
	if o.witness.proc.PID != 70 || len(ls) < 3 || ls[len(ls)-1].at.Before(lastLook) || !ls[len(ls)-1].at.Before(stopAt) {
		t.Fatalf("witness of pid %d with %d look(s), the last at %v; want pid 70, its growth and a last look between %v and the stop at %v",
			o.witness.proc.PID, len(ls), ls, lastLook, stopAt)
	}
	if isClosed(o.cancelled) {
		t.Error("a timeout's watch cancelled")
	}
	if v := o.witness.judge(1000, stopAt.Add(-lookMargin)); !v.ok {
		t.Errorf("the looks at a live writer: %s", v.text())
	}
}

// A timeout whose harness never ran the writer has its deadline brought
// forward at the stall all the same, with no look: the stop must not wait
// for the launch's ceiling. When the sandbox's warden refuses the request,
// the owner's last look is anchored at the ceiling, and the witness keeps
// why.
func TestTimeoutWatchBringsTheDeadlineForwardWithoutTheWriter(t *testing.T) {
	sb := newMemSandbox(nil)
	refused := errors.New("warden renew --deadline: exit 2: unknown flag")
	ts := timeoutStop{ceiling: time.Now().Add(-time.Second), forward: func() (time.Time, error) { return time.Time{}, refused }}
	o := startWatch(context.Background(), sb, []model.Call{{Seq: 1, Reply: "start_writer"}}, 0, false, ts, nil)
	close(o.stalled)
	waitFor(t, o.returned, 5*time.Second, "the watch returns at the stall")
	if !isClosed(o.forwarded) {
		t.Fatal("the deadline was not brought forward at the stall")
	}
	if n := o.snapshots.Load(); n != 0 {
		t.Errorf("%d snapshot(s) taken; a harness without the writer needs none", n)
	}
	if !errors.Is(o.witness.forwardErr, refused) {
		t.Errorf("witness forwardErr %v, want the refusal", o.witness.forwardErr)
	}
}

// A harness that never ran the writer (it asked for it and nothing came
// after, or it has no shell) is closed at the stall, with no lookup.
func TestCancelOwnerClosesAtTheStallWithoutTheWriter(t *testing.T) {
	for name, tc := range map[string]struct {
		calls    []model.Call
		stallSeq int
	}{
		"asked, never ran": {[]model.Call{{Seq: 1, Reply: "start_writer"}}, 0},
		"no shell":         {[]model.Call{{Seq: 1, Reply: "read_challenge", ToolNames: []string{"read"}}}, 2},
	} {
		sb := newMemSandbox(nil)
		o := startOwner(context.Background(), sb, tc.calls, tc.stallSeq)
		close(o.stalled)
		waitFor(t, o.cancelled, 5*time.Second, name+": close at the stall")
		if n := o.snapshots.Load(); n != 0 {
			t.Errorf("%s: %d snapshot(s) taken; a harness without the writer needs none", name, n)
		}
	}
}

// Before the stall the owner does nothing, though the writer's file
// holds a line (it waits on the model, not on the file): within an
// observation window (an owner that did not wait would close in
// microseconds) no lookup and no close. Then the launch ending first (or
// the run's interrupt) ends the owner without a close of its own: the
// activation's wait is not its to end.
func TestCancelOwnerWaitsForTheStall(t *testing.T) {
	sb := newMemSandbox(nil)
	sb.write(writerFile, "0 1765000000\n")
	sb.spawn(writerProc(80))
	ctx, stop := context.WithCancel(context.Background())
	o := startOwner(ctx, sb, ranWriter, stalledAfterWriter)
	select {
	case <-o.cancelled:
		t.Fatal("closed before the model stalled")
	case <-time.After(300 * time.Millisecond): // the window a negative observation needs
	}
	if n := o.snapshots.Load(); n != 0 {
		t.Fatalf("%d snapshot(s) before the stall", n)
	}
	stop()
	waitFor(t, o.returned, 5*time.Second, "owner returns when its context ends")
	if isClosed(o.cancelled) {
		t.Error("the owner cancelled after its context ended before any stall")
	}
}
