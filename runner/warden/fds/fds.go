// Package fds keeps descriptors from leaking into programs warden starts.
//
// A process inherits every descriptor its parent left without close-on-exec,
// and Go's os/exec only guarantees that for descriptors Go itself opened. A
// runner started by a shell, a container engine or a test harness may hold
// pipes and files of theirs; if the harness inherits a pipe's write end, its
// reader never sees EOF, and a file held open can leak what it contains. So
// warden marks everything from 3 up close-on-exec before it starts anything.
package fds

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// procFD lists the process's own descriptors; a variable so tests can point
// the fallback at a directory that does not exist.
var procFD = "/proc/self/fd"

// CloexecFrom marks every open descriptor >= minFD close-on-exec. It uses
// close_range(2) with CLOSE_RANGE_CLOEXEC (Linux 5.11) and falls back to
// walking /proc/self/fd, then to trying every number below RLIMIT_NOFILE,
// for older kernels and seccomp filters that refuse the call.
func CloexecFrom(minFD int) error {
	if minFD < 0 {
		return fmt.Errorf("mark descriptors close-on-exec from %d: negative descriptor", minFD)
	}
	err := unix.CloseRange(uint(minFD), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("close_range from %d: %w", minFD, err)
	}
	return cloexecFallback(minFD)
}

// cloexecFallback is CloexecFrom without close_range.
func cloexecFallback(minFD int) error {
	err := cloexecProc(minFD)
	if err == nil {
		return nil
	}
	// No /proc (a bare chroot, a sandbox that hides it): try every number.
	var lim unix.Rlimit
	if rerr := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); rerr != nil {
		return fmt.Errorf("mark descriptors close-on-exec: %w (and getrlimit: %v)", err, rerr)
	}
	max := lim.Cur
	if max > 1<<20 {
		max = 1 << 20
	}
	for fd := uint64(minFD); fd < max; fd++ {
		if serr := setCloexec(int(fd)); serr != nil && !errors.Is(serr, unix.EBADF) {
			return fmt.Errorf("mark descriptor %d close-on-exec: %w", fd, serr)
		}
	}
	return nil
}

// cloexecProc walks procFD. The directory's own descriptor is among those
// listed; it is marked too, which is harmless since it is closed right after.
// Raw syscalls keep the listing out of Go's poller, which would open
// descriptors of its own while we walk.
func cloexecProc(minFD int) error {
	dfd, err := unix.Open(procFD, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %q: %w", procFD, err)
	}
	defer unix.Close(dfd)
	buf := make([]byte, 8192)
	for {
		n, err := unix.ReadDirent(dfd, buf)
		if err != nil {
			return fmt.Errorf("read %q: %w", procFD, err)
		}
		if n == 0 {
			return nil
		}
		_, _, names := syscall.ParseDirent(buf[:n], -1, nil)
		for _, name := range names {
			fd, err := strconv.Atoi(name)
			if err != nil || fd < minFD || fd == dfd {
				continue
			}
			if err := setCloexec(fd); err != nil && !errors.Is(err, unix.EBADF) {
				return fmt.Errorf("mark descriptor %d close-on-exec: %w", fd, err)
			}
		}
	}
}

func setCloexec(fd int) error {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		return err
	}
	if flags&unix.FD_CLOEXEC != 0 {
		return nil
	}
	_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC)
	return err
}
