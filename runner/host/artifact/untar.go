package artifact

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// Untar writes the directories and regular files of the tar stream r
// into t. name maps an entry's name (without the "/" that ends a
// directory's) to its path in the tree, or to "" to leave the entry out; every entry's declared size counts against the
// tree's TotalBytes before its bytes are read, left out or not. Metadata
// entries (PAX, GNU long names) are the tar reader's; any other kind of
// entry (a symbolic or hard link, a device, a fifo, a sparse file) is
// refused, naming it. The stream is the artifact's: what reading it or
// writing its entries fails with is refused unless the host's system
// failed (Refusal).
func Untar(r io.Reader, t *Tree, name func(string) string) error {
	return untar(r, t, name, nil)
}

// UntarCopyingLinks is Untar that also takes a symbolic link of the
// archive to a regular file the same archive wrote into t (a shared
// library's soname, python3 -> python3.13): the link is written as a
// copy of that file, once the stream has ended, so the tree still holds
// no link. A link is refused, naming it, when its target is absolute,
// climbs out of the archive's root, is left out by name, or is not a
// regular file this archive wrote (a directory, a file of another
// archive, nothing); a chain of links to such a file is followed. Each
// copy counts against the tree's caps like any file.
func UntarCopyingLinks(r io.Reader, t *Tree, name func(string) string) error {
	l := &links{written: map[string]bool{}}
	if err := untar(r, t, name, l); err != nil {
		return err
	}
	return l.copy(t)
}

// links are the symbolic links an archive holds, kept until its stream
// ends: each link's tree name to its target's, and the tree names of the
// regular files the archive wrote.
type links struct {
	pending map[string]string
	order   []string
	written map[string]bool
}

// add records the link entry h (tree name rel) of an archive.
func (l *links) add(t *Tree, h *tar.Header, rel string, name func(string) string) error {
	target := h.Linkname
	if path.IsAbs(target) {
		return fmt.Errorf("%w: link %q points to the absolute path %q", ErrRefused, h.Name, target)
	}
	target = path.Join(path.Dir(strings.TrimSuffix(h.Name, "/")), target)
	if target == ".." || strings.HasPrefix(target, "../") {
		return fmt.Errorf("%w: link %q points to %q, out of the archive", ErrRefused, h.Name, h.Linkname)
	}
	to := name(target)
	if to == "" {
		return fmt.Errorf("%w: link %q points to %q, which the tree leaves out", ErrRefused, h.Name, target)
	}
	if err := checkName(to); err != nil {
		return err
	}
	if len(l.order) >= t.lim.Entries-t.entries {
		return fmt.Errorf("%w: link %q is one more than the cap of %d entries", ErrRefused, h.Name, t.lim.Entries)
	}
	if l.pending == nil {
		l.pending = map[string]string{}
	}
	if _, ok := l.pending[rel]; !ok {
		l.order = append(l.order, rel)
	}
	l.pending[rel] = to
	delete(l.written, rel)
	return nil
}

// copy writes each pending link as a copy of its target, in passes, so a
// link to a link waits for the first to be written.
func (l *links) copy(t *Tree) error {
	for len(l.order) > 0 {
		var left []string
		for _, rel := range l.order {
			to, ok := l.pending[rel]
			if !ok { // a file of its name came after the link
				continue
			}
			if !l.written[to] {
				left = append(left, rel)
				continue
			}
			if err := t.copyFile(rel, to); err != nil {
				return Refusal(err)
			}
			l.written[rel] = true
		}
		if len(left) == len(l.order) {
			return fmt.Errorf("%w: link %q points to %q, not a regular file of the archive", ErrRefused, left[0], l.pending[left[0]])
		}
		l.order = left
	}
	return nil
}

// copyFile writes the regular file name as a copy of the tree's regular
// file from, with its executable bits.
func (t *Tree) copyFile(name, from string) error {
	fi, err := t.root.Lstat(from)
	if err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %q is not a regular file (%v)", ErrRefused, from, fi.Mode().Type())
	}
	f, err := t.root.Open(from)
	if err != nil {
		return fmt.Errorf("copy %s: %w", from, err)
	}
	defer f.Close()
	return t.WriteFile(name, fi.Mode()&0o111 != 0, fi.Size(), f)
}

func untar(r io.Reader, t *Tree, name func(string) string, l *links) error {
	tr := tar.NewReader(r)
	var read int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return Refusal(fmt.Errorf("read tar: %w", err))
		}
		if h.Size > t.lim.TotalBytes-read {
			return fmt.Errorf("%w: entry %q (%d bytes) takes the archive over its cap of %d bytes", ErrRefused, h.Name, h.Size, t.lim.TotalBytes)
		}
		read += max(h.Size, 0)
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		rel := name(strings.TrimSuffix(h.Name, "/"))
		if rel == "" {
			continue
		}
		if err := entryTo(t, tr, h, rel, name, l); err != nil {
			return Refusal(err)
		}
	}
}

// entryTo writes the entry h, whose tree name is rel.
func entryTo(t *Tree, tr *tar.Reader, h *tar.Header, rel string, name func(string) string, l *links) error {
	switch {
	case h.Typeflag == tar.TypeDir:
		return t.Mkdir(rel)
	case h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeRegA:
		if err := t.WriteFile(rel, h.Mode&0o111 != 0, h.Size, tr); err != nil {
			return err
		}
		if l != nil {
			l.written[rel] = true
			delete(l.pending, rel)
		}
		return nil
	case h.Typeflag == tar.TypeSymlink && l != nil:
		return l.add(t, h, rel, name)
	}
	return fmt.Errorf("%w: entry %q is not a file or directory (type %q)", ErrRefused, h.Name, h.Typeflag)
}
