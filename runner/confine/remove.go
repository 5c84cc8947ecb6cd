package confine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Errors callers branch on.
var (
	// ErrMountPoint is a directory of another mount met by a removal: it
	// is left where it is, nothing below it is touched.
	ErrMountPoint = errors.New("another mount: not descended into")
	// ErrNotSessionDir refuses a session dir removal of a directory
	// without bin/warden.
	ErrNotSessionDir = errors.New("not a session dir (no bin/warden)")
	// ErrTooDeep is a tree deeper than maxDepth: what is below is left.
	ErrTooDeep = errors.New("deeper than a removal descends")
)

// maxDepth bounds how deep a removal descends: each level holds a
// descriptor, and a tree made deep on purpose must not exhaust them.
const maxDepth = 4096

// maxRounds bounds how often a directory that fills again while it is
// emptied (something still writing in it) is read again before its
// removal fails.
const maxRounds = 8

// swapRetries is how many more times an entry that changed type between
// two looks (a directory swapped for a link) is looked at again.
const swapRetries = 2

// mount is where a directory is: its filesystem (st_dev) and its mount
// (statx's mount id; 0 where the kernel does not say).
type mount struct{ dev, id uint64 }

func mountOf(fd int) (mount, error) {
	var sx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE|unix.STATX_MNT_ID, &sx); err == nil {
		m := mount{dev: unix.Mkdev(sx.Dev_major, sx.Dev_minor)}
		if sx.Mask&unix.STATX_MNT_ID != 0 {
			m.id = sx.Mnt_id
		}
		return m, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return mount{}, err
	}
	return mount{dev: st.Dev}, nil
}

// within says whether m is top's mount: the same filesystem and, where
// both ids are known, the same mount (a bind mount of the same
// filesystem has the same st_dev).
func (m mount) within(top mount) bool {
	return m.dev == top.dev && (m.id == 0 || top.id == 0 || m.id == top.id)
}

// remover removes trees by descriptors, never leaving top's mount.
type remover struct {
	ctx context.Context
	top mount
}

// RemoveAll removes name in dir and everything below it (rel is its path
// relative to the root, for messages): a non-directory, a link included,
// with one unlinkat (the link, never its target); a directory by emptying
// it through a descriptor opened relative to dir with O_NOFOLLOW|
// O_DIRECTORY, each entry relative to that one, then removing it relative
// to dir. Nothing is resolved by name twice: a directory swapped for a
// link between two looks is met as a link and removed as one. A directory
// on another mount than dir is left (ErrMountPoint). A missing name is
// not an error.
func RemoveAll(ctx context.Context, dir int, name, rel string) error {
	top, err := mountOf(dir)
	if err != nil {
		return fmt.Errorf("stat the directory of %q: %w", "/"+rel, err)
	}
	return remover{ctx: ctx, top: top}.at(dir, name, rel, 0, swapRetries)
}

func (r remover) at(dir int, name, rel string, depth, retry int) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	err := unix.Unlinkat(dir, name, 0)
	switch {
	case err == nil || errors.Is(err, unix.ENOENT):
		return nil
	case !errors.Is(err, unix.EISDIR):
		return fmt.Errorf("remove %q: %w", "/"+rel, err)
	}
	// A directory (unlink refuses one): emptied through a descriptor of
	// its own.
	step(rel)
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case (errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)) && retry > 0:
		// Swapped since the unlink: a link (or a file) now, removed as one.
		return r.at(dir, name, rel, depth, retry-1)
	case err != nil:
		return fmt.Errorf("open %q: %w", "/"+rel, linkErr(dir, name, rel, err))
	}
	return r.opened(dir, name, fd, rel, depth, retry)
}

// opened empties the directory fd (name in dir) and removes name: refused
// when fd is on another mount than the removal's top; read again while it
// fills up meanwhile, at most maxRounds times. It closes fd.
func (r remover) opened(dir int, name string, fd int, rel string, depth, retry int) error {
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	if depth >= maxDepth {
		return fmt.Errorf("remove %q: %w (%d levels)", "/"+rel, ErrTooDeep, maxDepth)
	}
	here, err := mountOf(fd)
	if err != nil {
		return fmt.Errorf("stat %q: %w", "/"+rel, err)
	}
	if !here.within(r.top) {
		return fmt.Errorf("remove %q: %w", "/"+rel, ErrMountPoint)
	}
	for round := 1; ; round++ {
		if err := r.empty(f, fd, rel, depth+1); err != nil {
			return err
		}
		err := unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
		switch {
		case err == nil || errors.Is(err, unix.ENOENT):
			return nil
		case (errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST)) && round < maxRounds:
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return fmt.Errorf("read %q again: %w", "/"+rel, err)
			}
			continue
		case errors.Is(err, unix.ENOTDIR) && retry > 0:
			// Swapped for a link or a file once emptied: that is
			// removed as one (the directory emptied is wherever it
			// was moved to).
			return r.at(dir, name, rel, depth, retry-1)
		}
		return fmt.Errorf("remove %q: %w", "/"+rel, err)
	}
}

// empty removes every entry of the directory f (descriptor fd), each
// relative to fd, read in batches (a directory of millions of names never
// sits in memory whole). Every entry is tried; the first error is
// returned.
func (r remover) empty(f *os.File, fd int, rel string, depth int) error {
	var first error
	for {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		names, err := f.Readdirnames(256)
		for _, n := range names {
			if rerr := r.at(fd, n, path.Join(rel, n), depth, swapRetries); rerr != nil && first == nil {
				first = rerr
			}
		}
		if errors.Is(err, io.EOF) {
			return first
		}
		if err != nil {
			return fmt.Errorf("read %q: %w", "/"+rel, err)
		}
	}
}

