package wardencli

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandproof/sandproof/runner/warden/launch"
	"github.com/sandproof/sandproof/runner/warden/mutant"
	"github.com/sandproof/sandproof/runner/warden/proc"
	"github.com/sandproof/sandproof/runner/warden/receipt"
	"github.com/sandproof/sandproof/runner/warden/supervisor"
	"github.com/sandproof/sandproof/runner/warden/version"
)

// supervisorCommand is the hidden subcommand the front re-executes itself
// with, in a new session and without the caller's descriptors.
const supervisorCommand = "__supervisor"

var superviseFlags = []flagSpec{
	{name: "state"}, {name: "deadline"}, {name: "grace"}, {name: "launch-id"},
	{name: "proc-root"}, {name: "lease"}, {name: "user"}, {name: "detach", boolean: true},
	{name: "tier"},
}

// parseSupervise validates every flag; cfg.State is set as soon as it is
// known, even when a later flag is bad, so a refused receipt can be written.
func parseSupervise(args []string) (supervisor.Config, bool, error) {
	var cfg supervisor.Config
	p, err := parseFlags(args, superviseFlags, true)
	if err != nil {
		// Recover --state (and a valid --launch-id) for the refused
		// receipt even from a bad line.
		cfg.State = rawFlag(args, "state")
		if id := rawFlag(args, "launch-id"); launch.ValidID(id) {
			cfg.LaunchID = id
		}
		return cfg, false, err
	}
	cfg.State = p.values["state"]
	if !p.present["state"] {
		return cfg, false, usagef("--state is required")
	}
	if cfg.State == "" {
		return cfg, false, usagef("--state: empty path")
	}
	if !p.present["deadline"] {
		return cfg, false, usagef("--deadline is required")
	}
	if cfg.Deadline, err = ParseSeconds("deadline", p.values["deadline"], false); err != nil {
		return cfg, false, err
	}
	cfg.Grace = 2 * time.Second
	if p.present["grace"] {
		if cfg.Grace, err = ParseSeconds("grace", p.values["grace"], true); err != nil {
			return cfg, false, err
		}
	}
	if p.present["lease"] {
		if cfg.Lease, err = ParseSeconds("lease", p.values["lease"], false); err != nil {
			return cfg, false, err
		}
	}
	if p.present["launch-id"] {
		cfg.LaunchID = p.values["launch-id"]
		if !launch.ValidID(cfg.LaunchID) {
			return cfg, false, usagef("--launch-id: invalid id %q (want [A-Za-z0-9._-]{1,64})", cfg.LaunchID)
		}
	} else {
		var b [16]byte
		rand.Read(b[:])
		cfg.LaunchID = hex.EncodeToString(b[:])
	}
	cfg.ProcRoot = proc.DefaultRoot
	if p.present["proc-root"] {
		if p.values["proc-root"] == "" {
			return cfg, false, usagef("--proc-root: empty path")
		}
		cfg.ProcRoot = filepath.Clean(p.values["proc-root"])
		if !filepath.IsAbs(cfg.ProcRoot) {
			abs, err := filepath.Abs(cfg.ProcRoot)
			if err != nil {
				return cfg, false, usagef("--proc-root: %q: %v", p.values["proc-root"], err)
			}
			cfg.ProcRoot = abs
		}
	}
	if p.present["user"] {
		if cfg.User, err = parseUser(p.values["user"]); err != nil {
			return cfg, false, err
		}
	}
	cfg.Tier = supervisor.TierAuto
	if p.present["tier"] {
		switch v := p.values["tier"]; v {
		case supervisor.TierAuto, supervisor.TierSubreaper:
			cfg.Tier = v
		default:
			return cfg, false, usagef("--tier: invalid value %q (want %s or %s)", v, supervisor.TierAuto, supervisor.TierSubreaper)
		}
	}
	cfg.Argv = p.rest
	abs, err := filepath.Abs(cfg.State)
	if err != nil {
		return cfg, false, usagef("--state: %q: %v", cfg.State, err)
	}
	cfg.State = abs
	return cfg, p.present["detach"], nil
}

// rawFlag finds --name's value in a command line that did not parse.
func rawFlag(args []string, name string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// parseUser parses --user UID[:GID]. Names are not resolved: warden links no
// libc and must not depend on the image's user database. GID defaults to UID.
func parseUser(v string) (*supervisor.Credential, error) {
	uidS, gidS, hasGID := strings.Cut(v, ":")
	uid, err := strconv.ParseUint(uidS, 10, 32)
	if err != nil || uidS == "" || strings.ContainsAny(uidS, "+-") {
		return nil, usagef("--user: invalid uid in %q (want UID[:GID], numeric)", v)
	}
	gid := uid
	if hasGID {
		gid, err = strconv.ParseUint(gidS, 10, 32)
		if err != nil || gidS == "" || strings.ContainsAny(gidS, "+-") {
			return nil, usagef("--user: invalid gid in %q (want UID[:GID], numeric)", v)
		}
	}
	return &supervisor.Credential{UID: uint32(uid), GID: uint32(gid)}, nil
}

func runSupervise(args []string, stdout, stderr io.Writer) int {
	cfg, detach, err := parseSupervise(args)
	if err != nil {
		fmt.Fprintf(stderr, "warden supervise: %v\n", err)
		refuse(cfg.State, cfg.LaunchID, err)
		return 2
	}
	if err := launch.PrepareDir(cfg.State); err != nil {
		fmt.Fprintf(stderr, "warden supervise: %v\n", err)
		return 2
	}
	ready, pid, err := startSupervisor(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "warden supervise: start supervisor: %v\n", err)
		return 1
	}
	switch ready.Status {
	case "ok":
	case "claimed":
		fmt.Fprintf(stderr, "warden supervise: %s\n", ready.Message)
		return 2
	default:
		fmt.Fprintf(stderr, "warden supervise: %s\n", ready.Message)
		return 1
	}
	if detach {
		out, _ := json.Marshal(map[string]any{"launch_id": cfg.LaunchID, "supervisor_pid": pid, "state": cfg.State})
		fmt.Fprintf(stdout, "%s\n", out)
		return 0
	}
	return relay(cfg.State, stdout, stderr)
}

