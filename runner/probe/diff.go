package probe

import (
	"github.com/sandproof/sandproof/runner/witness"
)

// Report is what changed between a baseline and a later snapshot.
type Report struct {
	// NewProcesses are alive in the later snapshot and were not in the
	// baseline, by (pid, start time), the later probe itself left out. A pid
	// reused by a new process counts as new, and so does the baseline's own
	// probe (its self) or what it became (certify's session agent).
	NewProcesses []Process `json:"new_processes"`
	// NewZombies are new processes that have exited, every thread of them,
	// and wait to be reaped (a leader in state Z whose other threads run is
	// a new process, not a zombie).
	// They count as dead (contract §2), so they do not make the report unclean;
	// they are listed because in an image whose pid 1 reaps nothing a zombie
	// is the trace of a process that lived outside the supervisor's reach.
	NewZombies []Process `json:"new_zombies"`
	// Gone are baseline processes no longer there (the earlier probe left out).
	Gone []Process `json:"gone"`
	// Changes lists differences in os, python3, bash and markers.
	Changes []Change `json:"changes"`
	// Clean is true when there is no new live process and no change.
	Clean bool `json:"clean"`
}

// Change is one difference outside the process table.
type Change struct {
	// What is "os", "python3", "bash", "marker" or "marker_set".
	What   string `json:"what"`
	Path   string `json:"path,omitempty"`
	Before string `json:"before"`
	After  string `json:"after"`
}

// Diff compares a later snapshot with its baseline.
func Diff(before, after Snapshot) Report {
	r := Report{NewProcesses: []Process{}, NewZombies: []Process{}, Gone: []Process{}, Changes: []Change{}}
	// The baseline's own probe is not in the baseline: certify's setup
	// run becomes the session agent (same pid, same start time), so a
	// process that is the baseline's self at a later look is that agent,
	// alive past its stop, and new.
	base := map[witness.ID]bool{}
	for _, p := range before.Processes {
		if !isSelf(before.Self, p) {
			base[p.ID()] = true
		}
	}
	later := map[witness.ID]bool{}
	for _, p := range after.Processes {
		later[p.ID()] = true
		if base[p.ID()] || isSelf(after.Self, p) {
			continue
		}
		if p.Dead() {
			r.NewZombies = append(r.NewZombies, p)
		} else {
			r.NewProcesses = append(r.NewProcesses, p)
		}
	}
	for _, p := range before.Processes {
		if !later[p.ID()] && !isSelf(before.Self, p) {
			r.Gone = append(r.Gone, p)
		}
	}
	if before.OS != after.OS {
		r.Changes = append(r.Changes, Change{What: "os", Before: before.OS, After: after.OS})
	}
	r.Changes = append(r.Changes, toolChanges("python3", before.Python3, after.Python3)...)
	r.Changes = append(r.Changes, toolChanges("bash", before.Bash, after.Bash)...)
	r.Changes = append(r.Changes, markerChanges(before.Markers, after.Markers)...)
	r.Clean = len(r.NewProcesses) == 0 && len(r.Changes) == 0
	return r
}

// IsSelf says whether p is the process that took s (the probe, or what
// it became: certify's session agent); a baseline never holds it.
func (s Snapshot) IsSelf(p Process) bool { return isSelf(s.Self, p) }

// isSelf recognises the probe's own process; a start time of 0 means the
// probe could not see itself (a fake proc root) and the pid alone decides.
func isSelf(self witness.ID, p Process) bool {
	return self.PID != 0 && p.PID == self.PID && (self.StartTime == 0 || self.StartTime == p.StartTime)
}

func toolChanges(name string, b, a Tool) []Change {
	switch {
	case b.Absent() && a.Absent():
		return nil
	case b.Absent() != a.Absent():
		return []Change{{What: name, Before: b.String(), After: a.String()}}
	}
	var cs []Change
	add := func(field, x, y string) {
		if x != y {
			cs = append(cs, Change{What: name, Path: a.Path, Before: field + "=" + x, After: field + "=" + y})
		}
	}
	add("path", b.Path, a.Path)
	add("resolved", b.Resolved, a.Resolved)
	add("version", b.Version, a.Version)
	if !sameDigest(b.SHA256, a.SHA256, b.OverCap, a.OverCap) {
		cs = append(cs, Change{What: name, Path: a.Path, Before: "sha256=" + digestText(b.SHA256, b.OverCap), After: "sha256=" + digestText(a.SHA256, a.OverCap)})
	}
	return cs
}

func markerChanges(before, after []Marker) []Change {
	var cs []Change
	am := map[string]Marker{}
	for _, m := range after {
		am[m.Path] = m
	}
	bm := map[string]bool{}
	for _, b := range before {
		bm[b.Path] = true
		a, ok := am[b.Path]
		if !ok {
			cs = append(cs, Change{What: "marker_set", Path: b.Path, Before: b.State(), After: "not checked"})
			continue
		}
		// Two looks that read the file are the same only by SameContent
		// (one over the cap never is); two that did not, when they
		// failed the same way.
		same := b.State() == a.State()
		if b.readable() || a.readable() {
			same = b.SameContent(a)
		}
		if !same {
			cs = append(cs, Change{What: "marker", Path: b.Path, Before: b.State(), After: a.State()})
		}
	}
	for _, a := range after {
		if !bm[a.Path] {
			cs = append(cs, Change{What: "marker_set", Path: a.Path, Before: "not checked", After: a.State()})
		}
	}
	return cs
}

// digestText is a tool's hash as a change shows it.
func digestText(sum string, over bool) string {
	if over {
		return "over the cap: not hashed"
	}
	return sum
}
