package stop

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/runner/warden/proc"
)

// Signaller sends signals to processes named by identity. It works in three
// steps, which fakeproc exposes one by one so a pid can be reused between
// them: Open pins the process that now holds id.PID (pidfd_open), the engine
// re-reads the start time and closes the handle if it differs, and only then
// Signal sends through the pinned handle. A pidfd keeps naming the process it
// was opened on even if the pid is reused afterwards, so the re-check made
// after Open cannot be outdated by the time Signal runs.
type Signaller interface {
	// Open pins the process now holding id.PID. proc.ErrGone when none.
	Open(id proc.Identity) (Handle, error)
	// Tier names how processes are reached, for the receipt.
	Tier() string
}

// Handle is one pinned process.
type Handle interface {
	// Signal sends sig; proc.ErrGone when the process has already exited.
	Signal(sig syscall.Signal) error
	Close() error
}

// NewSignaller returns the signaller for a proc root: real signals through
// pidfds (or kill where the kernel has no pidfd_open) on /proc, and the
// recording signaller everywhere else, so a fake tree never leads to a real
// signal.
func NewSignaller(fs proc.FS) Signaller {
	if !fs.IsReal() {
		return NewRecorder(filepath.Join(fs.Root, ".signals"))
	}
	if PidfdSupported() {
		return pidfdSignaller{}
	}
	return killSignaller{}
}

var (
	pidfdOnce sync.Once
	pidfdOK   bool
)

// PidfdSupported reports whether the kernel has pidfd_open and
// pidfd_send_signal (Linux 5.3+).
func PidfdSupported() bool {
	pidfdOnce.Do(func() {
		fd, err := unix.PidfdOpen(os.Getpid(), 0)
		if err == nil {
			unix.Close(fd)
			pidfdOK = true
		}
	})
	return pidfdOK
}

type pidfdSignaller struct{}

func (pidfdSignaller) Tier() string { return "subreaper+pidfd" }

func (pidfdSignaller) Open(id proc.Identity) (Handle, error) {
	fd, err := unix.PidfdOpen(id.PID, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, proc.ErrGone
		}
		return nil, fmt.Errorf("pidfd_open %d: %w", id.PID, err)
	}
	return pidfdHandle{fd: fd}, nil
}

type pidfdHandle struct{ fd int }

func (h pidfdHandle) Signal(sig syscall.Signal) error {
	err := unix.PidfdSendSignal(h.fd, sig, nil, 0)
	if errors.Is(err, unix.ESRCH) {
		return proc.ErrGone
	}
	return err
}

func (h pidfdHandle) Close() error { return unix.Close(h.fd) }

// killSignaller is the fallback where pidfds are missing: kill(2) after the
// same start-time re-check. A pid reused between the re-check and the kill
// remains possible here; the receipt's tier says so.
type killSignaller struct{}

func (killSignaller) Tier() string { return "subreaper+kill" }

func (killSignaller) Open(id proc.Identity) (Handle, error) { return killHandle{pid: id.PID}, nil }

type killHandle struct{ pid int }

func (h killHandle) Signal(sig syscall.Signal) error {
	err := syscall.Kill(h.pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return proc.ErrGone
	}
	return err
}

func (killHandle) Close() error { return nil }

// Recorder is the signaller for fake proc roots: it sends nothing and appends
// one line "PID START_TIME SIGNAL" per signal to a file (PROC_ROOT/.signals),
// where a fake kernel reads and applies it.
type Recorder struct {
	mu   sync.Mutex
	path string
}

// NewRecorder records to path.
func NewRecorder(path string) *Recorder { return &Recorder{path: path} }

// Tier is the tier the recorded run would have used on this kernel.
func (r *Recorder) Tier() string {
	if PidfdSupported() {
		return "subreaper+pidfd"
	}
	return "subreaper+kill"
}

// Open pins nothing: the fake kernel applies the line.
func (r *Recorder) Open(id proc.Identity) (Handle, error) {
	return recordHandle{r: r, id: id}, nil
}

type recordHandle struct {
	r  *Recorder
	id proc.Identity
}

func (h recordHandle) Signal(sig syscall.Signal) error {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	f, err := os.OpenFile(h.r.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("record signal: %w", err)
	}
	_, err = fmt.Fprintf(f, "%d %d %s\n", h.id.PID, h.id.StartTime, SignalName(sig))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (recordHandle) Close() error { return nil }

// SignalName returns the short name without "SIG": "TERM", "KILL".
func SignalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return n[3:]
	}
	return fmt.Sprintf("SIG%d", int(sig))
}

// ParseSignal is SignalName's inverse; it accepts "TERM" and "SIGTERM".
func ParseSignal(name string) (syscall.Signal, bool) {
	if len(name) < 3 || name[:3] != "SIG" {
		name = "SIG" + name
	}
	s := unix.SignalNum(name)
	return s, s != 0
}
