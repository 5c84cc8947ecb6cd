package confine

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// LinkError is a link met at a component of a path on the way to its last
// one (or at the last one, where the operation needs a directory there).
type LinkError struct {
	At     string // the link's path, relative to the root
	Target string
}

func (e *LinkError) Error() string { return fmt.Sprintf("a link at %q (to %q)", e.At, e.Target) }

// Openat2Missing is set once openat2 turned out absent (ENOSYS, or a
// seccomp filter's EPERM): every resolve walks from then on. Tests set it
// to force the walk.
var Openat2Missing atomic.Bool

// StepHook, when set (tests only), runs after each step of a walk has
// opened rel: each component of OpenParent's walk, a tree's entries
// between their stat and their open (runner/agent's get), a directory a
// removal is about to open, and a pattern's directory once its entries
// are read. A test swaps what comes next for a link there.
var StepHook func(rel string)

func step(rel string) {
	if StepHook != nil {
		StepHook(rel)
	}
}

// OpenRoot opens dir, the root every path is resolved beneath. It is the
// caller's to choose (the agent's --root, / for the helper), opened by
// name once.
func OpenRoot(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the root %q: %w", dir, err)
	}
	return fd, nil
}

// checkRel refuses a path that is not clean and relative: "", ".", ".."
// or an empty component.
func checkRel(rel string) error {
	for _, part := range strings.Split(rel, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("path %q: not clean: %w", rel, unix.EINVAL)
		}
	}
	return nil
}

// OpenParent opens the parent of rel (a cleaned path relative to the root
// descriptor, no ".." component; "" is the root itself) beneath root,
// following no link at any component, and returns it (O_PATH) with rel's
// last component ("." for the root), which the caller opens O_NOFOLLOW in
// it: openat2 with RESOLVE_NO_SYMLINKS|RESOLVE_BENEATH where the kernel
// has it, else one O_NOFOLLOW|O_DIRECTORY step per component. A link on
// the way is *LinkError; a missing component is ENOENT or ENOTDIR; one the
// caller may not search is EACCES.
func OpenParent(root int, rel string) (int, string, error) {
	if rel == "" {
		fd, err := unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return fd, ".", err
	}
	if err := checkRel(rel); err != nil {
		return -1, "", err
	}
	dirRel, name := path.Split(rel)
	dirRel = strings.TrimSuffix(dirRel, "/")
	if dirRel == "" {
		fd, err := unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return fd, name, err
	}
	if !Openat2Missing.Load() {
		fd, err := unix.Openat2(root, dirRel, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
		})
		switch {
		case err == nil:
			return fd, name, nil
		case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.E2BIG):
			Openat2Missing.Store(true)
		case !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.EXDEV):
			return -1, "", err
		}
		// ELOOP or ENOTDIR: a link on the way, or a file where a
		// directory should be; the walk tells which, for the record.
	}
	fd, err := walkParent(root, dirRel)
	return fd, name, err
}

// walkParent opens dirRel one component at a time, each O_NOFOLLOW|
// O_DIRECTORY relative to the one before.
func walkParent(root int, dirRel string) (int, error) {
	dir, err := unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	done := ""
	for _, part := range strings.Split(dirRel, "/") {
		next, err := unix.Openat(dir, part, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			err = linkErr(dir, part, path.Join(done, part), err)
			unix.Close(dir)
			return -1, err
		}
		unix.Close(dir)
		dir, done = next, path.Join(done, part)
		step(done)
	}
	return dir, nil
}

// linkErr makes err, an O_NOFOLLOW|O_DIRECTORY open's failure on name in
// dir (at is its path), a *LinkError when a link is what is there.
func linkErr(dir int, name, at string, err error) error {
	if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		if t, lerr := Readlink(dir, name); lerr == nil {
			return &LinkError{At: at, Target: t}
		}
	}
	return err
}

// Readlink reads the link name in dir ("" with an O_PATH descriptor of
// the link itself); an entry that is not a link is EINVAL.
func Readlink(dir int, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dir, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// OpenDir opens rel ("" for the root) as a directory to read, following
// no link at any component, its last included: a link anywhere is
// *LinkError, a missing component ENOENT or ENOTDIR.
func OpenDir(root int, rel string) (int, error) {
	parent, name, err := OpenParent(root, rel)
	if err != nil {
		return -1, err
	}
	defer unix.Close(parent)
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, linkErr(parent, name, rel, err)
	}
	return fd, nil
}

// MkdirAll opens rel ("" for the root) as a directory, creating each
// missing component relative to its parent's descriptor (mode 0755, owned
// by root, as a provider's put makes missing parents), following no link
// at any component: a link there, even one that would stay under the root,
// is *LinkError and nothing is created through it.
func MkdirAll(root int, rel string) (int, error) {
	dir, err := unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil || rel == "" {
		return dir, err
	}
	if err := checkRel(rel); err != nil {
		unix.Close(dir)
		return -1, err
	}
	done := ""
	for _, part := range strings.Split(rel, "/") {
		at := path.Join(done, part)
		next, err := unix.Openat(dir, part, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			next, err = mkdirOne(dir, part)
		}
		if err != nil {
			err = linkErr(dir, part, at, err)
			unix.Close(dir)
			return -1, err
		}
		unix.Close(dir)
		dir, done = next, at
		step(done)
	}
	return dir, nil
}

// mkdirOne makes name in dir, 0755 root (whatever the umask), and opens
// it without following a link: one swapped in since the mkdir is refused.
// One that appeared meanwhile (EEXIST) is opened as it is, left as it is.
func mkdirOne(dir int, name string) (int, error) {
	err := unix.Mkdirat(dir, name, 0o755)
	made := err == nil
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, err
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil || !made {
		return fd, err
	}
	if err := unix.Fchmod(fd, 0o755); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Fchown(fd, 0, 0); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// OpenFile opens rel to read, following no link at any component, its
// last included, and without blocking (O_NONBLOCK: a fifo is not waited
// on): a link anywhere is *LinkError, a missing component ENOENT or
// ENOTDIR. What it opened may be anything but a link; the caller fstats
// it (the probe reads only a regular file).
func OpenFile(root int, rel string) (*os.File, error) {
	parent, name, err := OpenParent(root, rel)
	if err != nil {
		return nil, err
	}
	defer unix.Close(parent)
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			if t, lerr := Readlink(parent, name); lerr == nil {
				return nil, &LinkError{At: rel, Target: t}
			}
		}
		return nil, err
	}
	return os.NewFile(uintptr(fd), "/"+rel), nil
}
