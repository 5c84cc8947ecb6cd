package probe

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// fakeProc builds a proc dir by hand: pid -> stat line, uid.
type fakeProc struct {
	t    *testing.T
	root string
}

func newFakeProc(t *testing.T) fakeProc {
	return fakeProc{t, t.TempDir()}
}

func (f fakeProc) add(pid, ppid int, comm, state string, start uint64, uid int) {
	f.t.Helper()
	dir := filepath.Join(f.root, fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	stat := fmt.Sprintf("%d (%s) %s %d %d %d 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 1000 10 18446744073709551615\n",
		pid, comm, state, ppid, pid, pid, start)
	status := fmt.Sprintf("Name:\t%s\nState:\t%s\nPid:\t%d\nPPid:\t%d\nUid:\t%d\t%d\t%d\t%d\n", comm, state, pid, ppid, uid, uid+1, uid, uid)
	f.write(filepath.Join(dir, "stat"), stat)
	f.write(filepath.Join(dir, "status"), status)
}

func (f fakeProc) write(path, s string) {
	f.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func TestReadProcessesFakeProc(t *testing.T) {
	fp := newFakeProc(t)
	fp.add(1, 0, "sleep", "S", 100, 0)
	fp.add(42, 1, "tool (x) y", "S", 5000, 1000)
	fp.add(43, 1, "sleep", "Z", 5001, 1000)
	// Entries a real /proc has that are not processes, and a process that
	// vanished between readdir and open (its dir is there, stat is not).
	fp.write(filepath.Join(fp.root, "net", "dev"), "x")
	fp.write(filepath.Join(fp.root, "uptime"), "1 1")
	if err := os.MkdirAll(filepath.Join(fp.root, "77"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A process whose status is gone keeps uid -1 rather than vanishing.
	fp.add(50, 42, "halfgone", "R", 6000, 0)
	if err := os.Remove(filepath.Join(fp.root, "50", "status")); err != nil {
		t.Fatal(err)
	}

	got, err := ReadProcesses(fp.root)
	if err != nil {
		t.Fatalf("ReadProcesses: %v", err)
	}
	want := []Process{
		{PID: 1, StartTime: 100, PPID: 0, UID: 0, Comm: "sleep", State: "S", Threads: 1},
		{PID: 42, StartTime: 5000, PPID: 1, UID: 1000, Comm: "tool (x) y", State: "S", Threads: 1},
		{PID: 43, StartTime: 5001, PPID: 1, UID: 1000, Comm: "sleep", State: "Z", Threads: 1},
		{PID: 50, StartTime: 6000, PPID: 42, UID: -1, Comm: "halfgone", State: "R", Threads: 1},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ReadProcesses =\n %+v\nwant\n %+v", got, want)
	}
}

func find(ps []Process, pid int) (Process, bool) {
	for _, p := range ps {
		if p.PID == pid {
			return p, true
		}
	}
	return Process{}, false
}

func TestDiffRealProcessTable(t *testing.T) {
	ctx := context.Background()
	before, err := Take(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sleep: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	if _, ok := find(before.Processes, pid); ok {
		t.Fatalf("pid %d in the baseline before it was started", pid)
	}
	during, err := Take(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Other work on the machine may start processes too, so look for ours
	// rather than counting.
	r := Diff(before, during)
	if _, ok := find(r.NewProcesses, pid); !ok || r.Clean {
		t.Fatalf("Diff after starting pid %d: new=%+v clean=%v; want it listed and not clean", pid, r.NewProcesses, r.Clean)
	}
	if _, ok := find(r.NewProcesses, during.Self.PID); ok {
		t.Errorf("Diff lists the probe itself (pid %d) as new", during.Self.PID)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	after, err := Take(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := find(Diff(before, after).NewProcesses, pid); ok {
		t.Errorf("pid %d still new after it was killed and reaped", pid)
	}
}

// A tool whose main thread called pthread_exit: its leader shows Z while
// its second thread writes on (num_threads 2). The probe must list it as a
// new process, which fails verify.no_new_processes, not as a new zombie
// beside a plain one (num_threads 1).
func TestDiffZombieLeaderWithALiveThreadIsNew(t *testing.T) {
	fp := newFakeProc(t)
	fp.add(1, 0, "sleep", "S", 100, 0)
	before, err := ReadProcesses(fp.root)
	if err != nil {
		t.Fatal(err)
	}
	fp.write(filepath.Join(fp.root, "60", "stat"), "60 (zombielead) Z 1 60 60 0 -1 4194368 0 0 0 0 0 0 0 0 20 0 2 0 7000 0 0 18446744073709551615\n")
	fp.write(filepath.Join(fp.root, "61", "stat"), "61 (sleep) Z 1 61 61 0 -1 4194368 0 0 0 0 0 0 0 0 20 0 1 0 7001 0 0 18446744073709551615\n")
	after, err := ReadProcesses(fp.root)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := find(after, 60); !ok || p.State != "Z" || p.Threads != 2 {
		t.Fatalf("ReadProcesses: pid 60 = %+v, %v; want state Z with 2 threads", p, ok)
	}
	r := Diff(Snapshot{Processes: before}, Snapshot{Processes: after})
	if _, ok := find(r.NewProcesses, 60); !ok || r.Clean {
		t.Errorf("Diff: new processes %+v, clean %v; want the zombie leader with a live thread listed and the report not clean", r.NewProcesses, r.Clean)
	}
	if _, ok := find(r.NewZombies, 60); ok {
		t.Errorf("Diff: the zombie leader with a live thread is under new zombies %+v", r.NewZombies)
	}
	if _, ok := find(r.NewZombies, 61); !ok {
		t.Errorf("Diff: new zombies %+v; want the plain zombie 61 (the control)", r.NewZombies)
	}
}
