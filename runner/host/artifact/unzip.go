package artifact

import (
	"archive/zip"
	"fmt"
	"io"
	"math"
	"strings"
)

// Unzip writes the directories and regular files of the zip archive r
// (size bytes) into t, as Untar does a tar stream: name maps an entry's
// name (without a directory's trailing "/") to its path in the tree, or
// to "" to leave it out; every entry's declared size counts against the
// tree's TotalBytes before a byte of it is inflated, left out or not, so
// a zip bomb is refused at what it declares (and an entry that inflates
// to more than it declares is refused by WriteFile). An entry whose mode
// is anything but a directory or a regular file (a symbolic link, a
// device) is refused, naming it. A wheel is a zip (PEP 427).
func Unzip(r io.ReaderAt, size int64, t *Tree, name func(string) string) error {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return Refusal(fmt.Errorf("read zip: %w", err))
	}
	var read int64
	for _, f := range zr.File {
		declared := f.UncompressedSize64
		if declared > math.MaxInt64 || int64(declared) > t.lim.TotalBytes-read {
			return fmt.Errorf("%w: entry %q (%d bytes) takes the archive over its cap of %d bytes", ErrRefused, f.Name, declared, t.lim.TotalBytes)
		}
		read += int64(declared)
		if err := unzipEntry(f, t, name); err != nil {
			return Refusal(err)
		}
	}
	return nil
}

func unzipEntry(f *zip.File, t *Tree, name func(string) string) error {
	mode := f.Mode()
	isDir := strings.HasSuffix(f.Name, "/") || mode.IsDir()
	if !isDir && mode.Type() != 0 {
		return fmt.Errorf("%w: entry %q is not a file or directory (mode %v)", ErrRefused, f.Name, mode.Type())
	}
	rel := name(strings.TrimSuffix(f.Name, "/"))
	if rel == "" {
		return nil
	}
	if isDir {
		return t.Mkdir(rel)
	}
	rc, err := f.Open()
	if err != nil {
		return fmt.Errorf("%w: entry %q: %v", ErrRefused, f.Name, err)
	}
	defer rc.Close()
	if err := t.WriteFile(rel, mode&0o111 != 0, int64(f.UncompressedSize64), rc); err != nil {
		return err
	}
	// The zip reader checks an entry's CRC, and that it holds no more than
	// it declares, only when it is read to its end.
	if n, err := rc.Read(make([]byte, 1)); n > 0 || err != io.EOF {
		return fmt.Errorf("%w: entry %q does not hold what its header declares (%d bytes, crc %08x): %v", ErrRefused, f.Name, f.UncompressedSize64, f.CRC32, err)
	}
	return nil
}
