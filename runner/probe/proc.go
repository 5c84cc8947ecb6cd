package probe

import (
	"github.com/sandproof/sandproof/runner/witness"
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
	// Threads is num_threads (stat field 20): a leader in state Z with more
	// than one is a process whose main thread exited while another runs,
	// alive. Zero (a snapshot from before the field) reads as unknown.
	Threads int `json:"threads,omitempty"`
	// Detail is what the probe read of the process beyond stat and status
	// (its command line, executable and tracer): only for a process whose
	// uid the snapshot asked about (Options.Detail); nil for the others.
	Detail *Detail `json:"detail,omitempty"`
}

// Dead reports whether no thread of the process runs: X, or Z with no
// thread but the unreaped leader. A Z leader with a live thread is alive
// (contract §2 stop rules), a new process to the diff, not a new zombie.
func (p Process) Dead() bool {
	switch p.State {
	case "X", "x":
		return true
	case "Z":
		return p.Threads <= 1
	}
	return false
}

// ID returns the process's identity across snapshots.
func (p Process) ID() witness.ID { return witness.ID{PID: p.PID, StartTime: p.StartTime} }

// ReadProcesses lists every process under procRoot (normally "/proc"), sorted
// by pid, as package witness reads it: non-numeric entries and processes that
// vanish during the scan are skipped; a stat line that does not parse is an
// error, since a table that silently drops processes would let a leak pass.
func ReadProcesses(procRoot string) ([]Process, error) {
	return readProcesses(procRoot, nil)
}

// readProcesses is ReadProcesses with the Detail of the processes of the
// uids in detail (detail.go bounds how much).
func readProcesses(procRoot string, detail []int) ([]Process, error) {
	fs := witness.FS(procRoot)
	table, err := fs.Table()
	if err != nil {
		return nil, err
	}
	procs := make([]Process, 0, len(table))
	for _, st := range table {
		p := Process{PID: st.PID, StartTime: st.StartTime, PPID: st.PPID, Comm: st.Comm, State: string(st.State), Threads: st.Threads, UID: -1}
		// The uid is secondary: a status that cannot be read (the process
		// exited after its stat was read, or a hardened /proc) leaves -1
		// rather than dropping a process that was seen alive.
		if uid, err := fs.UID(st.PID); err == nil {
			p.UID = uid
		}
		procs = append(procs, p)
	}
	addDetail(fs, procs, detail)
	return procs, nil
}
