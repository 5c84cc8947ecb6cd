package artifact

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
)

// ErrRefused means an artifact breaks a rule of the host's readers (a
// name that leaves the tree, a link, a file over its cap, a loader that
// is none): it is refused as bad input.
var ErrRefused = errors.New("harness artifact refused")

// Limits bound what one Tree holds. Every field must be positive.
type Limits struct {
	// FileBytes caps one file.
	FileBytes int64
	// TotalBytes caps the files of the tree together, and what Untar
	// reads of an archive, entries it leaves out included.
	TotalBytes int64
	// Entries caps the files and directories written.
	Entries int
}

// Tree is a directory being filled from an artifact.
type Tree struct {
	dir     string
	root    *os.Root
	lim     Limits
	bytes   int64
	entries int
}

// Create makes the directory dir, which must not exist (its parent must),
// and returns the Tree that fills it under lim. Close it when done.
func Create(dir string, lim Limits) (*Tree, error) {
	if lim.FileBytes <= 0 || lim.TotalBytes <= 0 || lim.Entries <= 0 {
		return nil, fmt.Errorf("create %s: limits %+v: each must be positive", dir, lim)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	return &Tree{dir: dir, root: root, lim: lim}, nil
}

// Close releases the tree's directory; what was written stays.
func (t *Tree) Close() error { return t.root.Close() }

// Bytes is what the tree's files were declared to hold, together.
func (t *Tree) Bytes() int64 { return t.bytes }

// contentErrnos are the errnos an artifact's own names provoke in a tree
// only its entries write: a file where a directory is wanted or one in
// the way of a directory (EEXIST, ENOTDIR, EISDIR), a name the host's
// filesystem cannot hold (ENAMETOOLONG), an offset or size past what a
// file can have (EINVAL).
var contentErrnos = []syscall.Errno{syscall.EEXIST, syscall.ENOTDIR, syscall.EISDIR, syscall.ENAMETOOLONG, syscall.EINVAL}

// Refusal is err, an error met reading or writing an artifact's own
// bytes (an archive's stream, its entries, an ELF file's segments),
// wrapped in ErrRefused when the artifact caused it: an error carrying no
// errno (a bad header, a truncated or corrupt stream, a format error) or
// one of contentErrnos. Any other errno is the host's system failing (an
// I/O error, a full disk, a permission, a limit): err as it is, for
// sandproof's exit 3 (infrastructure: another try may succeed). Only a
// reader or writer of the artifact's content calls it; nil stays nil.
func Refusal(err error) error {
	var errno syscall.Errno
	if err == nil || errors.Is(err, ErrRefused) || errors.As(err, &errno) && !slices.Contains(contentErrnos, errno) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrRefused, err)
}

// checkName refuses a name that is not a path inside the tree, or that
// holds a control character.
func checkName(name string) error {
	if name == "." || !fs.ValidPath(name) {
		return fmt.Errorf("%w: entry %q is not a path inside the tree", ErrRefused, name)
	}
	if i := strings.IndexFunc(name, isControl); i >= 0 {
		return fmt.Errorf("%w: entry %q holds a control character (byte %d)", ErrRefused, name, i)
	}
	return nil
}

// isControl is a C0 control character or DEL: NUL, which no path may
// hold, and the newline, tab and escape that let a name forge a line of
// a listing or act on a terminal.
func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// entry counts one more entry against the cap.
func (t *Tree) entry(name string) error {
	if t.entries >= t.lim.Entries {
		return fmt.Errorf("%w: entry %q is one more than the cap of %d entries", ErrRefused, name, t.lim.Entries)
	}
	t.entries++
	return nil
}

// Mkdir makes the directory name, and those above it.
func (t *Tree) Mkdir(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := t.entry(name); err != nil {
		return err
	}
	if err := t.root.MkdirAll(name, 0o755); err != nil {
		return Refusal(fmt.Errorf("write %s: directory %q: %w", t.dir, name, err))
	}
	return nil
}

// WriteFile writes the regular file name (and the directories above it)
// from r, which must yield exactly size bytes; exec makes it 0755, else
// 0644. A regular file already there is replaced (a file a tar lists
// twice keeps its last copy); a directory there, or a file where one of
// the directories above it should be, is refused (Refusal).
func (t *Tree) WriteFile(name string, exec bool, size int64, r io.Reader) error {
	if err := checkName(name); err != nil {
		return err
	}
	switch {
	case size < 0:
		return fmt.Errorf("%w: %q declares %d bytes", ErrRefused, name, size)
	case size > t.lim.FileBytes:
		return fmt.Errorf("%w: %q is %d bytes, over the cap of %d per file", ErrRefused, name, size, t.lim.FileBytes)
	case size > t.lim.TotalBytes-t.bytes:
		return fmt.Errorf("%w: %q (%d bytes) takes the tree over its cap of %d bytes", ErrRefused, name, size, t.lim.TotalBytes)
	}
	if err := t.entry(name); err != nil {
		return err
	}
	t.bytes += size
	if dir := path.Dir(name); dir != "." {
		if err := t.root.MkdirAll(dir, 0o755); err != nil {
			return Refusal(fmt.Errorf("write %s: directory %q for %q: %w", t.dir, dir, name, err))
		}
	}
	if fi, err := t.root.Lstat(name); err == nil && fi.Mode().IsRegular() {
		if err := t.root.Remove(name); err != nil {
			return fmt.Errorf("write %s: %w", t.dir, err)
		}
	}
	mode := os.FileMode(0o644)
	if exec {
		mode = 0o755
	}
	f, err := t.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return Refusal(fmt.Errorf("write %s: file %q: %w", t.dir, name, err))
	}
	n, err := io.Copy(f, io.LimitReader(r, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %q: %w", t.dir, name, err)
	}
	if n < size {
		return fmt.Errorf("write %s: %q yields %d of its %d bytes: %w", t.dir, name, n, size, io.ErrUnexpectedEOF)
	}
	// One byte more than declared: the file grew, or lied about its size.
	if m, _ := io.ReadFull(r, make([]byte, 1)); m > 0 {
		return fmt.Errorf("%w: %q yields more than the %d bytes it declared", ErrRefused, name, size)
	}
	return nil
}
