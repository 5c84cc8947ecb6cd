package probe

import (
	"reflect"
	"testing"

	"github.com/sandproof/sandproof/runner/witness"
)

func baseline() Snapshot {
	return Snapshot{
		Schema: Schema, OS: "debian-12",
		Python3: Tool{}, Bash: Tool{Path: "/usr/bin/bash", Resolved: "/usr/bin/bash", Version: "GNU bash, version 5.2.15", SHA256: "aa"},
		Markers: []Marker{{Path: "/root/.config/m", SHA256: "11", Size: 2}, {Path: "/root/.cache/m", SHA256: "22", Size: 2}},
		Self:    witness.ID{PID: 50, StartTime: 900},
		Processes: []Process{
			{PID: 1, StartTime: 10, Comm: "sleep", State: "S"},
			{PID: 20, StartTime: 300, PPID: 1, Comm: "sshd", State: "S"},
			{PID: 50, StartTime: 900, PPID: 0, Comm: "probe", State: "R"},
		},
	}
}

func TestDiffUnchanged(t *testing.T) {
	b := baseline()
	a := baseline()
	a.Self = witness.ID{PID: 77, StartTime: 2000}
	a.Processes = []Process{b.Processes[0], b.Processes[1], {PID: 77, StartTime: 2000, Comm: "probe", State: "R"}}
	r := Diff(b, a)
	if !r.Clean || len(r.NewProcesses) != 0 || len(r.Gone) != 0 || len(r.Changes) != 0 {
		t.Errorf("Diff of equal snapshots = %+v, want clean and empty", r)
	}
}

func TestDiffProcesses(t *testing.T) {
	b := baseline()
	a := baseline()
	a.Self = witness.ID{PID: 77, StartTime: 2000}
	a.Processes = []Process{
		b.Processes[0],
		{PID: 20, StartTime: 1500, PPID: 1, Comm: "sleep", State: "S"}, // pid 20 reused
		{PID: 31, StartTime: 1600, PPID: 1, Comm: "node", State: "S"},
		{PID: 32, StartTime: 1601, PPID: 1, Comm: "bash", State: "Z"},
		{PID: 77, StartTime: 2000, Comm: "probe", State: "R"},
	}
	r := Diff(b, a)
	wantNew := []Process{a.Processes[1], a.Processes[2]}
	if !reflect.DeepEqual(r.NewProcesses, wantNew) {
		t.Errorf("new = %+v, want %+v", r.NewProcesses, wantNew)
	}
	if !reflect.DeepEqual(r.NewZombies, []Process{a.Processes[3]}) {
		t.Errorf("zombies = %+v, want pid 32", r.NewZombies)
	}
	if !reflect.DeepEqual(r.Gone, []Process{b.Processes[1]}) {
		t.Errorf("gone = %+v, want the old pid 20", r.Gone)
	}
	if r.Clean {
		t.Error("Clean with new live processes")
	}
}

func TestDiffZombiesAloneAreClean(t *testing.T) {
	b := baseline()
	a := baseline()
	a.Processes = append(a.Processes, Process{PID: 90, StartTime: 3000, PPID: 1, Comm: "sleep", State: "Z"})
	if r := Diff(b, a); !r.Clean || len(r.NewZombies) != 1 {
		t.Errorf("Diff with one new zombie = %+v, want clean with the zombie listed", r)
	}
}

func TestDiffChanges(t *testing.T) {
	b := baseline()
	a := baseline()
	a.OS = "debian-13"
	a.Python3 = Tool{Path: "/usr/local/bin/python3", Resolved: "/usr/local/bin/python3", Version: "Python 3.12", SHA256: "cc"}
	a.Bash.SHA256 = "bb"
	a.Markers = []Marker{{Path: "/root/.config/m", SHA256: "12", Size: 3}, {Path: "/root/.cache/m", Missing: true}}
	r := Diff(b, a)
	want := []Change{
		{What: "os", Before: "debian-12", After: "debian-13"},
		{What: "python3", Before: "none", After: "/usr/local/bin/python3 (Python 3.12)"},
		{What: "bash", Path: "/usr/bin/bash", Before: "sha256=aa", After: "sha256=bb"},
		{What: "marker", Path: "/root/.config/m", Before: "sha256=11 size=2", After: "sha256=12 size=3"},
		{What: "marker", Path: "/root/.cache/m", Before: "sha256=22 size=2", After: "missing"},
	}
	if !reflect.DeepEqual(r.Changes, want) {
		t.Errorf("changes =\n %+v\nwant\n %+v", r.Changes, want)
	}
	if r.Clean {
		t.Error("Clean with changes")
	}
}

func TestDiffMarkerSets(t *testing.T) {
	b := baseline()
	a := baseline()
	a.Markers = []Marker{b.Markers[0], {Path: "/tmp/new", SHA256: "33", Size: 1}}
	r := Diff(b, a)
	want := []Change{
		{What: "marker_set", Path: "/root/.cache/m", Before: "sha256=22 size=2", After: "not checked"},
		{What: "marker_set", Path: "/tmp/new", Before: "not checked", After: "sha256=33 size=1"},
	}
	if !reflect.DeepEqual(r.Changes, want) {
		t.Errorf("changes = %+v, want %+v", r.Changes, want)
	}
}

// TestDiffBaselineSelfIsNew: certify's setup probe becomes the session
// agent (the same pid and start time, another comm). An agent still alive
// at verify is a new process, never a baseline one.
func TestDiffBaselineSelfIsNew(t *testing.T) {
	b := baseline()
	a := baseline()
	a.Self = witness.ID{PID: 77, StartTime: 2000}
	agent := Process{PID: 50, StartTime: 900, PPID: 0, Comm: "sandagent", State: "S"}
	a.Processes = []Process{b.Processes[0], b.Processes[1], agent, {PID: 77, StartTime: 2000, Comm: "probe", State: "R"}}
	r := Diff(b, a)
	if r.Clean || !reflect.DeepEqual(r.NewProcesses, []Process{agent}) {
		t.Errorf("Diff with the baseline's probe still alive as the agent = %+v, want it the one new process", r)
	}
	a.Processes = []Process{b.Processes[0], b.Processes[1], {PID: 77, StartTime: 2000, Comm: "probe", State: "R"}}
	if r := Diff(b, a); !r.Clean || len(r.Gone) != 0 {
		t.Errorf("Diff with the agent gone = %+v, want clean, the baseline's self not gone", r)
	}
}
