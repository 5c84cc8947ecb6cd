package wardencli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sandproof/sandproof/runner/warden/launch"
	"github.com/sandproof/sandproof/runner/warden/receipt"
	"github.com/sandproof/sandproof/runner/warden/version"

	"github.com/sandproof/sandproof/runner/warden/mutant"
)

// Exit statuses of the host commands (contract §4).
const (
	exitConfirmed    = 0
	exitNotConfirmed = 1
	exitUsage        = 2
	exitNoReceipt    = 3
	exitGone         = 4
)

func stateFlag(p *parsed) (string, error) {
	if !p.present["state"] {
		return "", usagef("--state is required")
	}
	if p.values["state"] == "" {
		return "", usagef("--state: empty path")
	}
	return filepath.Abs(p.values["state"])
}

func runStop(args []string, stdout, stderr io.Writer) int {
	p, err := parseFlags(args, []flagSpec{{name: "state"}, {name: "wait"}, {name: "services", boolean: true}}, false)
	var state string
	if err == nil {
		state, err = stateFlag(p)
	}
	var wait time.Duration
	if err == nil && p.present["wait"] {
		wait, err = ParseSeconds("wait", p.values["wait"], true)
	}
	if err != nil {
		fmt.Fprintf(stderr, "warden stop: %v\n", err)
		return exitUsage
	}
	if err := launch.PrepareDir(state); err != nil {
		fmt.Fprintf(stderr, "warden stop: %v\n", err)
		return exitUsage
	}
	services := p.present["services"]
	// Fencing: with no claim yet, the stop takes it and writes a fenced
	// receipt, so a delayed launch never starts after its stop.
	self, err := launch.SelfIdentity()
	if err != nil {
		fmt.Fprintf(stderr, "warden stop: %v\n", err)
		return exitNotConfirmed
	}
	// Fence only a state dir nobody claimed; a claimed one gets the request
	// without writing anything else first (its disk may be full).
	err = launch.ErrClaimed
	if _, statErr := os.Lstat(filepath.Join(state, launch.ClaimFile)); statErr != nil {
		err = launch.TakeClaim(state, launch.Claim{By: "stop", PID: self.PID, StartTime: self.StartTime})
	}
	switch {
	case err == nil:
		r := receipt.New("", version.String())
		now := receipt.Timestamp(time.Now())
		r.StartedAt, r.EndedAt = now, now
		r.Cause = receipt.CauseFenced
		r.Stopped = true
		r.CleanupConfirmed = true
		if err := receipt.Write(state, r); err != nil {
			fmt.Fprintf(stderr, "warden stop: write fenced receipt: %v\n", err)
			return exitNotConfirmed
		}
	case errors.Is(err, launch.ErrClaimed):
		req, _ := json.Marshal(map[string]bool{"services": services})
		if err := launch.WriteRequest(state, launch.StopFile, req); err != nil {
			// A full disk has no block for the request's content; an
			// empty request still stops the launch (services are kept).
			if services || launch.TouchRequest(state, launch.StopFile) != nil {
				fmt.Fprintf(stderr, "warden stop: %v\n", err)
				return exitNotConfirmed
			}
		}
	default:
		fmt.Fprintf(stderr, "warden stop: %v\n", err)
		return exitNotConfirmed
	}
	if !p.present["wait"] {
		return exitConfirmed
	}
	code := awaitReceipt(state, receipt.FileName, wait, stdout, stderr, "warden stop")
	if services && code == exitConfirmed {
		if launchHasServices(state) {
			return awaitReceipt(state, launch.ServicesRcp, wait, io.Discard, stderr, "warden stop")
		}
	}
	return code
}

func launchHasServices(state string) bool {
	matches, _ := filepath.Glob(filepath.Join(state, "service.*.json"))
	return len(matches) > 0
}

func runWait(args []string, stdout, stderr io.Writer) int {
	p, err := parseFlags(args, []flagSpec{{name: "state"}, {name: "timeout"}}, false)
	var state string
	if err == nil {
		state, err = stateFlag(p)
	}
	var timeout time.Duration
	if err == nil && p.present["timeout"] {
		timeout, err = ParseSeconds("timeout", p.values["timeout"], true)
		if err == nil && timeout == 0 {
			timeout = time.Nanosecond // check once
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "warden wait: %v\n", err)
		return exitUsage
	}
	// wait renews the lease once when called, never while it blocks: a host
	// that died while waiting must still let the lease lapse.
	if c, err := launch.ReadClaim(state); err == nil && c.LeaseSeconds > 0 && c.Alive() && !mutant.Is(mutant.WaitNoRenew) {
		launch.WriteRequest(state, launch.RenewFile, []byte(fmt.Sprintf("%d\n", time.Now().UnixNano())))
	}
	return awaitReceipt(state, receipt.FileName, timeout, stdout, stderr, "warden wait")
}

