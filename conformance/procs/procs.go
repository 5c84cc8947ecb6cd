// Package procs holds the conformance suite's process helpers: reading the
// real /proc by (pid, start time), killing by identity, the adversary
// fixture's record file, running warden, and parsing receipts strictly
// against SPEC.md section 3. It shares no code with warden (runner/...), so
// a bug in warden's /proc parsing cannot hide itself in the checks.
package procs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/onsi/ginkgo/v2"
	"golang.org/x/sys/unix"
)

// ID names one process for its whole life: a pid alone can be reused.
type ID struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
}

func (id ID) String() string { return fmt.Sprintf("%d@%d", id.PID, id.StartTime) }

// Stat is the part of /proc/PID/stat the suite looks at.
type Stat struct {
	PID, PPID, PGID, SID int
	Comm                 string
	State                byte
	StartTime            uint64
}

// ID returns the stat's identity.
func (s Stat) ID() ID { return ID{s.PID, s.StartTime} }

// Dead is true for zombies: the stop rules count them as dead.
func (s Stat) Dead() bool { return s.State == 'Z' || s.State == 'X' || s.State == 'x' }

// ErrGone means no process holds the pid.
var ErrGone = errors.New("process gone")

// ReadStat reads /proc/PID/stat. The name runs to the LAST ')' because a
// process chooses it freely:
//
//	4242 (x) S 1 1 $(>p)) S 4241 4242 4242 0 -1 4194304 ... 123456 ...
//	     ^name: "x) S 1 1 $(>p)" ^state ^ppid ^pgrp ^sid     ^starttime (22)
func ReadStat(pid int) (Stat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) || (err == nil && len(data) == 0) {
		return Stat{}, ErrGone
	}
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(data)
}

// ParseStat parses a stat line; nothing in it is evaluated.
func ParseStat(data []byte) (Stat, error) {
	open, closing := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 1 || closing < open {
		return Stat{}, fmt.Errorf("invalid stat data: %q", data)
	}
	var s Stat
	var err error
	if s.PID, err = strconv.Atoi(strings.TrimSpace(string(data[:open]))); err != nil {
		return Stat{}, fmt.Errorf("invalid stat data: %q", data)
	}
	s.Comm = string(data[open+1 : closing])
	f := strings.Fields(string(data[closing+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("invalid stat data: %q", data)
	}
	s.State = f[0][0]
	ints := []*int{&s.PPID, &s.PGID, &s.SID}
	for i, p := range ints {
		if *p, err = strconv.Atoi(f[1+i]); err != nil {
			return Stat{}, fmt.Errorf("invalid stat data: %q", data)
		}
	}
	if s.StartTime, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("invalid stat data: %q", data)
	}
	return s, nil
}

// Lookup returns the stat of the process named by id, or ErrGone when the
// pid is free or now names another process.
func Lookup(id ID) (Stat, error) {
	st, err := ReadStat(id.PID)
	if err != nil {
		return Stat{}, err
	}
	if st.StartTime != id.StartTime {
		return Stat{}, ErrGone
	}
	return st, nil
}

// Alive reports whether the process id names still runs (a zombie does not).
func Alive(id ID) bool {
	st, err := Lookup(id)
	return err == nil && !st.Dead()
}

// State describes a process for failure messages: "gone", "zombie", or its
// stat.
func State(id ID) string {
	st, err := Lookup(id)
	switch {
	case err != nil:
		return "gone"
	case st.Dead():
		return "zombie"
	}
	return fmt.Sprintf("alive: %+v", st)
}

// Environ returns the process's environment entries, in order.
func Environ(pid int) ([]string, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range bytes.Split(data, []byte{0}) {
		if len(e) > 0 {
			out = append(out, string(e))
		}
	}
	return out, nil
}

// UID returns the real uid of a process from /proc/PID/status.
func UID(pid int) (int, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				return strconv.Atoi(f[0])
			}
		}
	}
	return 0, fmt.Errorf("no Uid line in /proc/%d/status", pid)
}

// Table reads every process's stat; vanished entries are skipped.
func Table() []Stat {
	entries, _ := os.ReadDir("/proc")
	var out []Stat
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := ReadStat(pid); err == nil {
			out = append(out, st)
		}
	}
	return out
}

// Descendants returns every live process below root in the parent tree,
// root excluded.
func Descendants(root int) []Stat {
	children := map[int][]Stat{}
	for _, st := range Table() {
		children[st.PPID] = append(children[st.PPID], st)
	}
	var out []Stat
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c.PID)
		}
	}
	return out
}

// Kill sends sig to the process id names, never to a process that reused
// its pid: pidfd_open pins whatever holds the pid, the start time is
// re-read, and only then is the signal sent through the pidfd. A gone
// process is not an error.
func Kill(id ID, sig syscall.Signal) error {
	fd, err := unix.PidfdOpen(id.PID, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", id.PID, err)
	}
	defer unix.Close(fd)
	if _, err := Lookup(id); err != nil {
		return nil
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("signal %v: %w", id, err)
	}
	return nil
}

// KillOnCleanup registers a cleanup that SIGKILLs, by identity, whatever
// ids() returns then (processes a failed spec left behind). ids is called
// at cleanup time, so it can read a record file written later.
func KillOnCleanup(ids func() []ID) {
	ginkgo.GinkgoHelper()
	ginkgo.DeferCleanup(func() {
		for _, id := range ids() {
			if Alive(id) {
				ginkgo.GinkgoWriter.Printf("cleanup: SIGKILL left-over %v (%s)\n", id, State(id))
				Kill(id, syscall.SIGKILL)
			}
		}
	})
}
