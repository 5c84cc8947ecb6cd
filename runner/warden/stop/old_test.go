package stop

import (
	"os/exec"
	"testing"

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
