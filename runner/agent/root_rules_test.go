package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The root confinement of put and get, rule by rule (the host-path
// mutants, docs/mutation.md): a path whose parent resolves, through a
// link, outside the root is refused, and a sibling that merely shares the
// root's name as a prefix is outside it.
func TestResolveStaysUnderTheRoot(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "r")
	for _, d := range []string{filepath.Join(root, "task"), filepath.Join(base, "r2")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"sibling": "../r2", "etc": "/etc", "inside": "task"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	srv := &server{root: filepath.Clean(root)}

	// Positive controls: a path under a real directory, under a link that
	// stays inside, and under a parent that does not exist yet.
	for p, want := range map[string]string{
		"/task/deliverable.txt": filepath.Join(root, "task", "deliverable.txt"),
		"/inside/x":             filepath.Join(root, "inside", "x"),
		"/new/dir/x":            filepath.Join(root, "new", "dir", "x"),
		"/":                     root,
	} {
		if got, err := srv.resolve(p); err != nil || got != want {
			t.Errorf("resolve(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
	for _, p := range []string{"/sibling/x", "/etc/passwd", "task/x"} {
		if got, err := srv.resolve(p); err == nil {
			t.Errorf("resolve(%q) = %q; want it refused (outside the root %s)", p, got, root)
		} else if !strings.Contains(err.Error(), p) {
			t.Errorf("resolve(%q): %v does not quote the path", p, err)
		}
	}
}
