package stop

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sandproof/sandproof/runner/warden/proc"
)

// A child the supervisor's list names but whose stat is gone (it exited and
// was reaped in between) may have handed its own child to the list already
// read: the reading must say the tree moved, and list what it did read.
func TestWalkReportsAChildGoneBeforeItsStat(t *testing.T) {
	root := t.TempDir()
	write := procWriter(t, root)
	stat := func(pid, ppid, state string) string { return statLine(pid, "hop", state, ppid) }
	write("100/task/100/children", "200 300 ")
	write("300/stat", stat("300", "100", "Z"))
	s := &Scanner{FS: proc.NewFS(root), Launch: Launch{Self: 100}}

	got, err := s.Walk(nil)
	if !errors.Is(err, ErrMoved) {
		t.Fatalf("Walk: %v, want ErrMoved (200 is listed and gone)", err)
	}
	if len(got) != 1 || got[0].PID != 300 || got[0].State != "Z" {
		t.Fatalf("Walk read %+v, want the zombie 300", got)
	}

	write("200/stat", stat("200", "100", "Z"))
	if got, err = s.Walk(nil); err != nil || len(got) != 2 {
		t.Fatalf("Walk with both listed children readable: %+v, %v", got, err)
	}
}

// A listed child whose stat names a parent outside the tree was reaped and
// its pid reused between the list and the stat: the newcomer is not taken
// for a descendant, and the reading says the tree moved. A grandchild
// handed to the supervisor, or to a subreaper of the tree, after its
// parent's list was read is still taken in.
func TestWalkRefusesAPidReusedOutsideTheTree(t *testing.T) {
	root := t.TempDir()
	write := procWriter(t, root)
	stat := func(pid, ppid string) string { return statLine(pid, "x", "S", ppid) }
	// 100 is the supervisor; 200 the harness; 200's list names 300 (now an
	// outsider, parent 1), 400 (handed to the supervisor after its own
	// parent exited) and 500 (a child of 200, the lister); 400's list names 600, whose parent is the harness 200 (a subreaper
	// of the tree that took it in after 400's list was read).
	write("100/task/100/children", "200 ")
	write("200/stat", stat("200", "100"))
	write("200/task/200/children", "300 400 500 ")
	write("300/stat", stat("300", "1"))
	write("400/stat", stat("400", "100"))
	write("400/task/400/children", "600 ")
	write("500/stat", stat("500", "200"))
	write("600/stat", stat("600", "200"))
	write("300/task/300/children", "")
	write("500/task/500/children", "")
	write("600/task/600/children", "")
	s := &Scanner{FS: proc.NewFS(root), Launch: Launch{Self: 100}}

	got, err := s.Walk(nil)
	if !errors.Is(err, ErrMoved) {
		t.Fatalf("Walk: %v, want ErrMoved (300's stat names parent 1)", err)
	}
	var pids []int
	for _, n := range got {
		pids = append(pids, n.PID)
	}
	if want := []int{200, 400, 500, 600}; !slices.Equal(pids, want) {
		t.Fatalf("Walk took in %v, want %v (not the outsider 300)", pids, want)
	}

	// The same outsider, read by the scan before the list (a known stat):
	// read again, and still refused.
	known := map[int]proc.Stat{}
	for _, pid := range []int{200, 300} {
		st, err := s.FS.Stat(pid)
		if err != nil {
			t.Fatal(err)
		}
		known[pid] = st
	}
	nodes, err := s.walk(100, nil, nil, known, true)
	if err != nil || s.vanished != 1 {
		t.Fatalf("walk with known stats: err %v, vanished %d, want 1", err, s.vanished)
	}
	for _, n := range nodes {
		if n.PID == 300 {
			t.Fatalf("walk with known stats took in the outsider 300: %+v", n)
		}
	}
}

// procWriter returns a function writing a file of a fake proc root at
// root, its directories made as needed.
func procWriter(t *testing.T, root string) func(rel, data string) {
	return func(rel, data string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o444); err != nil {
			t.Fatal(err)
		}
	}
}

// statLine is a /proc/PID/stat line with the given name, state and parent.
func statLine(pid, comm, state, ppid string) string {
	return pid + " (" + comm + ") " + state + " " + ppid + " 1 1 0 -1 4194304 97 0 0 0 1 2 0 0 20 0 1 0 5000 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
}
