package soak

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The soak judges warden from /proc with its own reader: it shares no code
// with runner/proc, so a parsing bug in warden cannot hide a survivor here.

// ID names one process for its whole life: a pid alone can be reused.
type ID struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
}

func (id ID) String() string { return fmt.Sprintf("%d@%d", id.PID, id.StartTime) }

// stat is the part of /proc/PID/stat the soak looks at.
type stat struct {
	comm      string
	state     byte
	startTime uint64
}

// errGone means no process holds the pid (or another process now does).
var errGone = errors.New("process gone")

// readStat reads /proc/PID/stat. The name runs to the LAST ')' because a
// process chooses it freely:
//
//	4242 (x) S 1 1 $(>p)) S 4241 4242 4242 0 -1 4194304 ... 123456 ...
//	     ^name: "x) S 1 1 $(>p)" ^state                    ^starttime (22)
func readStat(procRoot string, pid int) (stat, error) {
	data, err := os.ReadFile(procRoot + "/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) || (err == nil && len(data) == 0) {
		return stat{}, errGone
	}
	if err != nil {
		return stat{}, err
	}
	open, closing := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 1 || closing < open {
		return stat{}, fmt.Errorf("invalid stat data: %q", data)
	}
	f := strings.Fields(string(data[closing+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return stat{}, fmt.Errorf("invalid stat data: %q", data)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return stat{}, fmt.Errorf("invalid stat data: %q", data)
	}
	return stat{comm: string(data[open+1 : closing]), state: f[0][0], startTime: start}, nil
}

// lookup returns the stat of the process id names, or errGone.
func lookup(procRoot string, id ID) (stat, error) {
	st, err := readStat(procRoot, id.PID)
	if err != nil {
		return stat{}, err
	}
	if st.startTime != id.StartTime {
		return stat{}, errGone
	}
	return st, nil
}

// alive reports whether id still runs: a zombie is dead (the stop rules
// count it so). An unreadable stat counts as alive, so a reading error can
// never turn into a clean verdict.
func alive(procRoot string, id ID) bool {
	st, err := lookup(procRoot, id)
	if errors.Is(err, errGone) {
		return false
	}
	if err != nil {
		return true
	}
	return st.state != 'Z' && st.state != 'X' && st.state != 'x'
}

// kill SIGKILLs the process id names and never one that reused its pid:
// pidfd_open pins the pid, the start time is re-read, then the signal goes
// through the pidfd. A gone process is not an error.
func kill(id ID) error {
	fd, err := unix.PidfdOpen(id.PID, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", id.PID, err)
	}
	defer unix.Close(fd)
	if _, err := lookup("/proc", id); err != nil {
		return nil
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill %v: %w", id, err)
	}
	return nil
}

// reapZombie collects id if it is a zombie (the soak is a child subreaper,
// so supervisors and whatever outlives them come back to it). It waits for
// that pid only while the zombie holds it, so it can never take the status
// of a command the soak runs through os/exec; a process that is not our
// child is left alone (ECHILD).
func reapZombie(id ID) {
	st, err := lookup("/proc", id)
	if err != nil || st.state != 'Z' {
		return
	}
	var ws unix.WaitStatus
	unix.Wait4(id.PID, &ws, unix.WNOHANG, nil)
}
