package launch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/runner/warden/atomicfile"
	"github.com/sandproof/sandproof/runner/warden/proc"

	"github.com/sandproof/sandproof/runner/warden/mutant"
)

// Files in the state dir.
const (
	ClaimFile = "claim"
	StopFile  = "stop"
	RenewFile = "renew"
	// DeadlineFile is `warden renew --deadline`'s request: the launch's
	// deadline brought forward (DeadlineRequest).
	DeadlineFile = "deadline"
	StdoutFile   = "stdout"
	StderrFile   = "stderr"
	LogFile      = "supervisor.log"
	ServicesRcp  = "services-receipt.json"
)

// ErrClaimed means another launch (or a stop) already claimed the state dir.
var ErrClaimed = errors.New("state dir already claimed")

// PrepareDir creates dir (0700) if missing and refuses a symlink, a
// non-directory, or a directory owned by another user: the receipt in it is
// only as trustworthy as the directory.
func PrepareDir(dir string) error {
	if dir == "" {
		return errors.New("--state: empty path")
	}
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		if parent := filepath.Dir(dir); parent != dir {
			if err := os.MkdirAll(parent, 0o755); err != nil {
				return fmt.Errorf("--state: create parent of %q: %w", dir, err)
			}
		}
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("--state: create %q: %w", dir, err)
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return fmt.Errorf("--state: %w", err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("--state: %q is a symlink", dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("--state: %q is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("--state: %q is owned by uid %d, not by uid %d", dir, st.Uid, os.Geteuid())
	}
	// A directory we cannot write (a read-only mount, mode bits) can hold
	// neither a claim nor a receipt: refuse it like a foreign one.
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("--state: %q is not writable: %w", dir, err)
	}
	return nil
}

// Claim is the content of STATE/claim: who took the launch, and what a host
// needs to talk to it.
type Claim struct {
	// By is "supervise" or "stop" (a stop that came first fences the launch).
	By       string `json:"by"`
	LaunchID string `json:"launch_id"`
	// PID and StartTime name the process that took the claim: the
	// supervisor, or the fencing stop.
	PID          int     `json:"pid"`
	StartTime    uint64  `json:"start_time"`
	LeaseSeconds float64 `json:"lease_seconds,omitempty"`
	ClaimedAt    string  `json:"claimed_at"`
}

// TakeClaim creates STATE/claim exclusively. The content is written to a
// temp file first and published with link(2), which fails if the claim
// exists, so a reader never sees a half-written claim and two claimants can
// never both win.
func TakeClaim(dir string, c Claim) error {
	c.ClaimedAt = time.Now().UTC().Format(time.RFC3339Nano)
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if mutant.Is(mutant.ClaimRace) {
		// The mutant: look, then write and rename; two claimants both win.
		if _, err := os.Stat(filepath.Join(dir, ClaimFile)); err == nil {
			return ErrClaimed
		}
		tmp := filepath.Join(dir, fmt.Sprintf(".claim.%d.tmp", os.Getpid()))
		if err := atomicfile.WriteSynced(tmp, data, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
			return fmt.Errorf("take claim: %w", err)
		}
		return os.Rename(tmp, filepath.Join(dir, ClaimFile))
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".claim.%d.tmp", os.Getpid()))
	if err := atomicfile.WriteSynced(tmp, data, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("take claim: %w", err)
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, filepath.Join(dir, ClaimFile)); err != nil {
		if errors.Is(err, os.ErrExist) {
			return ErrClaimed
		}
		return fmt.Errorf("take claim: %w", err)
	}
	return atomicfile.SyncDir(dir)
}

// ReadClaim loads STATE/claim.
func ReadClaim(dir string) (*Claim, error) {
	data, err := os.ReadFile(filepath.Join(dir, ClaimFile))
	if err != nil {
		return nil, err
	}
	var c Claim
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("decode claim: %w", err)
	}
	return &c, nil
}

// SelfIdentity returns this process's (pid, start time) from the real /proc.
func SelfIdentity() (proc.Identity, error) {
	st, err := proc.NewFS("").Stat(os.Getpid())
	if err != nil {
		return proc.Identity{}, err
	}
	return st.Identity(), nil
}

