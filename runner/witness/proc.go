package witness

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// ID names one process for its whole life: a pid alone can be reused.
type ID struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
}

func (id ID) String() string { return fmt.Sprintf("%d@%d", id.PID, id.StartTime) }

// Stat is the part of /proc/PID/stat the witnesses look at.
type Stat struct {
	PID, PPID, PGID, SID int
	Comm                 string
	// State is field 3: R, S, D, T, t, Z, X, ...
	State byte
	// Threads is field 20, num_threads (status's "Threads:"): 1 for a plain
	// zombie, 1 + the live threads for a leader that called pthread_exit.
	Threads int
	// StartTime is field 22: clock ticks after boot.
	StartTime uint64
}

// ID returns the stat's identity.
func (s Stat) ID() ID { return ID{s.PID, s.StartTime} }

// Dead is true when no thread of the process runs: a plain zombie (Z with
// num_threads 1) or X. A leader that called pthread_exit shows Z while its
// other threads run, write and fork: alive (contract §2 stop rules).
func (s Stat) Dead() bool {
	switch s.State {
	case 'X', 'x':
		return true
	case 'Z':
		return s.Threads <= 1
	}
	return false
}

// ErrGone means no process holds the pid, or another process now does.
var ErrGone = errors.New("process gone")

// ParseStat parses one /proc/PID/stat line; nothing in it is evaluated. The
// name runs from the first '(' to the LAST ')' because a process chooses it
// freely (the adversary's crafted-name role):
//
//	4242 (x) S 1 1 $(>p)) S 4241 4242 4242 0 -1 4194304 ... 123456 ...
//	     ^name: "x) S 1 1 $(>p)" ^state ^ppid ^pgrp ^sid     ^starttime (22)
//
// The fields after the name are counted from there: state is field 3.
func ParseStat(data []byte) (Stat, error) {
	open, closing := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 1 || closing < open {
		return Stat{}, invalidStat(data)
	}
	var s Stat
	var err error
	if s.PID, err = strconv.Atoi(strings.TrimSpace(string(data[:open]))); err != nil {
		return Stat{}, invalidStat(data)
	}
	s.Comm = string(data[open+1 : closing])
	// f[0] is field 3; field N is f[N-3].
	f := strings.Fields(string(data[closing+1:]))
	if len(f) < 22-2 || len(f[0]) != 1 {
		return Stat{}, invalidStat(data)
	}
	s.State = f[0][0]
	for i, p := range []*int{&s.PPID, &s.PGID, &s.SID} {
		if *p, err = strconv.Atoi(f[4-3+i]); err != nil {
			return Stat{}, invalidStat(data)
		}
	}
	if s.Threads, err = strconv.Atoi(f[20-3]); err != nil || s.Threads < 0 {
		return Stat{}, invalidStat(data)
	}
	if s.StartTime, err = strconv.ParseUint(f[22-3], 10, 64); err != nil {
		return Stat{}, invalidStat(data)
	}
	return s, nil
}

func invalidStat(data []byte) error {
	const max = 200
	if len(data) > max {
		return fmt.Errorf("invalid stat data: %q...", data[:max])
	}
	return fmt.Errorf("invalid stat data: %q", data)
}

// FS is a proc filesystem, named by where it is mounted.
type FS string

// Proc is this process's own /proc.
const Proc FS = "/proc"

// maxFile caps what is read of one /proc file: stat and status are a few
// hundred bytes, environ at most a few hundred KiB; a cap keeps a hostile
// or broken tree from costing memory.
const maxFile = 4 << 20

