package stop

import (
	"fmt"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/runner/warden/proc"
)

// The fence rules out a process that ran before it was armed, and never one
// started after it, not once its /proc entry has been listed. A process it
// cannot stat is not ruled out.
//
// The fence is rightly void once the real-time clock was set, and some
// hosts set it on their own (a VM's agent correcting the guest's clock).
// A watch of the test's own sees those sets: an attempt during which one
// happened proves nothing either way and is tried again; a fence that is
// void with no set seen fails, naming why it broke.
//
// Both fences are tried: the one that waits for the coarse clock (a host
// with FenceWaitFrom processes or more), which rules out even a process
// whose inode its own listing made, and the one that does not (fewer),
// which rules out a process whose inode was made before it.
func TestBirthFenceRulesOutOnlyOlderProcesses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		waitFrom int
	}{{"waiting", 0}, {"not waiting", 1 << 30}} {
		t.Run(tc.name, func(t *testing.T) { tryFence(t, tc.waitFrom) })
	}
}

func tryFence(t *testing.T, waitFrom int) {
	const attempts = 5
	for i := 1; i <= attempts; i++ {
		set := watchClockSets(t)
		err := fenceAttempt(t, waitFrom)
		if err == nil {
			return
		}
		if set() {
			t.Logf("attempt %d: the real-time clock was set meanwhile, trying again: %v", i, err)
			continue
		}
		t.Fatal(err)
	}
	t.Fatalf("the real-time clock was set during each of %d attempts", attempts)
}

func fenceAttempt(t *testing.T, waitFrom int) error {
	fs := proc.NewFS("")
	start := func() int {
		c := exec.Command("sleep", "1000")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c.Process.Pid
	}
	older := start()
	if waitFrom > 0 {
		// The fence that does not wait rules out what was listed before
		// the coarse clock passed the listing: list, then wait for that.
		if _, err := fs.PIDs(); err != nil {
			t.Fatal(err)
		}
		awaitCoarsePast(t, 2*StepTolerance)
	}
	f := newBirthFence(fs, waitFrom)
	if f == nil {
		t.Fatal("no birth fence on the real /proc (timerfd or the proc root unavailable)")
	}
	defer f.Close()
	// The boundary is at least StepTolerance before the coarse clock read
	// after the fence: what is forked from here on is stamped no earlier
	// than that clock, so it cannot be ruled out. (A boundary taken from
	// the fine-grained clock, or late, fails here, not only by chance
	// below.)
	var after unix.Timespec
	unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &after)
	if f.before.Nano() > after.Nano()-int64(StepTolerance) {
		return fmt.Errorf("boundary %d ns is not StepTolerance before the coarse clock read after the fence (%d ns)", f.before.Nano(), after.Nano())
	}
	younger := start()
	if _, err := fs.PIDs(); err != nil { // the listing that makes its inode
		t.Fatal(err)
	}
	if !f.Valid() {
		return fmt.Errorf("fence invalid before the checks: %s", f.Broken())
	}
	var err error
	switch {
	case !f.Older(older):
		err = fmt.Errorf("process %d, started before the fence, not ruled out", older)
	case f.Older(younger):
		err = fmt.Errorf("process %d, started after the fence, ruled out", younger)
	case f.Older(1 << 30):
		err = fmt.Errorf("a pid with no /proc entry ruled out")
	}
	if !f.Valid() {
		return fmt.Errorf("fence invalid after the checks: %s (checks: %v)", f.Broken(), err)
	}
	return err
}

// awaitCoarsePast waits until the coarse real-time clock is d past the
// fine-grained one's present reading (a few ticks at most).
func awaitCoarsePast(t *testing.T, d time.Duration) {
	var now, c unix.Timespec
	unix.ClockGettime(unix.CLOCK_REALTIME, &now)
	for deadline := time.Now().Add(5 * time.Second); ; {
		unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &c)
		if c.Nano()-now.Nano() > int64(d) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the coarse clock did not pass %v beyond %d ns within 5 s", d, now.Nano())
		}
		time.Sleep(time.Millisecond)
	}
}

// watchClockSets arms a watch of its own (the fence's armClockSetWatch) and
// returns whether a set of the real-time clock has happened since.
func watchClockSets(t *testing.T) func() bool {
	tfd, err := armClockSetWatch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(tfd) })
	return func() bool {
		var buf [8]byte
		_, err := unix.Read(tfd, buf[:])
		return err == unix.ECANCELED
	}
}

// A fence on a fake proc root is nil, and a nil fence proves nothing.
func TestBirthFenceNeedsTheRealProc(t *testing.T) {
	f := NewBirthFence(proc.NewFS(t.TempDir()))
	if f != nil {
		t.Fatal("fence on a fake root")
	}
	if f.Valid() {
		t.Fatal("a nil fence is valid")
	}
}
