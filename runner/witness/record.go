package witness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// Line is one line of the adversary fixture's record file
// (fixtures/cmd/adversary writes them, one JSON object a line).
type Line struct {
	// Kind is proc, spawned, ready, exit or zombie.
	Kind      string `json:"kind"`
	Role      string `json:"role,omitempty"`
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time,omitempty"`
	PPID      int    `json:"ppid,omitempty"`
	PGID      int    `json:"pgid,omitempty"`
	SID       int    `json:"sid,omitempty"`
	Comm      string `json:"comm,omitempty"`
	UID       int    `json:"uid"`
	// Marker is the process's WARDEN_LAUNCH ("" when absent); MarkerFirst
	// says whether it is the first entry of the environment.
	Marker      string `json:"marker,omitempty"`
	HasMarker   bool   `json:"has_marker"`
	MarkerFirst bool   `json:"marker_first,omitempty"`
	// Code and Signal are an exit line's status of a reaped child; nil
	// Code means it did not exit normally.
	Code   *int   `json:"code,omitempty"`
	Signal string `json:"signal,omitempty"`
}

// ID returns the identity of a proc or spawned line.
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
	return ParseRecord(data)
}

// ParseRecord parses the contents of a record file; see ReadRecord. An
// unknown kind is an error: the reader and the fixture disagree.
func ParseRecord(data []byte) (*Record, error) {
	r := &Record{Exits: map[int]Line{}}
	lines := bytes.Split(data, []byte("\n"))
	// Whatever follows the last newline is a line still being written.
	for _, line := range lines[:len(lines)-1] {
		var l Line
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("record line %q: %w", line, err)
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
			return nil, fmt.Errorf("record line %q: unknown kind %q", line, l.Kind)
		}
	}
	return r, nil
}

// RecordedIDs returns the identities in a record file, for cleanups; none
// when it does not exist or does not parse.
func RecordedIDs(path string) []ID {
	r, err := ReadRecord(path)
	if err != nil {
		return nil
	}
	return r.IDs()
}

// IDs returns every recorded process's identity, each once, in record
// order: a process is usually both spawned and proc.
func (r *Record) IDs() []ID {
	var ids []ID
	seen := map[ID]bool{}
	for _, l := range append(append([]Line{}, r.Procs...), r.Spawned...) {
		if id := l.ID(); !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
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
