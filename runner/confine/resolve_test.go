package confine_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/confine"
)

func closeFD(fd int) { unix.Close(fd) }

// bothResolvers runs f with openat2 and with the component walk.
func bothResolvers(t *testing.T, f func(t *testing.T)) {
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) {
			was := confine.Openat2Missing.Load()
			confine.Openat2Missing.Store(walk)
			t.Cleanup(func() { confine.Openat2Missing.Store(was) })
			f(t)
		})
	}
}

// links makes root/task (a real dir) and, beside it, links a harness
// would plant: out of the root (absolute and relative) and one that stays
// under it, plus the dir outside they lead to.
func links(t *testing.T) (root, out string) {
	t.Helper()
	b := base(t)
	root, out = filepath.Join(b, "r"), filepath.Join(b, "out")
	for _, d := range []string{filepath.Join(root, "task"), out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"lnk": out, "rel": "../out", "inside": "task", "task/deep": out} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return root, out
}

// Resolution refuses every link on the way, one that stays under the
// root included (in a container the root is /, where every link stays
// under it), with openat2 and with the walk: it is a *LinkError naming
// the link, never a descriptor of what it leads to.
func TestOpenParentRefusesEveryLink(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		root, _ := links(t)
		r := openRoot(t, root)
		// Positive control: a path under a real dir resolves.
		fd, name, err := confine.OpenParent(r, "task/x")
		if err != nil || name != "x" {
			t.Fatalf("positive control: task/x: %v", err)
		}
		closeFD(fd)
		for rel, at := range map[string]string{"lnk/x": "lnk", "rel/x": "rel", "inside/x": "inside", "inside/a/x": "inside", "task/deep/x": "task/deep"} {
			fd, _, err := confine.OpenParent(r, rel)
			var link *confine.LinkError
			if !errors.As(err, &link) || link.At != at {
				if err == nil {
					closeFD(fd)
				}
				t.Errorf("OpenParent(%q) = %v, want the link at %q", rel, err, at)
			}
		}
		for _, rel := range []string{"inside", "lnk"} {
			if fd, err := confine.OpenDir(r, rel); err == nil {
				closeFD(fd)
				t.Errorf("OpenDir(%q): opened through the link", rel)
			}
		}
	})
}

// put's missing parents: MkdirAll makes each missing component relative
// to its parent's descriptor, 0755 root, and makes nothing through a link
// at any component, out of the root or staying under it (issue 35: `put
// lnk/newdir/file` made newdir outside the root).
func TestMkdirAllFollowsNoLink(t *testing.T) {
	if euid := os.Geteuid(); euid != 0 {
		testenv.Missing(t, fmt.Sprintf("root, to make directories owned by root (euid is %d)", euid), "run the tests as root, e.g. `sudo make test`")
	}
	root, out := links(t)
	r := openRoot(t, root)
	old := unix.Umask(0o077)
	defer unix.Umask(old)
	fd, err := confine.MkdirAll(r, "new/dir")
	if err != nil {
		t.Fatalf("positive control: MkdirAll new/dir: %v", err)
	}
	closeFD(fd)
	for _, d := range []string{"new", "new/dir"} {
		fi, err := os.Lstat(filepath.Join(root, d))
		if err != nil || fi.Mode() != os.ModeDir|0o755 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Errorf("%s: %v %v, want a 0755 directory of root", d, fi, err)
		}
	}
	for rel, made := range map[string]string{"lnk/newdir": filepath.Join(out, "newdir"), "rel/newdir/deeper": filepath.Join(out, "newdir"),
		"inside/newdir": filepath.Join(root, "task", "newdir"), "task/deep/newdir": filepath.Join(out, "newdir")} {
		fd, err := confine.MkdirAll(r, rel)
		var link *confine.LinkError
		if !errors.As(err, &link) {
			if err == nil {
				closeFD(fd)
			}
			t.Errorf("MkdirAll(%q) = %v, want a link refused", rel, err)
		}
		if _, err := os.Lstat(made); err == nil {
			t.Errorf("MkdirAll(%q) made %s through the link", rel, made)
		}
	}
}

// mountChild names the dir the mount test's child works in.
const mountChild = "CONFINE_TEST_MOUNT_CHILD"

