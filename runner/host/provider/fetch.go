package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/sandproof/sandproof/runner/agent/pax"
	"github.com/sandproof/sandproof/runner/host/hostfile"
)

// Download caps (contract §8, "captured files are data").
const (
	// DefaultFileBytes caps one downloaded file, by its apparent size.
	DefaultFileBytes = 64 << 20
	// DefaultCaseBytes caps what one case's captures write on the host.
	DefaultCaseBytes = 256 << 20
	// DefaultReadBytes caps what one download reads from the sandbox,
	// written or not: past it the download stops.
	DefaultReadBytes = 2 << 30
	// DefaultSmallBytes caps DownloadBytes.
	DefaultSmallBytes = 1 << 20
	// DefaultCaseEntries caps the archive entries one case's captures
	// take (files, directories, links and specials, each one whether it
	// is created on the host or only recorded): empty files cost no byte
	// of DefaultCaseBytes, and a sandbox can make millions.
	DefaultCaseEntries = 4096
)

// Kinds of Withheld entries.
const (
	WithheldSymlink   = "symlink"   // recorded with its target, never created or followed
	WithheldHardlink  = "hardlink"  // recorded with its target, never created
	WithheldSpecial   = "special"   // a device, fifo or socket: nothing to read
	WithheldTruncated = "truncated" // cut at a cap: Written of Size bytes kept
	WithheldStopped   = "stopped"   // the download stopped here (read cap, byte or entry budget exhausted)
	WithheldDenied    = pax.Denied  // the user the read runs as may not read it: nothing read
)

// PAX records a confining reader (the session agent) puts on an entry it
// did not read, so the host records what it met; runner/agent/pax owns
// them (the agent writes them and links nothing of the host).
const (
	// PAXWithheld is WithheldDenied on an entry (a fifo, no content) the
	// read's user may not read.
	PAXWithheld = pax.Withheld
	// PAXLinkAt is the sandbox path of a link met at a component of the
	// asked path, on the symlink entry that stands for the whole path.
	PAXLinkAt = pax.LinkAt
)

// ErrUnconfined is a provider's refusal of a confined read (FetchLimits.
// Confined) it cannot do: it would follow a link or read with other ids.
var ErrUnconfined = errors.New("this provider cannot read without following links or as another user")

// FetchLimits bound what a download writes on the host and reads from the
// sandbox. Zero fields mean the defaults above.
type FetchLimits struct {
	// FileBytes caps one file, by the apparent size the archive header
	// (or lstat) gives before anything is written: a sparse file counts
	// whole. A larger file keeps its first FileBytes bytes.
	FileBytes int64
	// Budget, when set, is shared by several downloads (one case's
	// captures): together they write no more than it holds. nil means a
	// budget of DefaultCaseBytes for this download alone.
	Budget *Budget
	// ReadBytes caps the bytes read from the sandbox, skipped ones
	// included.
	ReadBytes int64
	// Entries, when set, is an entry allowance shared by several
	// downloads: every archive entry takes one, and past it the download
	// stops and records where. nil means DefaultCaseEntries for this
	// download alone.
	Entries *Budget
	// Confined asks for a read in the sandbox that follows no link at
	// any component of the path nor below it (a link met is recorded as
	// a symlink, never followed) and runs with User's permissions. A
	// provider that cannot refuses with ErrUnconfined. false: the
	// provider's own way (the docker engine's archive resolves links
	// above the path in the container and reads as root).
	Confined bool
	// User is whose permissions a confined read has, "UID[:GID]" as in
	// ExecSpec; "" means the provider's own user (root in a container).
	// What the user may not read is recorded as WithheldDenied.
	User string
}

// WithDefaults fills the zero fields.
func (l FetchLimits) WithDefaults() FetchLimits {
	if l.FileBytes <= 0 {
		l.FileBytes = DefaultFileBytes
	}
	if l.Budget == nil {
		l.Budget = NewBudget(DefaultCaseBytes)
	}
	if l.ReadBytes <= 0 {
		l.ReadBytes = DefaultReadBytes
	}
	if l.Entries == nil {
		l.Entries = NewBudget(DefaultCaseEntries)
	}
	return l
}

// Budget is an allowance (bytes, or entries) shared by downloads running
// side by side.
type Budget struct{ left atomic.Int64 }

