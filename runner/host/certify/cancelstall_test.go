package certify

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/model"
)

// The cancel's owner (cancelOnStall) on the in-memory sandbox: it closes
// only once the model stalls, and when the harness ran the writer only
// once the writer's file holds a line, so scenario.writer_started never
// races the writer; a harness that never ran it is closed at the stall.
// Each test waits on what the owner did (its snapshots counted, its
// cancel seen), never on a sleep.

// ranWriter is the model's record at the stall when the harness ran the
// writer: the request that asked for it, and not yet the one after it
// (the tool's result), which stalls: the model records a request once it
// is answered. stalledAfterWriter is that stalled request's number.
var ranWriter = []model.Call{{Seq: 1, Reply: "tool_call"}, {Seq: 2, Reply: "start_writer"}}

const stalledAfterWriter = 3

// ownerRun is one cancelOnStall running in the background.
type ownerRun struct {
	stalled   chan struct{}
	cancelled chan struct{}
	returned  chan struct{}
	snapshots atomic.Int32 // the probe snapshots it took
}

func startOwner(ctx context.Context, sb *memSandbox, calls []model.Call, stallSeq int) *ownerRun {
	o := &ownerRun{stalled: make(chan struct{}), cancelled: make(chan struct{}), returned: make(chan struct{})}
	// The probe's snapshot as the mem sandbox answers it, counted.
	sb.execs[probePath+" snapshot"] = func(spec provider.ExecSpec) (provider.ExecResult, error) {
		o.snapshots.Add(1)
		var paths []string
		if i := slices.Index(spec.Argv, "--markers"); i >= 0 && i+1 < len(spec.Argv) {
			paths = strings.Split(spec.Argv[i+1], ",")
		}
		out, err := json.Marshal(sb.snapshotLocked(paths))
		return provider.ExecResult{Stdout: out}, err
	}
	var once atomic.Bool
	cancel := func() {
		if once.CompareAndSwap(false, true) {
			close(o.cancelled)
		}
	}
	go func() {
		defer close(o.returned)
		cancelOnStall(ctx, o.stalled, func() int { return stallSeq }, func() []model.Call { return calls }, memDiffer{sb}, cancel)
	}()
	return o
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

// The harness ran the writer: after the stall the owner keeps looking while the writer's file is missing or
// empty, and closes once it holds a line.
func TestCancelOwnerWaitsForTheWritersFirstLine(t *testing.T) {
	sb := newMemSandbox(nil)
	o := startOwner(context.Background(), sb, ranWriter, stalledAfterWriter)
	close(o.stalled)
	o.awaitSnapshots(t, 2, 5*time.Second)
	if isClosed(o.cancelled) {
		t.Fatal("closed while the writer's file was missing")
	}
	sb.write(writerFile, "")
	o.awaitSnapshots(t, 2, 5*time.Second)
	if isClosed(o.cancelled) {
		t.Fatal("closed while the writer's file was empty")
	}
	sb.write(writerFile, "1765000000\n")
	waitFor(t, o.cancelled, 5*time.Second, "close once the writer wrote")
	waitFor(t, o.returned, 5*time.Second, "owner returns")
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
	sb.write(writerFile, "1765000000\n")
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