// refuse writes a refused receipt when the command line was bad but named a
// usable, unclaimed state dir, so a host waiting on it learns at once.
func refuse(state, launchID string, cause error) {
	if state == "" {
		return
	}
	abs, err := filepath.Abs(state)
	if err != nil || launch.PrepareDir(abs) != nil {
		return
	}
	self, err := launch.SelfIdentity()
	if err != nil {
		return
	}
	if launch.TakeClaim(abs, launch.Claim{By: "supervise", LaunchID: launchID, PID: self.PID, StartTime: self.StartTime}) != nil {
		return // claimed by someone else: leave their files alone
	}
	r := receipt.New(launchID, version.String())
	now := receipt.Timestamp(time.Now())
	r.StartedAt, r.EndedAt = now, now
	r.Cause = receipt.CauseRefused
	r.CleanupConfirmed = true
	r.Error = receipt.String("refused: " + cause.Error())
	receipt.Write(abs, r)
}

// startSupervisor re-executes warden as the supervisor in a new session,
// with /dev/null for stdin, stdout and stderr, and reads its readiness line.
func startSupervisor(cfg supervisor.Config) (supervisor.Ready, int, error) {
	var ready supervisor.Ready
	exe, err := os.Executable()
	if err != nil {
		return ready, 0, err
	}
	conf, err := json.Marshal(cfg)
	if err != nil {
		return ready, 0, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return ready, 0, err
	}
	defer r.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		w.Close()
		return ready, 0, err
	}
	defer devnull.Close()
	p, err := os.StartProcess(exe, []string{"warden", supervisorCommand, string(conf)}, &os.ProcAttr{
		Files: []*os.File{devnull, devnull, devnull, w},
		Sys:   &syscall.SysProcAttr{Setsid: !mutant.Is(mutant.CallerGroup)},
	})
	w.Close()
	if err != nil {
		return ready, 0, err
	}
	pid := p.Pid
	// The front never waits for the supervisor: it must outlive us, and
	// when we exit it is adopted by init or the nearest subreaper.
	p.Release()
	line, err := bufio.NewReader(r).ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return ready, pid, fmt.Errorf("supervisor said nothing: %w", err)
	}
	if err := json.Unmarshal(line, &ready); err != nil {
		return ready, pid, fmt.Errorf("supervisor readiness %q: %w", line, err)
	}
	return ready, pid, nil
}

// runSupervisor is the re-executed supervisor process.
func runSupervisor(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "warden: "+supervisorCommand+" is internal")
		return 2
	}
	var cfg supervisor.Config
	if err := json.Unmarshal([]byte(args[0]), &cfg); err != nil {
		return 2
	}
	ready := os.NewFile(3, "ready")
	return supervisor.Run(cfg, ready)
}

// relay is the foreground front: it copies the harness's output files to
// our stdout and stderr until the receipt appears, turns INT and TERM into a
// stop request, and exits 0 only for a confirmed cleanup with status 0.
func relay(state string, stdout, stderr io.Writer) int {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	out := &tail{path: filepath.Join(state, launch.StdoutFile), w: stdout}
	errT := &tail{path: filepath.Join(state, launch.StderrFile), w: stderr}
	defer out.close()
	defer errT.close()
	claim, _ := launch.ReadClaim(state)
	w := launch.Watch(state)
	defer w.Close()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		out.copy()
		errT.copy()
		if r, _, err := receipt.Read(state); err == nil {
			out.copy()
			errT.copy()
			if (r.CleanupConfirmed || mutant.Is(mutant.ConfirmExit)) && r.ReturnCode != nil && *r.ReturnCode == 0 {
				return 0
			}
			return 1
		}
		if claim != nil && !claim.Alive() {
			if _, _, err := receipt.Read(state); err == nil {
				continue
			}
			fmt.Fprintln(stderr, "warden supervise: supervisor gone without a receipt")
			return 1
		}
		select {
		case <-sigs:
			launch.WriteRequest(state, launch.StopFile, []byte(`{"services":false}`))
		case <-w.C:
		case <-tick.C:
		}
	}
}

// tail copies what is appended to a file.
type tail struct {
	path string
	w    io.Writer
	f    *os.File
}

func (t *tail) copy() {
	if t.f == nil {
		f, err := os.Open(t.path)
		if err != nil {
			return
		}
		t.f = f
	}
	io.Copy(t.w, t.f)
}

func (t *tail) close() {
	if t.f != nil {
		t.f.Close()
	}
}
