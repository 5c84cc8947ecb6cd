package probe

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// Place copies the regular file src to dst inside the sandbox, mode 0755,
// owned by whoever runs the probe (root, in a session's seed): a session
// places warden from the owner's read-only volume into its bin/ this way
// instead of uploading its bytes for every case. The copy goes to a new
// file beside dst (O_EXCL) and is renamed over it, so dst is never written
// through a link; src is opened without following a link and without
// blocking (a fifo is refused). Place does not vouch for the bytes: the
// caller hashes dst afterwards (the snapshot's markers), the placed file,
// never src.
func Place(src, dst string) error {
	if !filepath.IsAbs(src) || !filepath.IsAbs(dst) {
		return fmt.Errorf("place %q at %q: want absolute paths", src, dst)
	}
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("place %q: %w", src, err)
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil {
		return fmt.Errorf("place %q: %w", src, err)
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("place %q: not a regular file (%s)", src, fi.Mode().Type())
	}
	out, err := os.CreateTemp(filepath.Dir(dst), ".probe-place-*")
	if err != nil {
		return fmt.Errorf("place %q: %w", dst, err)
	}
	defer os.Remove(out.Name()) // a no-op once renamed
	_, err = io.Copy(out, in)
	if err == nil {
		// CreateTemp's 0600 is widened explicitly: the umask plays no part.
		err = out.Chmod(0o755)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(out.Name(), dst)
	}
	if err != nil {
		return fmt.Errorf("place %q at %q: %w", src, dst, err)
	}
	return nil
}
