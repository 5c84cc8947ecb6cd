package confine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Errors of a walk past its bounds.
var (
	// ErrTooManyEntries is a tree holding more entries than the walk's
	// Entries: what it read is not an answer.
	ErrTooManyEntries = errors.New("more entries than a walk reads")
	// ErrPathTooLong is an entry whose path below the top is longer than
	// the walk's PathBytes.
	ErrPathTooLong = errors.New("a path longer than a walk reads")
)

// Default bounds of a walk.
const (
	// DefaultWalkEntries is WalkLimits.Entries's default.
	DefaultWalkEntries = 1 << 20
	// DefaultWalkPathBytes is WalkLimits.PathBytes's default: PATH_MAX, the
	// longest path anything resolving by name could have made of it.
	DefaultWalkPathBytes = unix.PathMax
)

// WalkLimits bound a walk, so a tree made large or deep on purpose ends
// it with an error rather than keeping it (and what its caller keeps of
// it) going: a walk also never descends more than maxDepth levels
// (ErrTooDeep), one descriptor each.
type WalkLimits struct {
	// Entries is how many entries the walk reads at most (the top is not
	// one); the one past it is ErrTooManyEntries. 0 is
	// DefaultWalkEntries.
	Entries int
	// PathBytes is the longest path below the top the walk reads; a longer
	// one is ErrPathTooLong. 0 is DefaultWalkPathBytes.
	PathBytes int
}

// Entry is one entry of a tree Walk met, looked at once.
type Entry struct {
	// Rel is its path below the walk's top, "/"-separated, no leading
	// slash ("etc/passwd").
	Rel string
	// Dir is the descriptor of its directory and Name its name there:
	// anything more the caller reads of it is read relative to Dir
	// (fstatat, openat with O_NOFOLLOW), never by a path. Dir is open
	// only while the callback runs.
	Dir  int
	Name string
	// Stat is what it is, not following a link (a link is a link). For a
	// directory it is the fstat of the descriptor the walk opened and
	// descends into, so it is the directory whose entries come next.
	Stat unix.Stat_t
	// FD is a directory's own descriptor (opened O_RDONLY|O_DIRECTORY|
	// O_NOFOLLOW relative to Dir), open only while the callback runs; -1
	// for anything else.
	FD int
}

// IsDir says whether the entry is a directory the walk descends into.
func (e *Entry) IsDir() bool { return e.FD >= 0 }

// Walk reads the tree below the directory top (a descriptor the caller
// opened, O_PATH will do) and calls fn with each entry, a directory before
// what it holds, in no particular order. It is the confined primitive's
// read: every entry is looked at relative to its parent's descriptor
// without following a link (fstatat AT_SYMLINK_NOFOLLOW), and a directory
// is descended into only through a descriptor opened relative to its
// parent with O_NOFOLLOW|O_DIRECTORY, never by a path. A directory
// swapped for a link between the look and the open is looked at again and
// met as the link it now is (passed to fn as one, never descended into); a
// name gone since its directory was read is skipped. It stops at the first
// error fn returns, when ctx ends (ctx's error), and past lim (above). It
// holds one descriptor per level and a batch of names, whatever the tree.
func Walk(ctx context.Context, top int, lim WalkLimits, fn func(*Entry) error) error {
	if lim.Entries <= 0 {
		lim.Entries = DefaultWalkEntries
	}
	if lim.PathBytes <= 0 {
		lim.PathBytes = DefaultWalkPathBytes
	}
	own, err := unix.Openat(top, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the walk's top: %w", err)
	}
	w := &treeWalk{ctx: ctx, lim: lim, fn: fn}
	return w.dir(os.NewFile(uintptr(own), "."), 0)
}

// treeWalk is one Walk: its bounds, what it read so far, and the path of
// the directory it is in (one buffer, so a deep tree costs no path per
// level).
type treeWalk struct {
	ctx  context.Context
	lim  WalkLimits
	fn   func(*Entry) error
	n    int
	path []byte
}

// dir calls entry for each name in the directory d (at depth), read in
// batches (a directory of millions of names never sits in memory whole)
// from d's own descriptor. It closes d.
func (w *treeWalk) dir(d *os.File, depth int) error {
	defer d.Close()
	fd := int(d.Fd())
	for {
		names, err := d.Readdirnames(256)
		for _, n := range names {
			if err := w.entry(fd, n, depth); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %q: %w", "/"+string(w.path), err)
		}
	}
}

// entry looks at name in dir, calls fn with it and, for a directory,
// descends into it.
func (w *treeWalk) entry(dir int, name string, depth int) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	mark := len(w.path)
	if mark > 0 {
		w.path = append(w.path, '/')
	}
	w.path = append(w.path, name...)
	defer func() { w.path = w.path[:mark] }()
	rel := string(w.path)
	if w.n++; w.n > w.lim.Entries {
		return fmt.Errorf("read %q: %w (%d)", "/"+rel, ErrTooManyEntries, w.lim.Entries)
	}
	if len(rel) > w.lim.PathBytes {
		return fmt.Errorf("read %.64q...: %w (%d bytes)", "/"+rel, ErrPathTooLong, w.lim.PathBytes)
	}
	e := Entry{Rel: rel, Dir: dir, Name: name, FD: -1}
	for retry := swapRetries; ; retry-- {
		if err := unix.Fstatat(dir, name, &e.Stat, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil // gone since its directory was read
			}
			return fmt.Errorf("stat %q: %w", "/"+rel, err)
		}
		if e.Stat.Mode&unix.S_IFMT != unix.S_IFDIR {
			return w.fn(&e)
		}
		if depth+1 >= maxDepth {
			return fmt.Errorf("read %q: %w (%d levels)", "/"+rel, ErrTooDeep, maxDepth)
		}
		step(rel)
		fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		switch {
		case err == nil:
			return w.descend(&e, fd, depth)
		case errors.Is(err, unix.ENOENT):
			return nil
		case (errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)) && retry > 0:
			continue // swapped since the look: looked at again, as what it is now
		default:
			return fmt.Errorf("open %q: %w", "/"+rel, linkErr(dir, name, rel, err))
		}
	}
}

// descend calls fn with the directory e, opened as fd, then walks it.
func (w *treeWalk) descend(e *Entry, fd, depth int) error {
	d := os.NewFile(uintptr(fd), e.Rel)
	if err := unix.Fstat(fd, &e.Stat); err != nil {
		d.Close()
		return fmt.Errorf("stat %q: %w", "/"+e.Rel, err)
	}
	e.FD = fd
	if err := w.fn(e); err != nil {
		d.Close()
		return err
	}
	return w.dir(d, depth+1)
}
