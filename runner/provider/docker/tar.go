package docker

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandproof/sandproof/runner/provider"
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

// tarEntries streams a tar of the entries in order, each as tarFile or
// tarDir would write it alone (no implied parent entries).
func tarEntries(entries []provider.Entry) *io.PipeReader {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		var err error
		for _, e := range entries {
			if err = writeEntry(tw, e); err != nil {
				break
			}
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

func writeEntry(tw *tar.Writer, e provider.Entry) error {
	h := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     strings.TrimPrefix(path.Clean(e.Path), "/"),
		Mode:     int64(e.Mode.Perm()),
		Uid:      e.UID,
		Gid:      e.GID,
		ModTime:  time.Now(),
		Format:   tar.FormatPAX,
	}
	if e.Dir {
		h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		return tw.WriteHeader(h)
	}
	var data io.Reader = bytes.NewReader(e.Data)
	h.Size = int64(len(e.Data))
	if e.Data == nil && e.HostPath != "" {
		f, err := os.Open(e.HostPath)
		if err != nil {
			return fmt.Errorf("upload %q: %w", e.HostPath, err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return fmt.Errorf("upload %q: %w", e.HostPath, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("upload %q: not a regular file", e.HostPath)
		}
		data, h.Size = f, fi.Size()
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	n, err := io.Copy(tw, data)
	if err == nil && n != h.Size {
		err = fmt.Errorf("upload %q: read %d bytes, want %d", e.Path, n, h.Size)
	}
	return err
}
