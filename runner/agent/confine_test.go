package agent_test

import (
	"bytes"
	"context"
	"github.com/sandproof/sandproof/runner/agent"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/provider"
)

const secret = "SECRET-outside-the-root"

// outside makes a tree outside the agent's root that mirrors a/b/c/file
// (and a/b/c/sub/file) with the secret in every file, and returns its
// directory.
func outside(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []string{"a/b/c/file", "a/b/c/sub/file"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(secret), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// inside makes root/a/b/c/file and root/a/b/c/sub/file, honest content.
func inside(t *testing.T, root string) {
	t.Helper()
	os.RemoveAll(filepath.Join(root, "a"))
	for _, p := range []string{"a/b/c/file", "a/b/c/sub/file"} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(root, p), []byte("inside"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// holds reports the host files under dir holding the secret.
func holds(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(secret)) {
				out = append(out, p)
			}
		}
		return nil
	})
	return out
}

func withheldAt(got provider.Fetched, p, kind string) bool {
	return slices.ContainsFunc(got.Withheld, func(w provider.Withheld) bool { return w.Path == p && w.Kind == kind })
}

// bothResolvers runs f with openat2 and with the component walk.
func bothResolvers(t *testing.T, f func(t *testing.T)) {
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) {
			was := (*agent.Openat2Missing).Load()
			(*agent.Openat2Missing).Store(walk)
			t.Cleanup(func() { (*agent.Openat2Missing).Store(was) })
			f(t)
		})
	}
}

// A link at any component of a get's path (absolute or relative, one that
// climbs with ".." included) is recorded at its own path, never followed:
// no byte of what it leads to reaches the host. Today's agent checked the
// last component only.
func TestGetFollowsNoLinkAtAnyComponent(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		h, root := inProcess(t)
		out := outside(t)
		ctx := context.Background()
		for _, comp := range []string{"a", "a/b", "a/b/c"} {
			for _, kind := range []string{"absolute", "relative"} {
				t.Run(strings.ReplaceAll(comp, "/", "_")+"_"+kind, func(t *testing.T) {
					inside(t, root)
					at := filepath.Join(root, comp)
					os.RemoveAll(at)
					target := filepath.Join(out, comp)
					if kind == "relative" {
						rel, err := filepath.Rel(filepath.Dir(at), target)
						if err != nil || !strings.HasPrefix(rel, "..") {
							t.Fatalf("relative target %q %v", rel, err)
						}
						target = rel
					}
					if err := os.Symlink(target, at); err != nil {
						t.Fatal(err)
					}
					// Positive control: by name, the path leads out.
					if b, err := os.ReadFile(filepath.Join(root, "a/b/c/file")); err != nil || string(b) != secret {
						t.Fatalf("positive control: %q %v", b, err)
					}
					for _, p := range []string{"/a/b/c/file", "/a/b/c", "/a/b/c/sub/file"} {
						dst := filepath.Join(t.TempDir(), "x")
						got, err := h.Fetch(ctx, p, dst, provider.FetchLimits{}.WithDefaults())
						if err != nil {
							t.Fatalf("fetch %s: %v", p, err)
						}
						if !withheldAt(got, "/"+comp, provider.WithheldSymlink) {
							t.Errorf("fetch %s: the link at /%s is not recorded: %+v", p, comp, got.Withheld)
						}
						if leak := holds(t, filepath.Dir(dst)); len(leak) > 0 {
							t.Errorf("fetch %s: the secret reached the host: %v", p, leak)
						}
					}
				})
			}
		}
		// ".." in the asked path is resolved lexically (no link can be
		// on the way), so it never climbs out of the root.
		inside(t, root)
		got, err := h.Fetch(ctx, "/a/../../../../"+strings.TrimPrefix(out, "/")+"/a/b/c/file", filepath.Join(t.TempDir(), "x"), provider.FetchLimits{}.WithDefaults())
		if err == nil {
			t.Errorf("a path climbing out with \"..\" was read: %+v", got)
		}
	})
}

