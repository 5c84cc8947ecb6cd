package provider

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ErrReadCap stops an unpack that read more than FetchLimits.ReadBytes. A
// Fetch that ends on it is not failed: what was written stays and the
// answer records where it stopped.
var ErrReadCap = errors.New("read cap reached")

// ErrEntryCap stops an unpack whose entries used up FetchLimits.Entries. It
// is an ErrReadCap (errors.Is): the Fetch is not failed either.
var ErrEntryCap = fmt.Errorf("entry cap reached: %w", ErrReadCap)

// capReader counts what is read and fails past the cap.
type capReader struct {
	r    io.Reader
	n    int64
	max  int64
	over bool
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n >= c.max {
		c.over = true
		return 0, ErrReadCap
	}
	if int64(len(p)) > c.max-c.n {
		p = p[:c.max-c.n]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Untar unpacks the archive of one path a sandbox gave (the engine's or
// the session agent's) at dst: the archive's first component (the path's
// base name) becomes dst itself. The archive
// is data from the sandbox: entries that would leave dst are refused;
// symlinks and hard links are recorded in the answer, never created (a
// later host read cannot follow what is not there); devices and fifos are
// recorded and skipped; a regular file is written up to lim.FileBytes and
// what lim.Budget grants, decided on the header's (apparent) size before
// a byte is written, the rest skipped and recorded. Every entry takes one
// of lim.Entries. Past lim.ReadBytes or the entries the unpack stops,
// records where, and returns ErrReadCap (ErrEntryCap). An entry a
// confining reader marked denied (PAXWithheld) is recorded, not created;
// a link it met above the path (PAXLinkAt) is recorded at its own path.
// sbPath is the sandbox path the archive holds, for the record.
func Untar(r io.Reader, dst, sbPath string, lim FetchLimits) (Fetched, error) {
	lim = lim.WithDefaults()
	var got Fetched
	cr := &capReader{r: r, max: lim.ReadBytes}
	tr := tar.NewReader(cr)
	var top, cur string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if top == "" {
				return got, fmt.Errorf("unpack into %q: empty archive", dst)
			}
			return got, nil
		}
		if cr.over {
			got.Add(Withheld{Path: cur, Kind: WithheldStopped})
			return got, ErrReadCap
		}
		if err != nil {
			return got, fmt.Errorf("unpack into %q: %w", dst, err)
		}
		name := path.Clean(h.Name)
		first, rest, _ := strings.Cut(name, "/")
		if top == "" {
			top = first
		}
		if first != top || name == ".." || strings.HasPrefix(rest, "../") || strings.Contains(name, "/../") {
			return got, fmt.Errorf("unpack into %q: entry %q leaves the archive root", dst, h.Name)
		}
		cur = sbPath
		if rest != "" {
			cur = path.Join(sbPath, rest)
		}
		if lim.Entries.Take(1) == 0 {
			got.Add(Withheld{Path: cur, Kind: WithheldStopped})
			return got, ErrEntryCap
		}
		got.Entries++
		target := filepath.Join(dst, filepath.FromSlash(rest))
		if h.PAXRecords[PAXWithheld] == WithheldDenied && h.Typeflag != tar.TypeReg {
			got.Add(Withheld{Path: cur, Kind: WithheldDenied})
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, os.FileMode(h.Mode).Perm()|0o700); err != nil {
				return got, fmt.Errorf("unpack %q: %w", h.Name, err)
			}
		case tar.TypeReg:
			if err := untarFile(tr, h, target, cur, lim, cr, &got); err != nil {
				return got, err
			}
		case tar.TypeSymlink:
			at := cur
			if a := h.PAXRecords[PAXLinkAt]; rest == "" && a != "" && strings.HasPrefix(sbPath+"/", path.Clean(a)+"/") {
				at = path.Clean(a) // a component of sbPath (or sbPath): the link's own path
			}
			got.Add(Withheld{Path: at, Kind: WithheldSymlink, Target: h.Linkname})
		case tar.TypeLink:
			got.Add(Withheld{Path: cur, Kind: WithheldHardlink, Target: h.Linkname})
		default:
			got.Add(Withheld{Path: cur, Kind: WithheldSpecial})
		}
	}
}

// untarFile writes the regular file h, tr's current entry, at target
// (cur in the sandbox), cut at lim.FileBytes and at what is left of
// lim.Budget, and records in got what it cut; past the read cap (cr) it
// stops with ErrReadCap.
func untarFile(tr *tar.Reader, h *tar.Header, target, cur string, lim FetchLimits, cr *capReader, got *Fetched) error {
	want := min(h.Size, lim.FileBytes)
	n := lim.Budget.Take(want)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("unpack %q: %w", h.Name, err)
	}
	// A file from an earlier download is replaced, never
	// written through (O_EXCL|O_NOFOLLOW after the remove).
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("unpack %q: %w", h.Name, err)
	}
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, os.FileMode(h.Mode).Perm()|0o600)
	if err != nil {
		return fmt.Errorf("unpack %q: %w", h.Name, err)
	}
	w, err := io.CopyN(f, tr, n)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	got.Files++
	got.Bytes += w
	if w < h.Size {
		kind := WithheldTruncated
		if n < want {
			kind = WithheldStopped // the budget ran out
		}
		got.Add(Withheld{Path: cur, Kind: kind, Size: h.Size, Written: w})
	}
	if cr.over {
		got.Add(Withheld{Path: cur, Kind: WithheldStopped, Size: h.Size, Written: w})
		return ErrReadCap
	}
	if err != nil {
		return fmt.Errorf("unpack %q: %w", h.Name, err)
	}
	return nil
}

// TarEntries streams a tar of the entries in order, each as Upload or
// Mkdir would be (no implied parent entries).
func TarEntries(entries []Entry) *io.PipeReader {
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

func writeEntry(tw *tar.Writer, e Entry) error {
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

// WriteTarFile writes a tar holding one regular file at p (relative to
// "/") with size bytes of data. Parents are not in the archive on purpose:
// the receiver creates the missing ones, and a directory entry would reset
// an existing directory's mode and owner.
func WriteTarFile(w io.Writer, p string, data io.Reader, size int64, mode os.FileMode, uid, gid int) error {
	tw := tar.NewWriter(w)
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
	if err != nil {
		return err
	}
	n, err := io.Copy(tw, data)
	if err == nil && n != size {
		err = fmt.Errorf("upload %q: read %d bytes, want %d", p, n, size)
	}
	if err != nil {
		return err
	}
	return tw.Close()
}
