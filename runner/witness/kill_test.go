package witness

import (
	"syscall"
	"testing"
	"time"
)

func waitGone(t *testing.T, id ID) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if alive, err := Proc.Alive(id); err == nil && !alive {
			return
		}
	}
	t.Fatalf("%v still runs: %s", id, Proc.State(id))
}

func TestKill(t *testing.T) {
	cmd := startSleeper(t)
	st, err := Proc.ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	id := st.ID()
	// The same pid with another start time names a process that no longer
	// exists: it must not be signalled.
	if err := Kill(ID{id.PID, id.StartTime + 1}, syscall.SIGKILL); err != nil {
		t.Fatalf("Kill of a stale identity: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if alive, err := Proc.Alive(id); !alive || err != nil {
		t.Fatalf("positive control: %v should still run after a stale kill: %v, %v", id, alive, err)
	}
	if err := Kill(id, syscall.SIGKILL); err != nil {
		t.Fatalf("Kill(%v): %v", id, err)
	}
	waitGone(t, id)
	// A gone process (here a zombie: the test reaps it at cleanup) is not
	// an error, through either path.
	if err := Kill(id, syscall.SIGKILL); err != nil {
		t.Errorf("Kill of a gone process: %v", err)
	}
	if err := killPlain(id, syscall.SIGKILL); err != nil {
		t.Errorf("killPlain of a gone process: %v", err)
	}
}

func TestKillPlain(t *testing.T) {
	cmd := startSleeper(t)
	st, err := Proc.ReadStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := killPlain(ID{st.PID, st.StartTime + 1}, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if alive, err := Proc.Alive(st.ID()); !alive || err != nil {
		t.Fatalf("positive control: %v should still run after a stale kill: %v, %v", st.ID(), alive, err)
	}
	if err := killPlain(st.ID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, st.ID())
}