// awaitReceipt waits for a receipt file, prints it, and maps it to the exit
// statuses of section 4: 0 confirmed, 1 not, 3 none in time, 4 supervisor
// gone without one.
func awaitReceipt(state, name string, timeout time.Duration, stdout, stderr io.Writer, who string) int {
	gone := func() bool {
		c, err := launch.ReadClaim(state)
		return err == nil && !c.Alive()
	}
	if !launch.WaitFile(state, name, timeout, gone) {
		if gone() {
			fmt.Fprintf(stderr, "%s: the supervisor is gone and left no receipt in %s\n", who, state)
			return exitGone
		}
		fmt.Fprintf(stderr, "%s: no receipt in %s after %v\n", who, state, timeout)
		return exitNoReceipt
	}
	data, err := os.ReadFile(filepath.Join(state, name))
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", who, err)
		return exitNotConfirmed
	}
	r, err := receipt.Parse(data)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", who, err)
		return exitNotConfirmed
	}
	stdout.Write(data)
	if r.CleanupConfirmed {
		return exitConfirmed
	}
	return exitNotConfirmed
}

// runRenew renews the launch's lease, or with --deadline brings its
// deadline forward to SECONDS from now (never later than the deadline it
// has: the supervisor keeps the sooner), which needs no lease.
func runRenew(args []string, stdout, stderr io.Writer) int {
	p, err := parseFlags(args, []flagSpec{{name: "state"}, {name: "deadline"}}, false)
	var state string
	if err == nil {
		state, err = stateFlag(p)
	}
	var within time.Duration
	if err == nil && p.present["deadline"] {
		within, err = ParseSeconds("deadline", p.values["deadline"], false)
	}
	if err != nil {
		fmt.Fprintf(stderr, "warden renew: %v\n", err)
		return exitUsage
	}
	// The instant is taken before anything is read: the deadline is
	// SECONDS from when renew was called, however long it then takes.
	at := launch.Monotonic() + within
	c, err := launch.ReadClaim(state)
	if err != nil {
		fmt.Fprintf(stderr, "warden renew: no launch in %s: %v\n", state, err)
		return 1
	}
	if within == 0 && c.LeaseSeconds <= 0 {
		fmt.Fprintf(stderr, "warden renew: launch %s has no lease\n", c.LaunchID)
		return 1
	}
	if _, _, err := receipt.Read(state); err == nil {
		fmt.Fprintf(stderr, "warden renew: launch %s has ended (its receipt is written)\n", c.LaunchID)
		return 1
	}
	if !c.Alive() {
		fmt.Fprintf(stderr, "warden renew: the supervisor of launch %s is gone\n", c.LaunchID)
		return exitGone
	}
	name, data := launch.RenewFile, []byte(fmt.Sprintf("%d\n", time.Now().UnixNano()))
	if within > 0 {
		name = launch.DeadlineFile
		data, _ = json.Marshal(launch.DeadlineRequest{MonotonicNS: int64(at)})
	}
	if err := launch.WriteRequest(state, name, data); err != nil {
		fmt.Fprintf(stderr, "warden renew: %v\n", err)
		return 1
	}
	return 0
}

func runService(args []string, stdout, stderr io.Writer) int {
	p, err := parseFlags(args, []flagSpec{{name: "state"}, {name: "name"}}, true)
	var state string
	if err == nil {
		state, err = stateFlag(p)
	}
	if err == nil && !launch.ValidID(p.values["name"]) {
		err = usagef("--name: invalid name %q (want [A-Za-z0-9._-]{1,64})", p.values["name"])
	}
	if err != nil {
		fmt.Fprintf(stderr, "warden service: %v\n", err)
		return exitUsage
	}
	name := p.values["name"]
	c, err := launch.ReadClaim(state)
	if err != nil || c.By != "supervise" || !c.Alive() {
		fmt.Fprintf(stderr, "warden service: no running launch in %s\n", state)
		return 1
	}
	if _, _, err := receipt.Read(state); err == nil {
		fmt.Fprintf(stderr, "warden service: launch %s has ended\n", c.LaunchID)
		return 1
	}
	cwd, _ := os.Getwd()
	req, _ := json.Marshal(launch.ServiceRequest{Name: name, Argv: p.rest, Cwd: cwd})
	recFile := launch.ServiceRecordFile(name)
	if _, err := os.Lstat(filepath.Join(state, recFile)); err == nil {
		fmt.Fprintf(stderr, "warden service: service %q already declared\n", name)
		return 1
	}
	if err := launch.WriteRequest(state, launch.ServiceRequestFile(name), req); err != nil {
		fmt.Fprintf(stderr, "warden service: %v\n", err)
		return 1
	}
	if !launch.WaitFile(state, recFile, 10*time.Second, func() bool { return !c.Alive() }) {
		fmt.Fprintf(stderr, "warden service: the supervisor did not answer\n")
		return 1
	}
	data, err := os.ReadFile(filepath.Join(state, recFile))
	var rec launch.ServiceRecord
	if err == nil {
		err = json.Unmarshal(data, &rec)
	}
	if err != nil || rec.Error != "" {
		fmt.Fprintf(stderr, "warden service: could not start %q: %v%s\n", name, err, rec.Error)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", data)
	return 0
}
