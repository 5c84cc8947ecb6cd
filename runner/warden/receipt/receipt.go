// Package receipt defines warden's receipt (contract §3) and writes it
// the only way a host can trust: atomically (temp file, fsync, rename, fsync
// of the directory), at most once, and into space reserved when the launch
// was claimed, so a disk that fills up later cannot lose it.
package receipt

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sandproof/sandproof/runner/warden/atomicfile"
	"github.com/sandproof/sandproof/runner/warden/mutant"
	"github.com/sandproof/sandproof/runner/warden/stop"
)

// Schema is the receipt's schema name.
const Schema = "warden.receipt/v1"

// Causes (contract §3).
const (
	CauseExited     = "exited"
	CauseExecFailed = "exec_failed"
	CauseDeadline   = "deadline"
	CauseStopped    = "stopped"
	CauseLease      = "lease"
	CauseFenced     = "fenced"
	CauseRefused    = "refused"
)

// Tiers.
const (
	TierCgroup    = "cgroup"
	TierPidfd     = "subreaper+pidfd"
	TierSubreaper = "subreaper+kill"
)

// Receipt is STATE/receipt.json. Pointer fields are null when unknown:
// return_code is never a made-up 0.
type Receipt struct {
	Schema           string  `json:"schema"`
	WardenVersion    string  `json:"warden_version"`
	LaunchID         string  `json:"launch_id"`
	CleanupConfirmed bool    `json:"cleanup_confirmed"`
	ReturnCode       *int    `json:"return_code"`
	Signal           *string `json:"signal"`
	TimedOut         bool    `json:"timed_out"`
	Stopped          bool    `json:"stopped"`
	Error            *string `json:"error"`
	Cause            string  `json:"cause"`
	StartedAt        string  `json:"started_at"`
	EndedAt          string  `json:"ended_at"`
	StopSeconds      float64 `json:"stop_seconds"`
	// DeadlineSeconds is the launch's deadline when it ended, in seconds
	// from started_at: its --deadline, or sooner when a `warden renew
	// --deadline` brought it forward. Absent when the writer knew none (a
	// stop that fenced the launch before it started).
	DeadlineSeconds float64       `json:"deadline_seconds,omitempty"`
	Tier            string        `json:"tier"`
	Reached         []stop.Member `json:"reached"`
	Survivors       []stop.Member `json:"survivors"`
	Unverified      []stop.Member `json:"unverified"`
	Preserved       []stop.Member `json:"preserved"`
	// Truncated is set when the lists had to be shortened to fit the
	// reserved space on a full disk.
	Truncated bool `json:"truncated,omitempty"`
}

// Timestamp formats t as the receipt does (UTC, nanoseconds).
func Timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000000Z") }

// Int returns a pointer to v.
func Int(v int) *int { return &v }

// String returns a pointer to v.
func String(v string) *string { return &v }

// New returns a receipt with the fixed fields set and every list empty (not
// null), so readers can iterate without checks.
func New(launchID, version string) *Receipt {
	return &Receipt{
		Schema:        Schema,
		WardenVersion: version,
		LaunchID:      launchID,
		Reached:       []stop.Member{},
		Survivors:     []stop.Member{},
		Unverified:    []stop.Member{},
		Preserved:     []stop.Member{},
	}
}

// File names inside the state dir.
const (
	FileName    = "receipt.json"
	reserveName = ".receipt.reserve"
)

// ReserveSize is the space held back for the receipt. A receipt with a few
// thousand reached processes fits; a larger one is shortened on a full disk.
const ReserveSize = 256 << 10

// Reserve allocates the receipt's space in dir (called when the claim is
// taken). It writes real blocks (not a sparse file) and syncs them.
func Reserve(dir string) error {
	path := filepath.Join(dir, reserveName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("reserve receipt space: %w", err)
	}
	defer f.Close()
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, ReserveSize); err != nil {
		// Filesystems without fallocate: write the blocks out.
		if _, werr := f.Write(make([]byte, ReserveSize)); werr != nil {
			return fmt.Errorf("reserve receipt space: %w", werr)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("reserve receipt space: %w", err)
	}
	return atomicfile.SyncDir(dir)
}

// ErrExists is returned when a receipt has already been written.
var ErrExists = errors.New("receipt already written")

// Write stores r as dir/receipt.json, at most once. It first tries a fresh
// temp file; when that fails (a full disk) it overwrites the reserved file in
// place, which needs no new blocks, and renames it into place.
func Write(dir string, r *Receipt) error {
	final := filepath.Join(dir, FileName)
	if _, err := os.Lstat(final); err == nil {
		return ErrExists
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode receipt: %w", err)
	}
	data = append(data, '\n')
	if mutant.Is(mutant.InPlaceReceipt) {
		// The mutant: create the final file and fill it in place, so a
		// reader (or a crash) can see it empty or half written.
		f, err := os.OpenFile(final, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return ErrExists
		}
		defer f.Close()
		for i := 0; i < len(data); i += 64 {
			f.Write(data[i:min(i+64, len(data))])
		}
		return nil
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".receipt.%d.tmp", os.Getpid()))
	if err := atomicfile.WriteSynced(tmp, data, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		if err := link(tmp, final); err != nil {
			os.Remove(tmp)
			return err
		}
		os.Remove(tmp)
		os.Remove(filepath.Join(dir, reserveName))
		return atomicfile.SyncDir(dir)
	}
	os.Remove(tmp)
	// The reserved file: shorten the lists until the receipt fits.
	for len(data) > ReserveSize {
		r.Truncated = true
		shrink := func(l []stop.Member) []stop.Member {
			if len(l) > 1 {
				return l[:len(l)/2]
			}
			return l
		}
		r.Reached, r.Survivors, r.Unverified, r.Preserved = shrink(r.Reached), shrink(r.Survivors), shrink(r.Unverified), shrink(r.Preserved)
		data, _ = json.Marshal(r)
		if len(r.Reached) <= 1 && len(r.Survivors) <= 1 && len(r.Unverified) <= 1 && len(r.Preserved) <= 1 {
			break
		}
	}
	reserve := filepath.Join(dir, reserveName)
	if err := atomicfile.WriteSynced(reserve, data, os.O_WRONLY, 0o600); err != nil {
		return fmt.Errorf("write receipt into reserved space: %w", err)
	}
	if err := link(reserve, final); err != nil {
		return err
	}
	os.Remove(reserve)
	return atomicfile.SyncDir(dir)
}

// link publishes src as dst only if dst does not exist yet, which keeps the
// receipt written at most once even with two writers.
func link(src, dst string) error {
	if err := os.Link(src, dst); err != nil {
		if errors.Is(err, os.ErrExist) {
			return ErrExists
		}
		return fmt.Errorf("publish receipt: %w", err)
	}
	return nil
}

// Read loads dir/receipt.json. os.ErrNotExist (wrapped) when there is none.
func Read(dir string) (*Receipt, []byte, error) {
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		return nil, nil, err
	}
	r, err := Parse(data)
	return r, data, err
}

// Parse decodes a receipt, accepting unknown fields.
func Parse(data []byte) (*Receipt, error) {
	var r Receipt
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode receipt: %w", err)
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("decode receipt: schema %q, want %q", r.Schema, Schema)
	}
	return &r, nil
}
