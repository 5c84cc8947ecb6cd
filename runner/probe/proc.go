package probe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Process is one entry of the process table. A process is named by PID plus
// StartTime: a pid alone can be reused by the time the after snapshot is taken.
type Process struct {
	PID int `json:"pid"`
	// StartTime is field 22 of /proc/PID/stat: clock ticks after boot.
	StartTime uint64 `json:"start_time"`
	PPID      int    `json:"ppid"`
	// UID is the real uid from /proc/PID/status; -1 when it could not be read.
	UID   int    `json:"uid"`
	Comm  string `json:"comm"`
	State string `json:"state"`
}

// Key identifies a process across snapshots.
type Key struct {
	PID       int
	StartTime uint64
}

// Key returns the process's identity.
func (p Process) Key() Key { return Key{p.PID, p.StartTime} }

// maxProcFile caps how much of one /proc file is read: stat and status are a
// few hundred bytes, and a cap keeps a hostile or broken tree from costing
// memory.
const maxProcFile = 64 << 10

// readCapped reads a whole file, at most max bytes, without a stat first
// (/proc files report size 0).
func readCapped(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}

// vanished reports whether err means the process went away while being read;
// such entries are skipped, not errors.
func vanished(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// ReadProcesses lists every process under procRoot (normally "/proc"), sorted
// by pid. Non-numeric entries and processes that vanish during the scan are
// skipped; a stat line that does not parse is an error, since a table that
// silently drops processes would let a leak pass.
func ReadProcesses(procRoot string) ([]Process, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("read proc root %q: %w", procRoot, err)
	}
	var procs []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		p, err := ReadProcess(procRoot, pid)
		if vanished(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	sort.Slice(procs, func(i, j int) bool { return procs[i].PID < procs[j].PID })
	return procs, nil
}

// ReadProcess reads one process from procRoot/PID/stat and .../status.
func ReadProcess(procRoot string, pid int) (Process, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	stat, err := readCapped(filepath.Join(dir, "stat"), maxProcFile)
	if err != nil {
		return Process{}, err
	}
	if len(stat) == 0 {
		// A process that exits between open and read leaves an empty file.
		return Process{}, fs.ErrNotExist
	}
	p, err := ParseStat(stat)
	if err != nil {
		return Process{}, fmt.Errorf("parse %s: %w", filepath.Join(dir, "stat"), err)
	}
	// The uid is secondary: a status that cannot be read (the process
	// exited after its stat was read, or a hardened /proc) leaves -1 rather
	// than dropping a process that was seen alive.
	p.UID = -1
	if status, err := readCapped(filepath.Join(dir, "status"), maxProcFile); err == nil {
		if uid, ok := parseStatusUID(status); ok {
			p.UID = uid
		}
	}
	return p, nil
}

// ParseStat parses the contents of /proc/PID/stat. A real line:
//
//	6382 (cat) R 6376 6376 3147 0 -1 4194304 97 0 0 0 0 0 0 0 20 0 1 0 38824 3133440 ...
//
// The name can hold spaces and parentheses ("(sd-pam)", "a) R 1 (b"), so it
// runs from the first '(' to the last ')'; the fields after it are counted
// from there: state is field 3, ppid field 4, starttime field 22.
func ParseStat(b []byte) (Process, error) {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return Process{}, fmt.Errorf("invalid stat data: %q", truncate(b))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil {
		return Process{}, fmt.Errorf("invalid stat pid: %q", truncate(b))
	}
	rest := strings.Fields(string(b[closing+1:]))
	// rest[0] is field 3 (state); field N is rest[N-3].
	const startTimeField = 22
	if len(rest) < startTimeField-2 {
		return Process{}, fmt.Errorf("invalid stat data: %q", truncate(b))
	}
	ppid, err := strconv.Atoi(rest[4-3])
	if err != nil {
		return Process{}, fmt.Errorf("invalid stat ppid: %q", truncate(b))
	}
	start, err := strconv.ParseUint(rest[startTimeField-3], 10, 64)
	if err != nil {
		return Process{}, fmt.Errorf("invalid stat start time: %q", truncate(b))
	}
	return Process{
		PID:       pid,
		StartTime: start,
		PPID:      ppid,
		Comm:      string(b[open+1 : closing]),
		State:     rest[0],
	}, nil
}

// parseStatusUID returns the real uid from the "Uid:" line of
// /proc/PID/status ("Uid:\t1000\t1000\t1000\t1000").
func parseStatusUID(b []byte) (int, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "Uid:") {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, "Uid:"))
		if len(f) == 0 {
			return 0, false
		}
		uid, err := strconv.Atoi(f[0])
		return uid, err == nil
	}
	return 0, false
}

func truncate(b []byte) string {
	const max = 200
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}