// A removal never descends into another mount: a tmpfs mounted in the
// tree, and a bind mount of the same filesystem (same st_dev, another
// mount), are left whole with ErrMountPoint, while the rest of the tree
// goes. The mounts are made in a mount namespace of a child process of
// its own, so they never reach the host.
func TestRemoveStaysOnItsMount(t *testing.T) {
	if dir := os.Getenv(mountChild); dir != "" {
		mountedTree(t, dir)
		return
	}
	b := base(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestRemoveStaysOnItsMount$", "-test.v")
	cmd.Env = append(os.Environ(), mountChild+"="+b)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS} // Go makes / private in it first
	if os.Geteuid() != 0 {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		testenv.Missing(t, fmt.Sprintf("a mount namespace of its own for the test's child (%v)", err), "run the tests as root, or where user namespaces are allowed")
	}
	if err != nil {
		t.Fatalf("the child in its own mount namespace: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

// mountedTree is the mount test's child: it mounts a tmpfs at
// r/sw/tmpfs and binds b/other at r/sw/bind, then removes /sw/* and /sw.
func mountedTree(t *testing.T, b string) {
	root := filepath.Join(b, "r")
	sw := filepath.Join(root, "sw")
	for _, d := range []string{filepath.Join(sw, "tmpfs"), filepath.Join(sw, "bind"), filepath.Join(b, "other")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(sw, "plain"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(b, "other", "kept"), []byte("x"), 0o644)
	if err := unix.Mount("tmpfs", filepath.Join(sw, "tmpfs"), "tmpfs", 0, "size=1m"); err != nil {
		testenv.Missing(t, fmt.Sprintf("mount a tmpfs (%v)", err), "run the tests as root, or where user namespaces are allowed")
	}
	if err := unix.Mount(filepath.Join(b, "other"), filepath.Join(sw, "bind"), "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	os.WriteFile(filepath.Join(sw, "tmpfs", "kept"), []byte("x"), 0o644)
	// Positive controls: both are mounts, one of another filesystem.
	var top, tm, bd unix.Stat_t
	unix.Stat(sw, &top)
	unix.Stat(filepath.Join(sw, "tmpfs"), &tm)
	unix.Stat(filepath.Join(sw, "bind"), &bd)
	if tm.Dev == top.Dev || bd.Dev != top.Dev {
		t.Fatalf("positive control: st_dev top %d, tmpfs %d, bind %d", top.Dev, tm.Dev, bd.Dev)
	}
	r := openRoot(t, root)
	for _, args := range [][]string{{"--scratch", "/sw/*"}, {"--scratch", "/sw"}} {
		err := confine.Rmtree(t.Context(), r, args, func(string) {})
		if !errors.Is(err, confine.ErrMountPoint) {
			t.Errorf("rmtree %q = %v, want ErrMountPoint", args, err)
		}
	}
	for _, p := range []string{filepath.Join(sw, "tmpfs", "kept"), filepath.Join(sw, "bind", "kept")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("a file on another mount was removed: %v", err)
		}
	}
	if _, err := os.Lstat(filepath.Join(sw, "plain")); err == nil {
		t.Errorf("the tree's own file was not removed")
	}
}

// OpenFile follows no link, above the file or at it, and does not block on
// a fifo; a plain file opens (the positive control).
func TestOpenFileFollowsNoLink(t *testing.T) {
	bothResolvers(t, func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "file"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, err := range []error{os.Symlink("file", filepath.Join(dir, "last")), os.Symlink("sub", filepath.Join(dir, "up")),
			os.WriteFile(filepath.Join(dir, "sub", "f"), []byte("y"), 0o644), syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600)} {
			if err != nil {
				t.Fatal(err)
			}
		}
		root, err := confine.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer closeFD(root)
		for _, rel := range []string{"file", "sub/f", "fifo"} {
			f, err := confine.OpenFile(root, rel)
			if err != nil {
				t.Errorf("positive control: %s: %v", rel, err)
				continue
			}
			f.Close()
		}
		for _, rel := range []string{"last", "up/f"} {
			f, err := confine.OpenFile(root, rel)
			var le *confine.LinkError
			if !errors.As(err, &le) {
				if f != nil {
					f.Close()
				}
				t.Errorf("%s: %v; want a *LinkError", rel, err)
			}
		}
	})
}
