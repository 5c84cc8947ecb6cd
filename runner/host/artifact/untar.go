package artifact

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
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
		switch h.Typeflag {
		case tar.TypeDir:
			err = t.Mkdir(rel)
		case tar.TypeReg, tar.TypeRegA:
			err = t.WriteFile(rel, h.Mode&0o111 != 0, h.Size, tr)
		default:
			err = fmt.Errorf("%w: entry %q is not a file or directory (type %q)", ErrRefused, h.Name, h.Typeflag)
		}
		if err != nil {
			return Refusal(err)
		}
	}
}
