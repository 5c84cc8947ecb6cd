package witness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

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

// KillNamedChildren ends processes that do not hold still: every live
// child of the given parents (read from the kernel's children lists,
// PROC/PID/task/*/children) named comm is sent SIGSTOP and then SIGKILL, by
// identity, until quiet readings in a row find none or limit has passed.
// An escaped fork-and-exit hopper is always a direct child of the nearest
// subreaper (or pid 1), and a full /proc scan is too slow to meet it; its
// children list is not. It returns how many processes it signalled.
func KillNamedChildren(comm string, parents []int, quiet int, limit time.Duration) int {
	end := time.Now().Add(limit)
	n := 0
	for calm := 0; calm < quiet && time.Now().Before(end); {
		calm++
		for _, parent := range parents {
			tasks, _ := filepath.Glob(fmt.Sprintf("%s/%d/task/*/children", string(Proc), parent))
			for _, t := range tasks {
				data, _ := os.ReadFile(t)
				for _, f := range strings.Fields(string(data)) {
					pid, err := strconv.Atoi(f)
					if err != nil {
						continue
					}
					st, err := Proc.ReadStat(pid)
					if err != nil || st.Comm != comm || st.Dead() {
						continue
					}
					Kill(st.ID(), unix.SIGSTOP)
					Kill(st.ID(), unix.SIGKILL)
					n++
					calm = 0
				}
			}
		}
	}
	return n
}