// read reads a whole file without a stat first (/proc files report size
// 0); a file larger than maxFile is an error, never silently cut.
func (fs FS) read(pid int, name string) ([]byte, error) {
	f, err := os.Open(string(fs) + "/" + strconv.Itoa(pid) + "/" + name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err == nil && len(data) > maxFile {
		err = fmt.Errorf("read %s: larger than %d bytes", f.Name(), maxFile)
	}
	return data, err
}

// gone reports whether err means the process went away while being read.
func gone(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// ReadStat reads and parses PID/stat; ErrGone when no process holds pid.
func (fs FS) ReadStat(pid int) (Stat, error) {
	data, err := fs.read(pid, "stat")
	// A process that exits between open and read leaves an empty file.
	if gone(err) || (err == nil && len(data) == 0) {
		return Stat{}, ErrGone
	}
	if err != nil {
		return Stat{}, err
	}
	return ParseStat(data)
}

// Lookup returns the stat of the process id names, or ErrGone when the pid
// is free or now names another process.
func (fs FS) Lookup(id ID) (Stat, error) {
	st, err := fs.ReadStat(id.PID)
	if err != nil {
		return Stat{}, err
	}
	if st.StartTime != id.StartTime {
		return Stat{}, ErrGone
	}
	return st, nil
}

// Alive reports whether the process id names still runs; a zombie does
// not. A stat that cannot be read or parsed is an error, not a verdict
// either way: a reading error must never pass for "gone", nor a positive
// control for "alive".
func (fs FS) Alive(id ID) (bool, error) {
	st, err := fs.Lookup(id)
	if errors.Is(err, ErrGone) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !st.Dead(), nil
}

// State describes a process for failure messages: "gone", "zombie" (dead,
// unreaped), "unreadable: ..." or "alive: " and its stat (a zombie leader
// with live threads is alive).
func (fs FS) State(id ID) string {
	st, err := fs.Lookup(id)
	switch {
	case errors.Is(err, ErrGone):
		return "gone"
	case err != nil:
		return "unreadable: " + err.Error()
	case st.Dead():
		return "zombie"
	}
	return fmt.Sprintf("alive: %+v", st)
}

// Table reads every process's stat, sorted by pid. Non-numeric entries and
// processes that vanish during the scan are skipped; a stat that does not
// parse is an error, since a table that silently drops processes would let
// a leak pass.
func (fs FS) Table() ([]Stat, error) {
	entries, err := os.ReadDir(string(fs))
	if err != nil {
		return nil, fmt.Errorf("read proc root %q: %w", string(fs), err)
	}
	var out []Stat
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		st, err := fs.ReadStat(pid)
		if errors.Is(err, ErrGone) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s/%d/stat: %w", string(fs), pid, err)
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b Stat) int { return a.PID - b.PID })
	return out, nil
}

// Descendants returns every live or zombie process below root in the
// parent tree, root excluded, breadth first.
func (fs FS) Descendants(root int) ([]Stat, error) {
	table, err := fs.Table()
	if err != nil {
		return nil, err
	}
	children := map[int][]Stat{}
	for _, st := range table {
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
	return out, nil
}

// UID returns the real uid of a process, from the "Uid:" line of
// PID/status ("Uid:\t1000\t1000\t1000\t1000").
func (fs FS) UID(pid int) (int, error) {
	data, err := fs.read(pid, "status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				if uid, err := strconv.Atoi(f[0]); err == nil {
					return uid, nil
				}
			}
			return 0, fmt.Errorf("invalid Uid line in %s/%d/status: %q", string(fs), pid, line)
		}
	}
	return 0, fmt.Errorf("no Uid line in %s/%d/status", string(fs), pid)
}

// Status is the part of PID/status the witnesses look at beyond the uid:
// the real ids and the tracer.
type Status struct {
	UID, GID int
	// TracerPID is the pid of the process that ptraces this one, 0 when
	// none does.
	TracerPID int
}

// ReadStatus reads the real uid and gid and the tracer of a process from
// PID/status ("Uid:\t1000\t1000\t1000\t1000", "Gid:\t...",
// "TracerPid:\t0"). A line that is missing or does not parse is an error:
// a tracer nobody could read must never pass for "none".
func (fs FS) ReadStatus(pid int) (Status, error) {
	data, err := fs.read(pid, "status")
	if err != nil {
		return Status{}, err
	}
	var st Status
	want := map[string]*int{"Uid:": &st.UID, "Gid:": &st.GID, "TracerPid:": &st.TracerPID}
	for line := range strings.SplitSeq(string(data), "\n") {
		for prefix, dst := range want {
			v, ok := strings.CutPrefix(line, prefix)
			if !ok {
				continue
			}
			f := strings.Fields(v)
			n, err := 0, error(nil)
			if len(f) > 0 {
				n, err = strconv.Atoi(f[0])
			}
			if len(f) == 0 || err != nil || n < 0 {
				return Status{}, fmt.Errorf("invalid %s line in %s/%d/status: %q", strings.TrimSuffix(prefix, ":"), string(fs), pid, line)
			}
			*dst = n
			delete(want, prefix)
		}
	}
	if len(want) > 0 {
		var missing []string
		for p := range want {
			missing = append(missing, strings.TrimSuffix(p, ":"))
		}
		slices.Sort(missing)
		return Status{}, fmt.Errorf("no %s line in %s/%d/status", strings.Join(missing, ", "), string(fs), pid)
	}
	return st, nil
}

// Environ returns the process's environment entries, in order.
func (fs FS) Environ(pid int) ([]string, error) {
	data, err := fs.read(pid, "environ")
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
