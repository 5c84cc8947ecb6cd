// Package hostfile reads the host's copies of files that came out of a
// sandbox. They are data: a read never follows a symlink in the last
// component of the path, reads only regular files, and is capped in bytes.
// The directories above a capture are made by sandproof itself (downloads
// never create links), so the last component is the one a sandbox controls.
// Open is also how the host opens a host file a harness artifact chose (a
// library a glibc layer copies, runner/host/glibc): no link followed, no
// fifo or device read.
package hostfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrNotRegular means the path is a symlink, a device, a fifo or anything
// else that is not a regular file; it was not read.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge means the file held more than the cap; the read returned
// the first cap bytes.
var ErrTooLarge = errors.New("larger than the cap")

// Open opens path for reading without following a symlink (O_NOFOLLOW) and
// without blocking on a fifo (O_NONBLOCK, cleared for regular files by
// the kernel's semantics), then checks with fstat that it is a regular
// file.
func Open(path string) (*os.File, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("open %q: a symlink (not followed): %w", path, ErrNotRegular)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("open %q: %s: %w", path, fi.Mode().Type(), ErrNotRegular)
	}
	return f, nil
}

// ReadFile reads at most max bytes of the regular file at path. A larger
// file gives its first max bytes and an error wrapping ErrTooLarge.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %q: %w", path, err)
	}
	if int64(len(data)) > max {
		return data[:max], fmt.Errorf("read %q: %w (%d bytes)", path, ErrTooLarge, max)
	}
	return data, nil
}
