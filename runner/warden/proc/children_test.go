package proc

import (
	"errors"
	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// The kernel lists a child we started under whichever of our threads
// forked it; Children reads them all.
func TestChildrenListsAChildOfThisProcess(t *testing.T) {
	fs := NewFS("")
	if _, err := fs.Children(os.Getpid()); errors.Is(err, ErrNoChildrenList) {
		testenv.Missing(t, "a kernel with CONFIG_PROC_CHILDREN (/proc/PID/task/TID/children)", "run the tests on a kernel built with it (Debian's is)")
	}
	cmd := exec.Command("sleep", "100")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	kids, err := fs.Children(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(kids, cmd.Process.Pid) {
		t.Fatalf("children %v lack the sleep %d", kids, cmd.Process.Pid)
	}
}

// A fake root: an entry without task/ has no children lists; a missing
// entry is gone; a task's children file is parsed.
func TestChildrenOnAFakeRoot(t *testing.T) {
	root := t.TempDir()
	fs := NewFS(root)
	if _, err := fs.Children(7); !errors.Is(err, ErrGone) {
		t.Fatalf("missing entry: %v, want ErrGone", err)
	}
	os.MkdirAll(filepath.Join(root, "8"), 0o755)
	if _, err := fs.Children(8); !errors.Is(err, ErrNoChildrenList) {
		t.Fatalf("entry without task/: %v, want ErrNoChildrenList", err)
	}
	for tid, data := range map[string]string{"9": "10 11 ", "12": "13 x 0 "} {
		dir := filepath.Join(root, "9", "task", tid)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "children"), []byte(data), 0o444)
	}
	kids, err := fs.Children(9)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(kids)
	if !slices.Equal(kids, []int{10, 11, 13}) {
		t.Fatalf("children %v, want [10 11 13]", kids)
	}
}
