// Package atomicfile publishes files so that a reader, or the machine after
// a crash, sees a file's old content or its new one, never a part: write a
// temporary file in the same directory, fsync it, rename it over the name,
// fsync the directory. warden links it, so it uses the standard library
// only.
package atomicfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write publishes data as path with mode perm (not masked by the umask):
// on error path is left as it was and the temporary file is removed.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteFunc(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFunc is Write of what render writes. render's error is returned as
// it is; the others are wrapped with the path.
func WriteFunc(path string, perm os.FileMode, render func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("create temporary file for %q: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 64<<10)
	if err := render(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("write %q: %w", path, err)
	}
	return nil
}

// WriteSynced writes data at the start of the file path opened with flag
// and perm (masked by the umask), cuts it to len(data), fsyncs and closes
// it. It is the first half of a publication whose second half (a rename
// or a link, then SyncDir) the caller owns; with flag os.O_WRONLY it
// overwrites a file whose blocks are already allocated.
func WriteSynced(path string, data []byte, flag int, perm os.FileMode) error {
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Truncate(int64(len(data))); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir is SyncDir; the tests watch it through this variable.
var syncDir = SyncDir

// SyncDir fsyncs the directory dir, so a rename, link or create in it
// survives a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory %q: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %q: %w", dir, err)
	}
	return nil
}