// Alive reports whether the process recorded in the claim still runs (same
// pid and start time, not a zombie), looked up in the real /proc whatever
// proc root the launch scans.
func (c *Claim) Alive() bool {
	st, err := proc.NewFS("").Stat(c.PID)
	return err == nil && st.StartTime == c.StartTime && !st.Dead()
}

// WriteRequest publishes a request file atomically (temp + rename), which
// the supervisor sees as one inotify IN_MOVED_TO event.
func WriteRequest(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d.%d.tmp", name, os.Getpid(), time.Now().UnixNano()))
	if err := atomicfile.WriteSynced(tmp, data, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s request: %w", name, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s request: %w", name, err)
	}
	return nil
}

// TouchRequest publishes an empty request file: on a full disk it needs no
// data block, so a stop can still be asked for (an empty stop request means
// the default: services kept).
func TouchRequest(dir, name string) error {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("write %s request: %w", name, err)
	}
	return f.Close()
}

// StopAsksServices says whether the stop request in the state dir asks
// for the declared services' stop too (`warden stop --services` writes
// {"services":true}); a plain stop, an empty request (TouchRequest) or
// one that does not parse keeps them.
func StopAsksServices(state string) bool {
	data, err := os.ReadFile(filepath.Join(state, StopFile))
	if err != nil {
		return false
	}
	var req struct {
		Services bool `json:"services"`
	}
	return json.Unmarshal(data, &req) == nil && req.Services
}

// ValidID reports whether id is a valid launch id: [A-Za-z0-9._-]{1,64}.
func ValidID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-", c)) {
			return false
		}
	}
	return true
}

// ServiceRequestFile and ServiceRecordFile name a declared service's files.
func ServiceRequestFile(name string) string { return "service." + name + ".request" }

// ServiceRecordFile is the supervisor's answer to a service request.
func ServiceRecordFile(name string) string { return "service." + name + ".json" }

// ServiceRequest asks the supervisor to start a declared service.
type ServiceRequest struct {
	Name string   `json:"name"`
	Argv []string `json:"argv"`
	Cwd  string   `json:"cwd,omitempty"`
}

// ServiceRecord is the supervisor's answer: the service's identity, or why
// it could not start.
type ServiceRecord struct {
	Name      string `json:"name"`
	PID       int    `json:"pid,omitempty"`
	StartTime uint64 `json:"start_time,omitempty"`
	Error     string `json:"error,omitempty"`
}

// Monotonic is CLOCK_MONOTONIC now: one clock for every process of the
// sandbox (the host's commands and the supervisor), so a deadline one of
// them names is the same instant to the other, whenever it is read.
func Monotonic() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Nano())
}

// DeadlineRequest is STATE/deadline: the instant, on CLOCK_MONOTONIC
// (Monotonic), by which the launch's deadline falls.
type DeadlineRequest struct {
	MonotonicNS int64 `json:"monotonic_ns"`
}

// maxDeadlineRequest bounds what the supervisor reads of STATE/deadline.
const maxDeadlineRequest = 256

// ReadDeadlineRequest reads STATE/deadline, at most maxDeadlineRequest
// bytes of it; a file that does not parse, or names no instant, is an
// error (the supervisor logs it and keeps its deadline).
func ReadDeadlineRequest(state string) (time.Duration, error) {
	f, err := os.Open(filepath.Join(state, DeadlineFile))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, maxDeadlineRequest+1)
	n, _ := io.ReadFull(f, buf)
	if n > maxDeadlineRequest {
		return 0, fmt.Errorf("deadline request over %d bytes", maxDeadlineRequest)
	}
	var req DeadlineRequest
	if err := json.Unmarshal(buf[:n], &req); err != nil {
		return 0, fmt.Errorf("deadline request: %w", err)
	}
	if req.MonotonicNS <= 0 {
		return 0, fmt.Errorf("deadline request: monotonic_ns %d is not an instant", req.MonotonicNS)
	}
	return time.Duration(req.MonotonicNS), nil
}