// NewBudget returns a budget of n (bytes or entries).
func NewBudget(n int64) *Budget {
	b := &Budget{}
	b.left.Store(n)
	return b
}

// Take grants up to n and returns how many.
func (b *Budget) Take(n int64) int64 {
	for {
		left := b.left.Load()
		g := min(n, left)
		if g <= 0 {
			return 0
		}
		if b.left.CompareAndSwap(left, left-g) {
			return g
		}
	}
}

// Withheld is one entry of a downloaded tree that the host copy does not
// hold as the sandbox had it.
type Withheld struct {
	// Path is the sandbox path.
	Path string `json:"path"`
	Kind string `json:"kind"`
	// Target is a link's target as recorded; "" for other kinds.
	Target string `json:"target,omitempty"`
	// Size is the apparent size the sandbox gave; Written what the host
	// copy holds (truncated and stopped entries).
	Size    int64 `json:"size,omitempty"`
	Written int64 `json:"written,omitempty"`
}

// MaxWithheld is how many Withheld entries a download keeps; the rest are
// counted in Omitted (a sandbox can plant a million links).
const MaxWithheld = 1000

// Fetched is what a download wrote and withheld.
type Fetched struct {
	Files    int
	Bytes    int64
	Withheld []Withheld
	// Omitted counts Withheld entries past MaxWithheld, not kept.
	Omitted int
	// Cut counts truncated and stopped entries, kept or not.
	Cut int
	// Entries counts the archive entries taken from the entry budget.
	Entries int
}

// Add records w, or counts it past MaxWithheld.
func (f *Fetched) Add(w Withheld) {
	if w.Kind == WithheldTruncated || w.Kind == WithheldStopped {
		f.Cut++
	}
	if len(f.Withheld) >= MaxWithheld {
		f.Omitted++
		return
	}
	f.Withheld = append(f.Withheld, w)
}

// Fetch downloads path to hostPath within lim (zero fields filled with
// the defaults). Symlinks and hard links are recorded in the answer and
// never created on the host; devices, fifos and sockets are skipped;
// regular files are cut at the caps.
func Fetch(ctx context.Context, sb Sandbox, path, hostPath string, lim FetchLimits) (Fetched, error) {
	return sb.Fetch(ctx, path, hostPath, lim.WithDefaults())
}

// DownloadBytes is DownloadFile with a cap of DefaultSmallBytes.
func DownloadBytes(ctx context.Context, sb Sandbox, path string) ([]byte, error) {
	return DownloadFile(ctx, sb, path, DefaultSmallBytes)
}

// DownloadFile returns the content of the regular file at path in sb, at
// most limit bytes. Errors are Download's
// (ErrPathNotFound when it is not there); a symlink or other non-regular
// file is hostfile.ErrNotRegular (the link's target in the message, never
// followed); a larger file gives its first limit bytes and an error wrapping
// hostfile.ErrTooLarge.
func DownloadFile(ctx context.Context, sb Sandbox, path string, limit int64) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "sandproof-download-")
	if err != nil {
		return nil, fmt.Errorf("download %q: %w", path, err)
	}
	defer os.RemoveAll(tmp)
	dst := filepath.Join(tmp, "file")
	got, err := Fetch(ctx, sb, path, dst, FetchLimits{FileBytes: limit, Budget: NewBudget(limit), ReadBytes: limit + DefaultSmallBytes})
	if err != nil {
		return nil, err
	}
	for _, w := range got.Withheld {
		switch w.Kind {
		case WithheldSymlink, WithheldHardlink:
			return nil, fmt.Errorf("download %q: a %s to %q (recorded, not followed): %w", path, w.Kind, w.Target, hostfile.ErrNotRegular)
		case WithheldSpecial:
			return nil, fmt.Errorf("download %q: %w", path, hostfile.ErrNotRegular)
		}
	}
	data, err := hostfile.ReadFile(dst, limit)
	if err != nil {
		return data, fmt.Errorf("download %q: %w", path, err)
	}
	for _, w := range got.Withheld {
		if w.Kind == WithheldTruncated || w.Kind == WithheldStopped {
			return data, fmt.Errorf("download %q: %d of %d bytes: %w", path, len(data), w.Size, hostfile.ErrTooLarge)
		}
	}
	return data, nil
}
