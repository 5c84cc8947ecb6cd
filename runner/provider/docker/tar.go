package docker

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// tarFile streams a tar holding one regular file at p (relative to "/").
// Parents are not in the archive on purpose: the engine creates the missing
// ones and a directory entry would reset an existing directory's mode and
// owner.
func tarFile(p string, data io.Reader, size int64, mode os.FileMode, uid, gid int) *io.PipeReader {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg,
			Name:     strings.TrimPrefix(path.Clean(p), "/"),
			Mode:     int64(mode.Perm()),
			Size:     size,
			Uid:      uid,
			Gid:      gid,
			ModTime:  time.Now(),
			Format:   tar.FormatPAX,
		})
		if err == nil {
			var n int64
			n, err = io.Copy(tw, data)
			if err == nil && n != size {
				err = fmt.Errorf("upload %q: read %d bytes, want %d", p, n, size)
			}
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// tarDir streams a tar holding one directory entry.
func tarDir(p string, mode os.FileMode, uid, gid int) *io.PipeReader {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeDir,
			Name:     strings.TrimPrefix(path.Clean(p), "/") + "/",
			Mode:     int64(mode.Perm()),
			Uid:      uid,
			Gid:      gid,
			ModTime:  time.Now(),
			Format:   tar.FormatPAX,
		})
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// untarTo unpacks the engine's archive of one path at dst: the archive's
// first component (the path's base name) becomes dst itself. Entries that
// would leave dst are refused; links are recreated, never followed; devices
// and fifos are skipped (nothing to capture in them).
func untarTo(r io.Reader, dst string) error {
	tr := tar.NewReader(r)
	var top string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if top == "" {
				return fmt.Errorf("unpack into %q: empty archive", dst)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("unpack into %q: %w", dst, err)
		}
		name := path.Clean(h.Name)
		first, rest, _ := strings.Cut(name, "/")
		if top == "" {
			top = first
		}
		if first != top || name == ".." || strings.HasPrefix(rest, "../") || strings.Contains(name, "/../") {
			return fmt.Errorf("unpack into %q: entry %q leaves the archive root", dst, h.Name)
		}
		target := filepath.Join(dst, filepath.FromSlash(rest))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, os.FileMode(h.Mode).Perm()|0o700); err != nil {
				return fmt.Errorf("unpack %q: %w", h.Name, err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return fmt.Errorf("unpack %q: %w", h.Name, err)
			}
			f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, os.FileMode(h.Mode).Perm()|0o600)
			if err != nil {
				return fmt.Errorf("unpack %q: %w", h.Name, err)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("unpack %q: %w", h.Name, err)
			}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return fmt.Errorf("unpack %q: %w", h.Name, err)
			}
			if err := os.Symlink(h.Linkname, target); err != nil {
				return fmt.Errorf("unpack %q: %w", h.Name, err)
			}
		}
	}
}
