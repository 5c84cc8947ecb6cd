package stop

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandproof/sandproof/runner/warden/proc"
)

// A child the supervisor's list names but whose stat is gone (it exited and
// was reaped in between) may have handed its own child to the list already
// read: the reading must say the tree moved, and list what it did read.
func TestWalkReportsAChildGoneBeforeItsStat(t *testing.T) {
	root := t.TempDir()
	write := func(rel, data string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o444); err != nil {
			t.Fatal(err)
		}
	}
	stat := func(pid, ppid string, state string) string {
		return pid + " (hop) " + state + " " + ppid + " 1 1 0 -1 4194304 97 0 0 0 1 2 0 0 20 0 1 0 5000 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	}
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
