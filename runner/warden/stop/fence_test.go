package stop

import (
	"os/exec"
	"testing"

	"github.com/sandproof/sandproof/runner/warden/proc"
)

// The fence rules out a process that ran before it was armed, and never one
// started after it, not once its /proc entry has been listed. A process it
// cannot stat is not ruled out.
func TestBirthFenceRulesOutOnlyOlderProcesses(t *testing.T) {
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
	f := NewBirthFence(fs)
	if f == nil {
		t.Fatal("no birth fence on the real /proc (timerfd or the proc root unavailable)")
	}
	defer f.Close()
	younger := start()
	if _, err := fs.PIDs(); err != nil { // the listing that makes its inode
		t.Fatal(err)
	}
	if !f.Valid() {
		t.Fatal("fence invalid with no clock set")
	}
	if !f.Older(older) {
		t.Fatalf("process %d, started before the fence, not ruled out", older)
	}
	if f.Older(younger) {
		t.Fatalf("process %d, started after the fence, ruled out", younger)
	}
	if f.Older(1 << 30) {
		t.Fatal("a pid with no /proc entry ruled out")
	}
	if !f.Valid() {
		t.Fatal("fence invalid after the checks")
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
