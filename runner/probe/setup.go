package probe

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// SetupOptions is what the owner prepares in one go before a harness runs
// (contract §7.1): directories and marker files, owned by the task
// user.
type SetupOptions struct {
	// Dirs are made in order with mode 0755 and owner UID:GID when missing;
	// missing ancestors are made 0755 root, and an existing directory is
	// left as it is.
	Dirs []string
	// Markers are written with fresh random content, mode 0644, owner
	// UID:GID; their directory must exist or be in Dirs.
	Markers  []string
	UID, GID int
	// Secret, when set, is a file written with SecretData, mode 0400 and
	// owner UID:GID, after the dirs and markers: the case's challenge,
	// written in the same run so it needs no transfer of its own (every
	// engine round trip costs more than the bytes). Whatever is at its
	// path first is removed, never followed.
	Secret     string
	SecretData []byte
}

// Setup makes the directories and writes the markers. It never follows a
// symlink at a marker's path and refuses a non-directory where a directory
// should be.
func Setup(o SetupOptions) error {
	for _, d := range o.Dirs {
		if err := mkdirOwned(d, o.UID, o.GID); err != nil {
			return err
		}
	}
	for _, m := range o.Markers {
		if err := writeMarker(m, o.UID, o.GID); err != nil {
			return err
		}
	}
	if o.Secret != "" {
		return writeSecret(o.Secret, o.SecretData, o.UID, o.GID)
	}
	return nil
}

// writeSecret replaces whatever is at p (a file or a link, as an
// archive's extraction would) with a new file holding data, mode 0400,
// owned by uid:gid. O_EXCL after the removal: a link made in between is
// refused, not followed.
func writeSecret(p string, data []byte, uid, gid int) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("setup secret %q: not absolute", p)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("setup secret %q: %w", p, err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o400)
	if err != nil {
		return fmt.Errorf("setup secret %q: %w", p, err)
	}
	if err := finishOwned(f, data, 0o400, uid, gid); err != nil {
		return fmt.Errorf("setup secret %q: %w", p, err)
	}
	return nil
}

// finishOwned writes data to the file setup just created, sets its mode
// explicitly (the create honours the umask) and its owner, and closes it;
// the first error wins.
func finishOwned(f *os.File, data []byte, mode os.FileMode, uid, gid int) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Chown(uid, gid)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func mkdirOwned(d string, uid, gid int) error {
	if !filepath.IsAbs(d) {
		return fmt.Errorf("setup dir %q: not absolute", d)
	}
	d = filepath.Clean(d)
	fi, err := os.Lstat(d)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("setup dir %q: exists and is not a directory (%s)", d, fi.Mode().Type())
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("setup dir %q: %w", d, err)
	}
	if parent := filepath.Dir(d); parent != d {
		if err := mkdirOwned(parent, 0, 0); err != nil {
			return err
		}
	}
	if err := os.Mkdir(d, 0o755); err != nil {
		return fmt.Errorf("setup dir %q: %w", d, err)
	}
	// Mkdir honours the umask; the mode is set explicitly.
	if err := os.Chmod(d, 0o755); err != nil {
		return fmt.Errorf("setup dir %q: %w", d, err)
	}
	if err := os.Lchown(d, uid, gid); err != nil {
		return fmt.Errorf("setup dir %q: %w", d, err)
	}
	return nil
}

func writeMarker(p string, uid, gid int) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("setup marker %q: not absolute", p)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("setup marker %q: %w", p, err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("setup marker %q: %w", p, err)
	}
	if err := finishOwned(f, []byte("owner marker "+hex.EncodeToString(b[:])+"\n"), 0o644, uid, gid); err != nil {
		return fmt.Errorf("setup marker %q: %w", p, err)
	}
	return nil
}
