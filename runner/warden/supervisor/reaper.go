package supervisor

import (
	"encoding/json"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// ServiceReaperCommand is the hidden subcommand a declared service runs
// under: warden itself, started by the supervisor in a session of its own,
// a child subreaper that starts the service's COMMAND and stays its parent
// and reaper. So a service that daemonizes (double-forks, calls setsid)
// stays below its reaper, and the kernel's children lists define the
// service's subtree: the supervisor preserves the reaper's identity and
// everything below it, and nothing else.
const ServiceReaperCommand = "__service"

// ServiceSpec is what the supervisor hands to a service's reaper.
type ServiceSpec struct {
	Path string      `json:"path"`
	Argv []string    `json:"argv"`
	Env  []string    `json:"env"`
	Dir  string      `json:"dir,omitempty"`
	User *Credential `json:"user,omitempty"`
}

// RunServiceReaper is the reaper's main: descriptors 0-2 are the service's.
// It handles TERM, INT and HUP by doing nothing (a stop of the services
// signals every process below it by identity; the reaper leaves when the
// last of them is gone), and exits once it has no child left.
func RunServiceReaper(arg string) int {
	var spec ServiceSpec
	if err := json.Unmarshal([]byte(arg), &spec); err != nil || len(spec.Argv) == 0 {
		return 2
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return 1
	}
	// Handled, not ignored: a handled signal is reset to its default in
	// the service by exec, an ignored one would be inherited.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for range sigs {
		}
	}()
	sys := &syscall.SysProcAttr{}
	if u := spec.User; u != nil {
		sys.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: []uint32{}}
	}
	if _, err := syscall.ForkExec(spec.Path, spec.Argv, &syscall.ProcAttr{
		Dir: spec.Dir, Env: spec.Env, Files: []uintptr{0, 1, 2}, Sys: sys,
	}); err != nil {
		return 127
	}
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0 // ECHILD: the service and all it started are gone
		}
	}
}
