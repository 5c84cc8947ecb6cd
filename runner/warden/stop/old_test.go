package stop

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/warden/proc"
)

// An old process is pinned and reported live until it exits; then it is
// forgotten (its pid may be reused); a young one is never pinned.
func TestOldSetPinsOldProcessesUntilTheyExit(t *testing.T) {
	if !PidfdSupported() {
		testenv.Missing(t, "pidfd_open in this kernel (Linux 5.3 or later)", "it cannot be installed: run the tests on a newer kernel")
	}
	old := exec.Command("sleep", "1000")
	young := exec.Command("sleep", "1000")
	for _, c := range []*exec.Cmd{old, young} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}
	fs := proc.NewFS("")
	so, err := fs.Stat(old.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	sy, err := fs.Stat(young.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// "since" right after the old one: the young one (same tick or later)
	// must count as young.
	set := NewOldSet(so.StartTime+1, 100)
	defer set.Close()
	sy.StartTime = so.StartTime + 1
	set.Prime([]proc.Stat{so, sy})
	live := set.Live()
	if !live[so.PID] {
		t.Fatalf("old process %d not pinned: %v", so.PID, live)
	}
	if live[sy.PID] {
		t.Fatalf("young process %d pinned", sy.PID)
	}
	old.Process.Kill()
	old.Wait()
	if set.Live()[so.PID] {
		t.Fatalf("exited process %d still reported live", so.PID)
	}
}

// The background prime pins the processes that started before the launch
// (pidfd first, then one stat read) and none that started at or after it.
func TestStartPrimingPinsOnlyOlderProcesses(t *testing.T) {
	if !PidfdSupported() {
		testenv.Missing(t, "pidfd_open in this kernel (Linux 5.3 or later)", "it cannot be installed: run the tests on a newer kernel")
	}
	fs := proc.NewFS("")
	start := func() proc.Stat {
		c := exec.Command("sleep", "1000")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		st, err := fs.Stat(c.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	so := start()
	// The scenario needs two clock ticks between the two (10 ms each).
	time.Sleep(30 * time.Millisecond)
	sy := start()
	if so.StartTime >= sy.StartTime {
		t.Fatalf("start times %d and %d: the young process must start a tick later", so.StartTime, sy.StartTime)
	}
	set := NewOldSet(sy.StartTime, 1<<16)
	defer set.Close()
	set.StartPriming(fs)
	select {
	case <-set.Primed():
	case <-time.After(30 * time.Second):
		t.Fatal("the prime did not finish in 30 s")
	}
	live := set.Live()
	if !live[so.PID] {
		t.Fatalf("old process %d not pinned (%d pinned)", so.PID, len(live))
	}
	if live[sy.PID] {
		t.Fatalf("young process %d pinned", sy.PID)
	}
	if !live[os.Getpid()] {
		t.Fatalf("this test process (started before both) not pinned")
	}
}