// A directory of a captured tree swapped for a link between its stat and
// its open, and a component swapped between two steps of the walk to the
// path, are met as links: every open is relative to its parent's
// descriptor and follows nothing, so the swap never leads out. With
// opens by path name (today's filepath.WalkDir) both would be read.
func TestGetSwappedForALinkMidWalk(t *testing.T) {
	h, root := inProcess(t)
	out := outside(t)
	ctx := context.Background()
	// swapAt returns a hook that, when the walk reports at, swaps rel
	// for a link to its twin outside the root (once).
	swapAt := func(at, rel string) func(string) {
		done := false
		return func(got string) {
			if got != at || done {
				return
			}
			done = true
			p := filepath.Join(root, rel)
			if err := os.RemoveAll(p); err != nil {
				t.Error(err)
			}
			if err := os.Symlink(filepath.Join(out, rel), p); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(func() { (*agent.StepHook) = nil })

	// The walk to the path: a/b swapped once a is open.
	was := (*agent.Openat2Missing).Load()
	(*agent.Openat2Missing).Store(true)
	inside(t, root)
	(*agent.StepHook) = swapAt("a", "a/b")
	dst := filepath.Join(t.TempDir(), "x")
	got, err := h.Fetch(ctx, "/a/b/c/file", dst, provider.FetchLimits{}.WithDefaults())
	(*agent.Openat2Missing).Store(was)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(root, "a/b")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("positive control: a/b was not swapped for a link: %v %v", fi, err)
	}
	if !withheldAt(got, "/a/b", provider.WithheldSymlink) || len(holds(t, filepath.Dir(dst))) > 0 {
		t.Errorf("walk to a/b/c/file with a/b swapped: withheld %+v, secret in %v", got.Withheld, holds(t, filepath.Dir(dst)))
	}

	// The tree: a/b/c/sub swapped between its stat and its open.
	inside(t, root)
	(*agent.StepHook) = swapAt("c/sub", "a/b/c/sub") // the tree's names start at its top, c
	dst = filepath.Join(t.TempDir(), "c")
	got, err = h.Fetch(ctx, "/a/b/c", dst, provider.FetchLimits{}.WithDefaults())
	(*agent.StepHook) = nil
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(root, "a/b/c/sub")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("positive control: a/b/c/sub was not swapped for a link: %v %v", fi, err)
	}
	if !withheldAt(got, "/a/b/c/sub", provider.WithheldSymlink) || len(holds(t, filepath.Dir(dst))) > 0 {
		t.Errorf("tree with c/sub swapped: withheld %+v, secret in %v", got.Withheld, holds(t, filepath.Dir(dst)))
	}
	if b, err := os.ReadFile(filepath.Join(dst, "file")); err != nil || string(b) != "inside" {
		t.Errorf("the rest of the tree: %q %v", b, err)
	}
}

// A get as a user reads what that user may read and nothing else: a
// root-only file (0600, and 0640 of group root, which root's own groups
// would open) and a root-only directory are recorded denied, never read,
// while the agent itself (root) reads them all.
func TestGetReadsWithTheUsersIDs(t *testing.T) {
	h, root := inProcess(t)
	ctx := context.Background()
	cap := filepath.Join(root, "cap")
	os.MkdirAll(filepath.Join(cap, "private"), 0o755)
	os.Chmod(filepath.Join(cap, "private"), 0o700)
	files := map[string]os.FileMode{"open": 0o644, "owner-only": 0o600, "group-root": 0o640, "private/file": 0o644}
	for p, mode := range files {
		if err := os.WriteFile(filepath.Join(cap, p), []byte(secret), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(cap, p), mode)
	}
	mine := filepath.Join(cap, "mine")
	os.WriteFile(mine, []byte("mine"), 0o600)
	os.Chown(mine, 1000, 1000)

	// Positive control: as root (the agent's own ids) every file is read.
	dst := filepath.Join(t.TempDir(), "cap")
	got, err := h.Fetch(ctx, "/cap", dst, provider.FetchLimits{}.WithDefaults())
	if err != nil || got.Files != 5 {
		t.Fatalf("positive control, as root: %d files, %v (%+v)", got.Files, err, got.Withheld)
	}

	dst = filepath.Join(t.TempDir(), "cap")
	got, err = h.Fetch(ctx, "/cap", dst, provider.FetchLimits{User: "1000:1000"}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"owner-only", "group-root", "private"} {
		if !withheldAt(got, path.Join("/cap", p), provider.WithheldDenied) {
			t.Errorf("%s: not recorded denied: %+v", p, got.Withheld)
		}
	}
	if leak := holds(t, dst); len(leak) != 1 || leak[0] != filepath.Join(dst, "open") {
		t.Errorf("files read as uid 1000 holding root's secret: %v, want only the world-readable one", leak)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "mine")); err != nil || string(b) != "mine" {
		t.Errorf("the user's own 0600 file: %q %v", b, err)
	}
	// The path itself unreadable: denied, nothing read.
	got, err = h.Fetch(ctx, "/cap/owner-only", filepath.Join(t.TempDir(), "f"), provider.FetchLimits{User: "1000:1000"}.WithDefaults())
	if err != nil || !withheldAt(got, "/cap/owner-only", provider.WithheldDenied) || got.Files != 0 {
		t.Errorf("a root-only file asked for itself: %+v %v", got, err)
	}
	got, err = h.Fetch(ctx, "/cap/private/file", filepath.Join(t.TempDir(), "f"), provider.FetchLimits{User: "1000:1000"}.WithDefaults())
	if err != nil || !withheldAt(got, "/cap/private/file", provider.WithheldDenied) || got.Files != 0 {
		t.Errorf("a file below a directory the user may not search: %+v %v", got, err)
	}
}

// A tree of more entries than the entry budget stops at the budget: the
// cut is recorded and counted, and the host holds no more entries than
// the budget granted.
func TestGetStopsAtTheEntryBudget(t *testing.T) {
	h, root := inProcess(t)
	dir := filepath.Join(root, "flood")
	os.MkdirAll(dir, 0o755)
	for i := range 500 {
		os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), nil, 0o644)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 500 {
		t.Fatalf("positive control: %d files made", len(ents))
	}
	dst := filepath.Join(t.TempDir(), "flood")
	got, err := h.Fetch(context.Background(), "/flood", dst, provider.FetchLimits{Entries: provider.NewBudget(100)}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	filepath.WalkDir(dst, func(string, fs.DirEntry, error) error { n++; return nil })
	if got.Entries != 100 || got.Cut != 1 || n > 100 {
		t.Errorf("entries %d, cut %d, host entries %d; want 100, 1, <= 100", got.Entries, got.Cut, n)
	}
}
