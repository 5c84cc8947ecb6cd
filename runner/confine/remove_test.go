package confine_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/runner/confine"
)

// canaryNames are the entries of a scratch tree and of its canary twin
// (the canary also holds marker): a removal steered into the canary by
// name meets the same names there.
var canaryNames = []string{"f1", "f2", "f3", "d1", "d1/f1", "d1/d2", "d1/d2/f3"}

// base is a temp dir with no link of the host's above it (a path the
// by-name positive controls resolve as it is).
func base(t *testing.T) string {
	t.Helper()
	b, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tree makes dir holding canaryNames (files, and the d* directories).
func tree(t *testing.T, dir string) {
	t.Helper()
	for _, n := range canaryNames {
		p := filepath.Join(dir, n)
		err := os.MkdirAll(filepath.Dir(p), 0o755)
		if strings.HasPrefix(filepath.Base(n), "d") {
			err = os.MkdirAll(p, 0o755)
		} else if err == nil {
			err = os.WriteFile(p, []byte("scratch"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// canary makes a tree of canaryNames plus marker at dir, returns dir.
func canary(t *testing.T, dir string) string {
	t.Helper()
	tree(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "marker"), []byte("canary"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// lost lists what the canary at dir lost.
func lost(dir string) []string {
	var out []string
	for _, n := range append(slices.Clone(canaryNames), "marker") {
		if _, err := os.Lstat(filepath.Join(dir, n)); err != nil {
			out = append(out, n)
		}
	}
	return out
}

// swapOnce returns a hook that, the first time it is called with at,
// moves victim to moved and puts a link to target in its place: the
// harness's swap between the removal's look and its act.
func swapOnce(t *testing.T, at, victim, moved, target string) (func(string), *bool) {
	done := false
	return func(rel string) {
		if rel != at || done {
			return
		}
		done = true
		if err := os.Rename(victim, moved); err != nil {
			t.Error(err)
		}
		if err := os.Symlink(target, victim); err != nil {
			t.Error(err)
		}
	}, &done
}

func hook(t *testing.T, f func(string)) {
	t.Helper()
	confine.StepHook = f
	t.Cleanup(func() { confine.StepHook = nil })
}

func openRoot(t *testing.T, dir string) int {
	t.Helper()
	fd, err := confine.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeFD(fd) })
	return fd
}

// byPathScratch is main's `rmtree --scratch` for one pattern (at
// 337f6a1), with the swap's moment between its look and its act: the
// directory checked by name (EvalSymlinks), globbed by name, each match
// removed by name (RemoveAll opens its parent by name). It is the
// positive control that a swap there is live.
func byPathScratch(p string, between func()) error {
	dir, _ := filepath.Split(p)
	dir = filepath.Clean(dir)
	real, err := filepath.EvalSymlinks(dir)
	if err != nil || real != dir {
		return errors.New("refused: its directory is not a plain directory")
	}
	matches, err := filepath.Glob(p)
	if err != nil {
		return err
	}
	between()
	for _, m := range matches {
		if err := os.RemoveAll(m); err != nil {
			return err
		}
	}
	return nil
}

// byPathRm is `rm -rf` as BusyBox's remove_file does it: lstat a path,
// and for a directory list it and recurse by name, then rmdir it. between
// runs between a directory's lstat and its listing. The positive control
// that a swap mid-walk is live.
func byPathRm(p string, between func(string)) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		between(p)
		names, err := readNames(p)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := byPathRm(filepath.Join(p, n), between); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return os.Remove(p)
}

func readNames(p string) ([]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// A scratch pattern's directory swapped for a link to a canary tree after
// the removal opened it (the race: `cd -P` checked, then rm by
// name): the confined removal acts on the directory it opened, so the
// canary keeps every entry and what was matched is gone from the
// directory that was there. Main's rmtree --scratch, given the same swap
// at the same moment, removes the canary's entries (the positive control).
func TestRemoveMatchesActsOnTheDirectoryItOpened(t *testing.T) {
	b := base(t)
	root := filepath.Join(b, "r")
	sw := filepath.Join(root, "tmp", "sw")

	// Positive control: main's logic, the same swap between its glob
	// and its removal.
	tree(t, sw)
	can := canary(t, filepath.Join(b, "canary-main"))
	swap, swapped := swapOnce(t, "go", sw, filepath.Join(b, "moved-main"), can)
	if err := byPathScratch(filepath.Join(sw, "*"), func() { swap("go") }); err != nil {
		t.Fatalf("positive control: %v", err)
	}
	if !*swapped || len(lost(can)) == 0 {
		t.Fatalf("positive control: main's rmtree --scratch with the swap lost nothing of the canary (swapped %t)", *swapped)
	}
	t.Logf("positive control: main's rmtree --scratch removed %q from the canary", lost(can))
	os.Remove(sw)

	tree(t, sw)
	can = canary(t, filepath.Join(b, "canary"))
	moved := filepath.Join(b, "moved")
	f, swapped := swapOnce(t, "tmp/sw", sw, moved, can)
	hook(t, f)
	var removed []string
	err := confine.RemoveMatches(context.Background(), openRoot(t, root), "/tmp/sw/*", func(p string) { removed = append(removed, p) })
	if err != nil {
		t.Fatalf("remove: %v", err)
	}
	if !*swapped {
		t.Fatal("the hook never ran: the swap was not made")
	}
	if l := lost(can); len(l) > 0 {
		t.Errorf("the canary lost %q through the swapped link", l)
	}
	if left, _ := readNames(moved); len(left) != 0 {
		t.Errorf("the directory the removal opened still holds %q", left)
	}
	slices.Sort(removed)
	if want := []string{"/tmp/sw/d1", "/tmp/sw/f1", "/tmp/sw/f2", "/tmp/sw/f3"}; !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	if fi, err := os.Lstat(sw); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link put in the pattern's directory's place: %v %v", fi, err)
	}
}

// A directory of a tree being removed, swapped for a link to a canary
// between the removal's look (unlink says it is a directory) and its
// open, is met as a link: the link is removed, never followed, and the
// canary keeps every entry. `rm -rf` recursing by name (BusyBox's), given
// the same swap, empties the canary (the positive control).
func TestRemoveAllMeetsASwappedDirectoryAsALink(t *testing.T) {
	b := base(t)
	root := filepath.Join(b, "r")
	top := filepath.Join(root, "sw")

	tree(t, filepath.Join(top, "sub"))
	can := canary(t, filepath.Join(b, "canary-rm"))
	swap, swapped := swapOnce(t, filepath.Join(top, "sub"), filepath.Join(top, "sub"), filepath.Join(b, "moved-rm"), can)
	byPathRm(top, swap)
	if !*swapped || len(lost(can)) == 0 {
		t.Fatalf("positive control: rm by name with the swap lost nothing of the canary (swapped %t)", *swapped)
	}
	t.Logf("positive control: rm by name removed %q from the canary", lost(can))

	tree(t, filepath.Join(top, "sub"))
	can = canary(t, filepath.Join(b, "canary"))
	moved := filepath.Join(b, "moved")
	f, swapped := swapOnce(t, "sw/sub", filepath.Join(top, "sub"), moved, can)
	hook(t, f)
	dir := openRoot(t, root)
	if err := confine.RemoveAll(context.Background(), dir, "sw", "sw"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if !*swapped {
		t.Fatal("the hook never ran: the swap was not made")
	}
	if l := lost(can); len(l) > 0 {
		t.Errorf("the canary lost %q through the swapped link", l)
	}
	if _, err := os.Lstat(top); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the tree (and the link in it) is still there: %v", err)
	}
	if left, _ := readNames(moved); len(left) == 0 {
		t.Errorf("the directory moved out of the tree was emptied: nothing outside the tree is the removal's")
	}
}

// The session dir: links planted in the harness's home and run dir (to a
// canary dir and to a canary file) and a directory of the home swapped for
// a link mid-walk are removed as links; the canary keeps every entry, the
// session dir is gone. A dir without bin/warden is refused, and so is one
// reached through a link.
func TestRemoveSessionDirFollowsNoLink(t *testing.T) {
	b := base(t)
	root := filepath.Join(b, "r")
	dir := filepath.Join(root, "var/lib/sandproof/s1")
	can := canary(t, filepath.Join(b, "canary"))
	for _, d := range []string{"bin", "run/a1", "state/a1"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	os.WriteFile(filepath.Join(dir, "bin/warden"), []byte("warden"), 0o755)
	tree(t, filepath.Join(dir, "home/sub"))
	for link, target := range map[string]string{"home/lnk": can, "run/a1/lnk": filepath.Join(can, "marker"), "home/sub/d1/up": "../../../../../../../.."} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	f, swapped := swapOnce(t, "var/lib/sandproof/s1/home/sub", filepath.Join(dir, "home/sub"), filepath.Join(b, "moved"), can)
	hook(t, f)
	r := openRoot(t, root)
	// Refused: not a session dir, and one reached through a link.
	os.MkdirAll(filepath.Join(root, "var/lib/sandproof/plain"), 0o755)
	os.Symlink(dir, filepath.Join(root, "var/lib/sandproof/via"))
	for _, rel := range []string{"var/lib/sandproof/plain", "var/lib/sandproof/via", "var/lib/sandproof/via/home"} {
		if err := confine.RemoveSessionDir(context.Background(), r, rel); err == nil {
			t.Errorf("remove session dir %s: no error", rel)
		}
	}
	if _, err := os.Lstat(filepath.Join(root, "var/lib/sandproof/plain")); err != nil {
		t.Errorf("a dir without bin/warden was removed: %v", err)
	}

	if err := confine.Rmtree(context.Background(), r, []string{"/var/lib/sandproof/s1"}, func(string) {}); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if !*swapped {
		t.Fatal("the hook never ran: the swap was not made")
	}
	if l := lost(can); len(l) > 0 {
		t.Errorf("the canary lost %q through a link in the session dir", l)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the session dir is still there: %v", err)
	}
}

// A pattern whose directory is a link, at its last component or above it,
// out of the root or staying under it, is refused and nothing it leads to
// is removed; the other patterns are still removed. A missing directory
// has nothing to remove.
func TestRemoveMatchesRefusesALinkedDirectory(t *testing.T) {
	b := base(t)
	root := filepath.Join(b, "r")
	can := canary(t, filepath.Join(b, "canary"))
	tree(t, filepath.Join(root, "tmp/real"))
	tree(t, filepath.Join(root, "tmp/own"))
	for link, target := range map[string]string{"tmp/out": can, "tmp/inside": "real", "up": can} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	// Positive control: by name, each pattern's directory holds names.
	for _, d := range []string{"tmp/out", "tmp/inside", "up/d1"} {
		if names, _ := readNames(filepath.Join(root, d)); len(names) == 0 {
			t.Fatalf("positive control: %s lists nothing by name", d)
		}
	}
	var removed []string
	err := confine.Rmtree(context.Background(), openRoot(t, root),
		[]string{"--scratch", "/tmp/out/*", "/tmp/inside/*", "/up/d1/*", "/tmp/own/f*", "/nodir/x*"},
		func(p string) { removed = append(removed, p) })
	for _, p := range []string{"/tmp/out/*", "/tmp/inside/*", "/up/d1/*"} {
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "link") {
			t.Errorf("pattern %s: not refused as through a link: %v", p, err)
		}
	}
	if l := lost(can); len(l) > 0 {
		t.Errorf("the canary lost %q", l)
	}
	if names, _ := readNames(filepath.Join(root, "tmp/real")); len(names) != 4 {
		t.Errorf("the link staying under the root was followed: tmp/real holds %q", names)
	}
	slices.Sort(removed)
	if want := []string{"/tmp/own/f1", "/tmp/own/f2", "/tmp/own/f3"}; !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
}

// The rmtree arguments: a session dir that is not absolute, the root, and
// a pattern with a glob above its last element are refused.
func TestRmtreeRefusesBadArguments(t *testing.T) {
	r := openRoot(t, base(t))
	for _, args := range [][]string{{}, {"rel/dir"}, {"/"}, {"/a", "/b"}, {"--scratch", "/tmp/*/x"}, {"--scratch", "tmp/x"}, {"--scratch", "/tmp/x/"}} {
		if err := confine.Rmtree(context.Background(), r, args, func(string) {}); err == nil {
			t.Errorf("rmtree %q: no error", args)
		}
	}
}

// chain makes depth nested directories named d below dir, by
// descriptors (the path grows past PATH_MAX).
func chain(t *testing.T, dir string, depth int) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	for i := 0; err == nil && i < depth; i++ {
		if err = unix.Mkdirat(fd, "d", 0o755); err == nil {
			var next int
			next, err = unix.Openat(fd, "d", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			unix.Close(fd)
			fd = next
		}
	}
	if err != nil {
		t.Fatalf("make a chain of %d: %v", depth, err)
	}
	unix.Close(fd)
}

// A tree deeper than a removal descends (each level holds a descriptor)
// is refused with ErrTooDeep, not followed down until descriptors run
// out; a deep but bounded one goes (the positive control).
func TestRemoveAllStopsAtItsDepth(t *testing.T) {
	b := base(t)
	r := openRoot(t, b)
	os.Mkdir(filepath.Join(b, "deep"), 0o755)
	chain(t, filepath.Join(b, "deep"), 300)
	if err := confine.RemoveAll(context.Background(), r, "deep", "deep"); err != nil {
		t.Fatalf("positive control: a chain of 300: %v", err)
	}
	os.Mkdir(filepath.Join(b, "deeper"), 0o755)
	chain(t, filepath.Join(b, "deeper"), 4100)
	if err := confine.RemoveAll(context.Background(), r, "deeper", "deeper"); !errors.Is(err, confine.ErrTooDeep) {
		t.Errorf("a chain of 4,100: %v, want ErrTooDeep", err)
	}
}
