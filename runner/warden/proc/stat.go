package proc

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/sandproof/sandproof/runner/warden/mutant"
)

// Identity names one process for its whole life: a pid alone can be reused,
// the pair cannot.
type Identity struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
}

func (id Identity) String() string { return fmt.Sprintf("%d@%d", id.PID, id.StartTime) }

// Stat is the part of /proc/PID/stat the supervisor uses.
type Stat struct {
	PID   int
	Comm  string
	State byte // R, S, D, T, t, Z, X, ...
	PPID  int
	PGID  int
	SID   int
	// Threads is num_threads (field 20), the counter status's "Threads:"
	// shows too; zero when it did not parse, which readers take as
	// "unknown". A zombie leader counts itself until its last thread is gone.
	Threads   int
	StartTime uint64 // clock ticks since boot (field 22)
}

// Identity returns the (pid, start time) pair of the process.
func (s Stat) Identity() Identity { return Identity{PID: s.PID, StartTime: s.StartTime} }

// Dead reports whether every thread of the process has exited and it only
// awaits reaping. A process lives while any of its threads does: a leader
// that called pthread_exit shows state Z while its other threads run on
// (and write, and fork), so a Z leader is dead only when num_threads counts
// it alone (contract §2 stop rules: "a zombie leader with a live thread is
// alive"). The kernel prints 1 for a plain zombie and 1 + the live threads
// for a zombie leader; an unknown count (0, a fake tree's) is resolved from
// the task directory by FS.Stat before anyone asks.
func (s Stat) Dead() bool {
	switch s.State {
	case 'X', 'x':
		return true
	case 'Z':
		return s.Threads <= 1 || mutant.Is(mutant.ZSkip)
	}
	return false
}

// ZombieLeader reports whether the thread-group leader has exited while
// other threads of the process still run: the process is alive, but its
// own stat letter stays Z, so whether it is stopped is read per thread
// (FS.Held).
func (s Stat) ZombieLeader() bool { return s.State == 'Z' && !s.Dead() }

// Stopped reports whether the process is stopped by a signal or a tracer, in
// which case a TERM alone would stay pending until someone sends CONT.
func (s Stat) Stopped() bool { return s.State == 'T' || s.State == 't' }

// ErrBadStat is returned for stat contents that do not parse.
var ErrBadStat = errors.New("invalid stat data")

// ParseStat parses the contents of /proc/PID/stat. The command name is
// whatever the process chose (up to 16 bytes, any of them ')' or ' '), so it
// runs from the first '(' to the LAST ')' and nothing in it is interpreted.
// No field is ever evaluated; numbers are parsed as unsigned decimals.
//
//	1234 (evil) 0 0 $(x)) S 1 1234 1234 0 -1 4194560 ... 98765 ...
//	     ^---- comm: "evil) 0 0 $(x)" ----^  ^state ^ppid ^pgrp ^session    ^starttime (22)
func ParseStat(data []byte) (Stat, error) {
	var s Stat
	open := bytes.IndexByte(data, '(')
	closing := bytes.LastIndexByte(data, ')')
	if open < 1 || closing < open {
		return s, fmt.Errorf("%w: %q", ErrBadStat, truncate(data))
	}
	pid, ok := parseUint(bytes.TrimSpace(data[:open]))
	if !ok || pid == 0 || pid > 1<<31-1 {
		return s, fmt.Errorf("%w: bad pid: %q", ErrBadStat, truncate(data))
	}
	s.PID = int(pid)
	s.Comm = string(data[open+1 : closing])
	// After ") " come the fields from 3 (state) on, separated by single spaces.
	rest := data[closing+1:]
	var fields [20][]byte // fields 3..22
	n := 0
	for n < len(fields) {
		rest = bytes.TrimLeft(rest, " ")
		if len(rest) == 0 {
			break
		}
		end := bytes.IndexAny(rest, " \n")
		if end < 0 {
			end = len(rest)
		}
		fields[n] = rest[:end]
		rest = rest[end:]
		n++
	}
	if n < len(fields) {
		return s, fmt.Errorf("%w: %d fields after the name: %q", ErrBadStat, n, truncate(data))
	}
	if len(fields[0]) != 1 {
		return s, fmt.Errorf("%w: bad state %q", ErrBadStat, fields[0])
	}
	s.State = fields[0][0]
	var ppid, pgid, sid uint64
	if ppid, ok = parseUint(fields[1]); !ok {
		return s, fmt.Errorf("%w: bad ppid %q", ErrBadStat, fields[1])
	}
	if pgid, ok = parseUint(fields[2]); !ok {
		return s, fmt.Errorf("%w: bad pgrp %q", ErrBadStat, fields[2])
	}
	if sid, ok = parseUint(fields[3]); !ok {
		return s, fmt.Errorf("%w: bad session %q", ErrBadStat, fields[3])
	}
	if n, ok := parseUint(fields[17]); ok && n < 1<<31 {
		s.Threads = int(n)
	}
	if s.StartTime, ok = parseUint(fields[19]); !ok {
		return s, fmt.Errorf("%w: bad starttime %q", ErrBadStat, fields[19])
	}
	if ppid > 1<<31-1 || pgid > 1<<31-1 || sid > 1<<31-1 {
		return s, fmt.Errorf("%w: id out of range: %q", ErrBadStat, truncate(data))
	}
	s.PPID, s.PGID, s.SID = int(ppid), int(pgid), int(sid)
	return s, nil
}

// parseUint parses a plain unsigned decimal: digits only, no sign, no base
// prefix, no exponent, at most 20 digits.
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	return v, err == nil
}

func truncate(b []byte) []byte {
	if len(b) > 200 {
		return b[:200]
	}
	return b
}
