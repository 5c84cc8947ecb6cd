package agent_test

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandproof/sandproof/runner/host/agenthost"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// putWorld is an agent root with a real task dir and links planted where
// a harness would: out of the root (absolute and relative) and one that
// stays under it, plus the directory outside they lead to.
type putWorld struct {
	h        *agenthost.Host
	root     string // the agent's --root
	base     string // root as the sandbox names it ("" when root is it)
	dir, out string // the tree's top inside the root, and outside it
}

func newPutWorld(t *testing.T, agentRoot bool) putWorld {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir()) // no link of the host's above it
	if err != nil {
		t.Fatal(err)
	}
	w := putWorld{dir: filepath.Join(base, "r"), out: filepath.Join(base, "out")}
	for _, d := range []string{filepath.Join(w.dir, "task"), w.out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"lnk": w.out, "rel": "../out", "inside": "task", "task/deep": w.out} {
		if err := os.Symlink(target, filepath.Join(w.dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if agentRoot {
		// The agent's root is the tree: sandbox paths start at it.
		w.h, w.root = inProcessAt(t, w.dir)
	} else {
		// The agent's root is /, as in a container.
		w.h, w.root = inProcessAt(t, "/")
		w.base = w.dir
	}
	return w
}

// p is the sandbox path of rel (relative to the tree's top).
func (w putWorld) p(rel string) string { return path.Join("/", w.base, rel) }

// The agent's put follows no link at any component of an entry's path,
// one that stays under its root included (in a container the root is /,
// so "under the root" is every link), and makes a missing parent relative
// to its parent's descriptor: `put lnk/newdir/file` with lnk a link out
// of the root creates nothing outside it. On main both were followed: the
// parent's check ran only when the parent existed, and not at all with
// the root at /.
func TestPutFollowsNoLink(t *testing.T) {
	for _, agentRoot := range []bool{true, false} {
		name := "root is the tree"
		if !agentRoot {
			name = "root is /"
		}
		t.Run(name, func(t *testing.T) {
			w := newPutWorld(t, agentRoot)
			ctx := context.Background()
			// Positive controls: by name, each link leads where it says.
			for link, want := range map[string]string{"lnk": w.out, "rel": w.out, "inside": filepath.Join(w.dir, "task"), "task/deep": w.out} {
				if got, err := filepath.EvalSymlinks(filepath.Join(w.dir, link)); err != nil || got != want {
					t.Fatalf("positive control: %s resolves to %q (%v), want %q", link, got, err, want)
				}
			}
			// Positive controls: a file in a real dir, under missing
			// parents, and a directory, with their modes and owners.
			err := w.h.Put(ctx, []provider.Entry{
				{Path: w.p("task/deliverable.txt"), Data: []byte("ok"), Mode: 0o640, UID: 1000, GID: 1000},
				{Path: w.p("new/dir/x"), Data: []byte("x"), Mode: 0o644},
				{Path: w.p("task/sub"), Dir: true, Mode: 0o700, UID: 1000, GID: 1000},
			})
			if err != nil {
				t.Fatalf("positive control: put under real dirs: %v", err)
			}
			for p, want := range map[string]struct {
				mode os.FileMode
				uid  uint32
			}{"task/deliverable.txt": {0o640, 1000}, "new": {0o755 | os.ModeDir, 0}, "new/dir": {0o755 | os.ModeDir, 0}, "task/sub": {0o700 | os.ModeDir, 1000}} {
				fi, err := os.Lstat(filepath.Join(w.dir, p))
				if err != nil || fi.Mode() != want.mode || fi.Sys().(*syscall.Stat_t).Uid != want.uid {
					t.Errorf("positive control: %s is %v (%v), want mode %v uid %d", p, fi.Mode(), err, want.mode, want.uid)
				}
			}

			for _, rel := range []string{"lnk/newdir/file", "lnk/file", "rel/newdir/file", "inside/x", "inside/newdir/x", "task/deep/x"} {
				for _, dir := range []bool{false, true} {
					e := provider.Entry{Path: w.p(rel), Data: []byte("through the link"), Mode: 0o644, Dir: dir}
					if err := w.h.Put(ctx, []provider.Entry{e}); err == nil {
						t.Errorf("put %s (dir %t) through a link: no error", rel, dir)
					} else if !strings.Contains(err.Error(), "link") {
						t.Errorf("put %s (dir %t): %v does not say it met a link", rel, dir, err)
					}
				}
			}
			for _, p := range []string{filepath.Join(w.out, "newdir"), filepath.Join(w.out, "file"), filepath.Join(w.out, "x"),
				filepath.Join(w.dir, "task", "x"), filepath.Join(w.dir, "task", "newdir")} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("put through a link made %s", p)
				}
			}
		})
	}
}
