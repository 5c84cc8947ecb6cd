package probe

import (
	"testing"

	"github.com/sandproof/sandproof/runner/witness"
)

// The probe's verdict rules one by one, each with its positive control
// (the host-path mutants, docs/mutation.md).

// after returns a later snapshot of baseline() with the probe at a new pid
// and the extra processes added.
func after(extra ...Process) Snapshot {
	a := baseline()
	a.Self = witness.ID{PID: 77, StartTime: 2000}
	a.Processes = append([]Process{a.Processes[0], a.Processes[1], {PID: 77, StartTime: 2000, Comm: "probe", State: "R"}}, extra...)
	return a
}

// Every state but Z and X is alive: a process left stopped (T, what
// warden's own hold leaves; t, a traced stop) or in disk sleep is new.
func TestDiffLiveStatesAreNew(t *testing.T) {
	if r := Diff(baseline(), after()); !r.Clean {
		t.Fatalf("positive control: the unchanged table is not clean: %+v", r)
	}
	for _, state := range []string{"R", "S", "D", "T", "t", "I"} {
		p := Process{PID: 300, StartTime: 3000, PPID: 1, Comm: "held", State: state}
		r := Diff(baseline(), after(p))
		if len(r.NewProcesses) != 1 || r.NewProcesses[0].PID != 300 || len(r.NewZombies) != 0 || r.Clean {
			t.Errorf("state %s: new %+v, zombies %+v, clean %t; want it new and the report unclean", state, r.NewProcesses, r.NewZombies, r.Clean)
		}
	}
	for _, state := range []string{"Z", "X"} {
		p := Process{PID: 300, StartTime: 3000, PPID: 1, Comm: "dead", State: state}
		r := Diff(baseline(), after(p))
		if len(r.NewProcesses) != 0 || len(r.NewZombies) != 1 || !r.Clean {
			t.Errorf("state %s: new %+v, zombies %+v, clean %t; want it dead (a zombie) and the report clean", state, r.NewProcesses, r.NewZombies, r.Clean)
		}
	}
}

// The probe leaves itself out by (pid, start time): another process that
// holds the later probe's pid (a different start time) is new.
func TestDiffSelfByIdentity(t *testing.T) {
	a := after()
	a.Processes = append(a.Processes[:2], Process{PID: 77, StartTime: 1999, Comm: "sh", State: "S"},
		Process{PID: 78, StartTime: 2000, Comm: "probe", State: "R"})
	r := Diff(baseline(), a)
	if len(r.NewProcesses) != 2 {
		t.Fatalf("new %+v: want the sh at the probe's pid and the unrelated pid 78", r.NewProcesses)
	}
	a.Self = witness.ID{PID: 78, StartTime: 2000}
	if r := Diff(baseline(), a); len(r.NewProcesses) != 1 || r.NewProcesses[0].Comm != "sh" {
		t.Fatalf("positive control: with the probe at 78, new %+v, want the sh only", r.NewProcesses)
	}
}

// A change alone makes the report unclean; a tool swapped under the same
// path and version is a change; a marker rewritten with the same size is
// a change.
func TestDiffChangesAreUnclean(t *testing.T) {
	a := after()
	a.Bash.SHA256 = "ab"
	r := Diff(baseline(), a)
	if len(r.Changes) != 1 || r.Changes[0].What != "bash" || r.Clean {
		t.Fatalf("bash with a new sha256: changes %+v clean %t, want one bash change and unclean", r.Changes, r.Clean)
	}
	a = after()
	a.Markers[0].SHA256 = "99" // same size, new content
	r = Diff(baseline(), a)
	if len(r.Changes) != 1 || r.Changes[0].What != "marker" || r.Clean {
		t.Fatalf("a marker rewritten at the same size: changes %+v clean %t, want one marker change and unclean", r.Changes, r.Clean)
	}
}

// ReadProcesses reports each process's state as its stat says.
func TestReadProcessesKeepsStates(t *testing.T) {
	f := newFakeProc(t)
	f.add(1, 0, "init", "S", 10, 0)
	f.add(2, 1, "held", "T", 20, 1000)
	f.add(3, 1, "gone", "Z", 30, 1000)
	ps, err := ReadProcesses(f.root)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]string{}
	for _, p := range ps {
		got[p.PID] = p.State
	}
	if got[1] != "S" || got[2] != "T" || got[3] != "Z" {
		t.Fatalf("states %v, want 1:S 2:T 3:Z", got)
	}
}
