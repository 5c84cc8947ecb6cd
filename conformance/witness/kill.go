package witness

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Kill sends sig to the process id names, never to a process that reused
// its pid: pidfd_open pins whatever holds the pid, the start time is
// re-read, and only then is the signal sent through the pidfd. Where the
// kernel has no pidfds (before Linux 5.3, or a seccomp filter that refuses
// them) it falls back to kill(2) right after the same re-check, which
// leaves the narrow window pidfds close. A gone process (ESRCH, or its pid
// now names another process) is not an error.
func Kill(id ID, sig syscall.Signal) error {
	fd, err := unix.PidfdOpen(id.PID, 0)
	switch {
	case errors.Is(err, unix.ESRCH):
		return nil
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
		return killPlain(id, sig)
	case err != nil:
		return fmt.Errorf("pidfd_open %d: %w", id.PID, err)
	}
	defer unix.Close(fd)
	if _, err := Proc.Lookup(id); err != nil {
		return goneOr(err)
	}
	err = unix.PidfdSendSignal(fd, sig, nil, 0)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		return killPlain(id, sig)
	}
	if err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("signal %v: %w", id, err)
	}
	return nil
}

func killPlain(id ID, sig syscall.Signal) error {
	if _, err := Proc.Lookup(id); err != nil {
		return goneOr(err)
	}
	if err := unix.Kill(id.PID, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("signal %v: %w", id, err)
	}
	return nil
}

// goneOr maps ErrGone to nil: the process the caller meant is not there.
func goneOr(err error) error {
	if errors.Is(err, ErrGone) {
		return nil
	}
	return fmt.Errorf("check identity before signal: %w", err)
}