// eachName calls f with each name in the directory fd, read in batches
// (a directory of millions of names never sits in memory whole) from a
// descriptor of its own opened relative to fd: nothing is resolved by
// name.
func eachName(fd int, f func(name string) error) error {
	own, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(own), ".")
	defer d.Close()
	for {
		names, err := d.Readdirnames(256)
		for _, n := range names {
			if ferr := f(n); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// RemoveMatches removes every entry pattern matches, and everything below
// it, calling removed with each one's path. pattern is an absolute clean
// path with a glob in its last element only (an adapter's scratch entry,
// as the manifest's parse checked), whose / is root; the glob is
// path.Match's (a leading dot is matched like any other character, as
// filepath.Glob does). Its directory is opened once, following no link at
// any component (a link there refuses the pattern, whatever it leads to);
// the names are read from that descriptor and each match removed relative
// to it (RemoveAll) as it is read. The directory is read again while a
// reading removed something (removing may reorder what is left), at most
// maxRounds times. A directory that does not exist has nothing to remove.
func RemoveMatches(ctx context.Context, root int, pattern string, removed func(string)) error {
	dir, last := path.Split(pattern)
	dir = path.Clean(dir)
	if !path.IsAbs(pattern) || path.Clean(pattern) != pattern || last == "" || strings.ContainsAny(dir, "*?[]\\") {
		return fmt.Errorf("refuse %q: not an absolute path with a glob only in its last element", pattern)
	}
	if _, err := path.Match(last, ""); err != nil {
		return fmt.Errorf("refuse %q: %w", pattern, err)
	}
	dirRel := strings.TrimPrefix(dir, "/")
	fd, err := OpenDir(root, dirRel)
	var link *LinkError
	switch {
	case errors.As(err, &link):
		return fmt.Errorf("refuse %q: its directory is not a plain directory (%v)", pattern, err)
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
		return nil // nothing was ever written there
	case err != nil:
		return fmt.Errorf("open %q: %w", dir, err)
	}
	defer unix.Close(fd)
	step(dirRel)
	var errs []error
	for round := 0; round < maxRounds; round++ {
		found := false
		err := eachName(fd, func(n string) error {
			if ok, _ := path.Match(last, n); !ok {
				return nil
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			found = true
			if err := RemoveAll(ctx, fd, n, path.Join(dirRel, n)); err != nil {
				if len(errs) < 100 {
					errs = append(errs, err)
				}
				return nil
			}
			removed(path.Join(dir, n))
			return nil
		})
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("read %q: %w", dir, err))...)
		}
		if !found || len(errs) > 0 {
			break
		}
	}
	return errors.Join(errs...)
}

// RemoveSessionDir removes the session dir rel (relative to root, not the
// root itself) and everything below it: refused unless it holds
// bin/warden, a regular file, so a wrong path takes nothing else with it.
// It is opened once, following no link at any component, and checked and
// emptied through that descriptor. One already gone is not an error.
func RemoveSessionDir(ctx context.Context, root int, rel string) error {
	if rel == "" {
		return fmt.Errorf("refuse the root: %w", ErrNotSessionDir)
	}
	parent, name, err := OpenParent(root, rel)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("refuse %q: %w", "/"+rel, err)
	}
	defer unix.Close(parent)
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("refuse %q: %w", "/"+rel, linkErr(parent, name, rel, err))
	}
	if !holdsWarden(fd) {
		unix.Close(fd)
		return fmt.Errorf("refuse %q: %w", "/"+rel, ErrNotSessionDir)
	}
	top, err := mountOf(parent)
	if err != nil {
		unix.Close(fd)
		return fmt.Errorf("stat the directory of %q: %w", "/"+rel, err)
	}
	return remover{ctx: ctx, top: top}.opened(parent, name, fd, rel, 0, swapRetries)
}

// holdsWarden says whether the directory fd holds bin/warden, a regular
// file, looked up without following a link.
func holdsWarden(fd int) bool {
	bin, err := unix.Openat(fd, "bin", unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(bin)
	var st unix.Stat_t
	return unix.Fstatat(bin, "warden", &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG
}

// Rmtree does what the rmtree helper's arguments ask, beneath root, whose
// paths are absolute sandbox paths (root is their /): "DIR" removes a
// session dir (RemoveSessionDir), "--scratch PATTERN..." every match of
// each pattern (RemoveMatches), calling removed with each path removed.
// Every pattern is tried; the errors are joined. The session agent's
// remove and the rmtree helper both run this, so the two ways a session
// removes something as root are one.
func Rmtree(ctx context.Context, root int, args []string, removed func(string)) error {
	if len(args) > 0 && args[0] == "--scratch" {
		var errs []error
		for _, p := range args[1:] {
			errs = append(errs, RemoveMatches(ctx, root, p, removed))
		}
		return errors.Join(errs...)
	}
	if len(args) != 1 {
		return fmt.Errorf("want one directory, got %d arguments", len(args))
	}
	dir := path.Clean(args[0])
	if !path.IsAbs(dir) || dir == "/" {
		return fmt.Errorf("refuse %q: not an absolute session dir", args[0])
	}
	return RemoveSessionDir(ctx, root, strings.TrimPrefix(dir, "/"))
}
