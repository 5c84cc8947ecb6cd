package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/sandproof/sandproof/runner/warden/proc"
)

// Owner labels: every sandbox this project creates names the machine and
// the process that made it, so a clean-up on a shared engine removes only
// what a dead process of this machine left behind.
const (
	// LabelRun is the run id (certify's run; a test process's own id).
	LabelRun = "sandproof.run"
	// LabelHost is HostID() of the machine the owner ran on.
	LabelHost = "sandproof.host"
	// LabelOwnerPID and LabelOwnerStart name the owning process: its pid
	// and its start time (field 22 of /proc/PID/stat, clock ticks since
	// boot). A pid alone can be reused; the pair cannot.
	LabelOwnerPID   = "sandproof.owner.pid"
	LabelOwnerStart = "sandproof.owner.start"
)

// Owner is the process that owns a sandbox.
type Owner struct {
	Host      string
	PID       int
	StartTime uint64
}

var (
	selfOnce sync.Once
	self     Owner
	selfErr  error
)

// Self returns this process as an Owner: HostID() and the pid and start
// time read from /proc/self/stat.
func Self() (Owner, error) {
	selfOnce.Do(func() {
		var st proc.Stat
		st, selfErr = readStat("/proc", "self")
		if selfErr == nil {
			self = Owner{Host: HostID(), PID: st.PID, StartTime: st.StartTime}
		}
	})
	return self, selfErr
}

// OwnerLabels returns the owner labels of this process and the run id:
// the labels every sandbox is created with. An empty run is left out.
func OwnerLabels(run string) (map[string]string, error) {
	o, err := Self()
	if err != nil {
		return nil, err
	}
	l := map[string]string{
		LabelKey:        "1",
		LabelHost:       o.Host,
		LabelOwnerPID:   strconv.Itoa(o.PID),
		LabelOwnerStart: strconv.FormatUint(o.StartTime, 10),
	}
	if run != "" {
		l[LabelRun] = run
	}
	return l, nil
}

// DefaultRun is the run id of sandboxes whose creator names none (the
// tests'): "proc-PID.START" of this process.
func DefaultRun() (string, error) {
	o, err := Self()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("proc-%d.%d", o.PID, o.StartTime), nil
}

var (
	hostOnce sync.Once
	hostID   string
)

// HostID names this machine, stably across processes and reboots: the
// first 16 hex digits of sha256 over the hostname and /etc/machine-id
// (the raw machine id is not published: systemd asks that it is not). A
// machine without a machine id is named by its hostname alone.
func HostID() string {
	hostOnce.Do(func() {
		name, _ := os.Hostname()
		mid, _ := os.ReadFile("/etc/machine-id")
		sum := sha256.Sum256([]byte(name + "\n" + strings.TrimSpace(string(mid))))
		hostID = hex.EncodeToString(sum[:8])
	})
	return hostID
}

// readStat reads and parses ROOT/PID/stat.
func readStat(root, pid string) (proc.Stat, error) {
	data, err := os.ReadFile(filepath.Join(root, pid, "stat"))
	if err != nil {
		return proc.Stat{}, fmt.Errorf("read stat of %s: %w", pid, err)
	}
	return proc.ParseStat(data)
}

// Alive reports whether the process pid with that start time still runs
// on this machine: a pid that is gone, a zombie, or a pid now held by a
// process with another start time is not. ProcRoot "" means /proc.
func Alive(procRoot string, pid int, start uint64) bool {
	if procRoot == "" {
		procRoot = "/proc"
	}
	if pid <= 0 {
		return false
	}
	st, err := readStat(procRoot, strconv.Itoa(pid))
	if err != nil {
		return false
	}
	return st.StartTime == start && !st.Dead()
}

// CleanScope says which sandboxes a clean-up may remove.
type CleanScope struct {
	// Host is this machine's HostID(); "" means HostID().
	Host string
	// Run, when set, removes the sandboxes of that run (of this host),
	// whether their owner is alive or not.
	Run string
	// All removes every sandbox of this host, live owners included.
	All bool
	// AllHosts removes every sandproof sandbox the engine knows, of any
	// host and those without owner labels: the old, unscoped clean.
	AllHosts bool
	// ProcRoot is where owners are looked up; "" means /proc.
	ProcRoot string
	// DryRun decides as above but removes nothing.
	DryRun bool
}

// Verdict reasons, printed by `sandproof clean` and counted.
const (
	ReasonOwnerGone  = "owner process gone"
	ReasonOwnerAlive = "owner process alive"
	ReasonOtherHost  = "another host's"
	ReasonNoOwner    = "no owner labels"
	ReasonBadOwner   = "unreadable owner labels"
	ReasonRun        = "of run"
	ReasonOtherRun   = "another run's"
	ReasonAll        = "--all"
	ReasonAllHosts   = "--all-hosts"
	// A cache (Cleaner.CleanVolumes) is removed when no sandbox uses it.
	ReasonVolumeUnused = "no container uses it"
	ReasonVolumeInUse  = "in use"
)

// Judge decides whether a clean-up in scope removes a sandbox carrying
// labels, and says why. Without --all-hosts, a sandbox that names no host
// (an older sandproof's, or one started by hand from a sandproof image,
// which carries the image's label) is kept: nothing says whose it is.
func (s CleanScope) Judge(labels map[string]string) (remove bool, reason string) {
	if s.AllHosts {
		return true, ReasonAllHosts
	}
	host := s.Host
	if host == "" {
		host = HostID()
	}
	h, ok := labels[LabelHost]
	switch {
	case !ok:
		return false, ReasonNoOwner
	case h != host:
		return false, ReasonOtherHost
	}
	if s.Run != "" {
		if labels[LabelRun] == s.Run {
			return true, ReasonRun + " " + s.Run
		}
		return false, ReasonOtherRun
	}
	if s.All {
		return true, ReasonAll
	}
	pid, perr := strconv.Atoi(labels[LabelOwnerPID])
	start, serr := strconv.ParseUint(labels[LabelOwnerStart], 10, 64)
	if perr != nil || serr != nil {
		return false, ReasonBadOwner
	}
	if Alive(s.ProcRoot, pid, start) {
		return false, ReasonOwnerAlive
	}
	return true, ReasonOwnerGone
}
