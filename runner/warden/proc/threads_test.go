package proc_test

import (
	"strconv"
	"testing"

	"github.com/sandproof/sandproof/fakeproc"
)

// A leader that called pthread_exit shows Z while its other thread runs:
// the process is alive, held only once that thread shows T, and dead once
// the threads are gone. A plain zombie beside it is the control.
func TestZombieLeaderWithALiveThread(t *testing.T) {
	k := fakeproc.New(t, fakeproc.Options{})
	fs := k.FS()
	beat := k.Spawn(fakeproc.Proc{Comm: "beat", Threads: 1, Zombie: true})
	plain := k.Spawn(fakeproc.Proc{Comm: "plain", Zombie: true})
	k.Exit(plain.PID)
	k.ExitLeader(beat.PID)

	st, err := fs.Stat(beat.PID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != 'Z' || st.Threads != 2 || st.Dead() || !st.ZombieLeader() {
		t.Fatalf("zombie leader with a live thread: %+v, Dead %v; want Z, 2 threads, alive", st, st.Dead())
	}
	if fs.Held(st) {
		t.Error("Held before its thread was stopped")
	}
	k.SetState(beat.PID, 'T')
	if st, _ = fs.Stat(beat.PID); st.State != 'Z' || !fs.Held(st) {
		t.Errorf("after the group stop: %+v, Held %v; want the leader's letter Z and held", st, fs.Held(st))
	}
	ctl, err := fs.Stat(plain.PID)
	if err != nil || ctl.State != 'Z' || ctl.Threads != 1 || !ctl.Dead() {
		t.Errorf("plain zombie: %+v, %v; want Z, 1 thread, dead", ctl, err)
	}
	if ctl.Stopped() || fs.Held(ctl) {
		t.Errorf("a plain zombie reads as held")
	}
}

// A Z line whose num_threads does not parse is resolved from the task
// directory: a live thread there makes the process alive.
func TestZombieLeaderThreadsFromTheTaskDir(t *testing.T) {
	k := fakeproc.New(t, fakeproc.Options{})
	line := func(pid int, state string) string {
		return strconv.Itoa(pid) + " (beat) " + state + " 1 900 900 0 -1 4194368 0 0 0 0 0 0 0 0 20 0 ? 0 5000 0 0\n"
	}
	k.RawEntry("900", map[string]string{"stat": line(900, "Z")})
	k.RawEntry("900/task/901", map[string]string{"stat": line(901, "S")})
	k.RawEntry("910", map[string]string{"stat": line(910, "Z")})
	k.RawEntry("910/task/910", map[string]string{"stat": line(910, "Z")})
	st, err := k.FS().Stat(900)
	if err != nil || st.Threads != 2 || st.Dead() {
		t.Errorf("Z leader with thread 901 running: %+v, %v; want 2 threads, alive", st, err)
	}
	st, err = k.FS().Stat(910)
	if err != nil || st.Threads != 1 || !st.Dead() {
		t.Errorf("Z leader alone: %+v, %v; want 1 thread, dead", st, err)
	}
}
