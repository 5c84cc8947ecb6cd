package procs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// Line is one line of the adversary fixture's record file (see
// fixtures/cmd/adversary).
type Line struct {
	Kind        string `json:"kind"` // proc, spawned, ready, exit, zombie
	Role        string `json:"role"`
	PID         int    `json:"pid"`
	StartTime   uint64 `json:"start_time"`
	PPID        int    `json:"ppid"`
	PGID        int    `json:"pgid"`
	SID         int    `json:"sid"`
	Comm        string `json:"comm"`
	UID         int    `json:"uid"`
	Marker      string `json:"marker"`
	HasMarker   bool   `json:"has_marker"`
	MarkerFirst bool   `json:"marker_first"`
	Code        *int   `json:"code"`
	Signal      string `json:"signal"`
}

// ID returns the identity of a proc line.
func (l Line) ID() ID { return ID{l.PID, l.StartTime} }

// Record is what the adversary fixture wrote so far.
type Record struct {
	// Procs are the processes it created, in the order they recorded
	// themselves; the top-level one has role "harness".
	Procs []Line
	// Spawned are the children as their parents saw them right after
	// starting them, before they could record themselves.
	Spawned []Line
	// Ready is true once the harness said everything it planted runs.
	Ready bool
	// Exits are children the harness reaped, by pid.
	Exits map[int]Line
	// Zombies are pids left as zombies for the supervisor to reap.
	Zombies []int
}

// ReadRecord parses a record file. A missing file is os.ErrNotExist; a
// last line without its newline is still being written and is ignored.
func ReadRecord(path string) (*Record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := &Record{Exits: map[int]Line{}}
	lines := bytes.Split(data, []byte("\n"))
	// Whatever follows the last newline is a line still being written.
	for _, line := range lines[:len(lines)-1] {
		var l Line
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("record %s: line %q: %w", path, line, err)
		}
		switch l.Kind {
		case "proc":
			r.Procs = append(r.Procs, l)
		case "spawned":
			r.Spawned = append(r.Spawned, l)
		case "ready":
			r.Ready = true
		case "exit":
			r.Exits[l.PID] = l
		case "zombie":
			r.Zombies = append(r.Zombies, l.PID)
		default:
			return nil, fmt.Errorf("record %s: unknown kind %q", path, l.Kind)
		}
	}
	return r, nil
}

// RecordedIDs returns the identities in a record file, for cleanups; none
// when it does not exist.
func RecordedIDs(path string) []ID {
	r, err := ReadRecord(path)
	if err != nil {
		return nil
	}
	return r.IDs()
}

// IDs returns every recorded process's identity.
func (r *Record) IDs() []ID {
	var ids []ID
	for _, l := range append(r.Procs, r.Spawned...) {
		ids = append(ids, l.ID())
	}
	return ids
}

// Role returns the processes recorded with role.
func (r *Record) Role(role string) []Line {
	var out []Line
	for _, l := range r.Procs {
		if l.Role == role {
			out = append(out, l)
		}
	}
	return out
}

// Harness returns the top-level process.
func (r *Record) Harness() (Line, error) {
	h := r.Role("harness")
	if len(h) != 1 {
		return Line{}, errors.New("record has no single harness line")
	}
	return h[0], nil
}
