// Package supervisor is the body of warden's supervisor process: a session
// leader and child subreaper that claims the state dir, starts the harness in
// a process group of its own with the WARDEN_LAUNCH marker, owns every wait
// through one reaper, watches the deadline, the lease and stop requests, stops
// what the launch reached, and writes the receipt.
package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandproof/sandproof/runner/warden/threads"

	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/runner/warden/fds"
	"github.com/sandproof/sandproof/runner/warden/launch"
	"github.com/sandproof/sandproof/runner/warden/mutant"
	"github.com/sandproof/sandproof/runner/warden/proc"
	"github.com/sandproof/sandproof/runner/warden/receipt"
	"github.com/sandproof/sandproof/runner/warden/stop"
	"github.com/sandproof/sandproof/runner/warden/version"
)

// Config is what the front process validated and hands to the supervisor.
type Config struct {
	State    string        `json:"state"`
	Deadline time.Duration `json:"deadline"`
	Grace    time.Duration `json:"grace"`
	Lease    time.Duration `json:"lease"`
	LaunchID string        `json:"launch_id"`
	ProcRoot string        `json:"proc_root"`
	// User runs the harness as another user; nil keeps the caller's.
	User *Credential `json:"user,omitempty"`
	// Tier is --tier: TierAuto (or empty) uses a cgroup of the launch's own
	// where one can be made, TierSubreaper never does.
	Tier string   `json:"tier,omitempty"`
	Argv []string `json:"argv"`
}

// --tier values (a sandproof extension, docs/contract.md).
const (
	TierAuto      = "auto"
	TierSubreaper = "subreaper"
)

// Credential is --user UID[:GID].
type Credential struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

// Ready is the one line the supervisor writes to the front process on the
// readiness pipe before closing it.
type Ready struct {
	// Status: "ok" (the launch runs or already has its receipt), "claimed"
	// (another launch holds the state dir), "refused" (a receipt says why),
	// "error" (nothing could be recorded).
	Status        string `json:"status"`
	Message       string `json:"message,omitempty"`
	LaunchID      string `json:"launch_id,omitempty"`
	SupervisorPID int    `json:"supervisor_pid,omitempty"`
}

// ReservedThreads is how many OS threads the supervisor makes before the
// harness starts (see reserveThreads) beyond one per P: the threads its own
// blocking calls (environ reads that may hang on a D-state process, waits,
// file writes) could need at once, with room to spare.
const ReservedThreads = 16

// MaxProcs bounds the supervisor's GOMAXPROCS. Its scans and signal rounds
// run one goroutine per P once the table is large (proc.ScanPIDs, the stop
// engine's send), and each running goroutine needs an OS thread: on a
// 64-CPU host with no CPU limit the runtime would want 64 threads in the
// middle of a stop, when a harness at its pids limit lets it make none.
// With at most MaxProcs Ps, MaxProcs+ReservedThreads threads made up front
// cover every thread the supervisor can need at once.
const MaxProcs = 8

// BoundProcs lowers GOMAXPROCS to MaxProcs and returns the P count. warden
// calls it first thing; Run calls it again for callers that did not.
func BoundProcs() int {
	n := runtime.GOMAXPROCS(0)
	if n > MaxProcs {
		runtime.GOMAXPROCS(MaxProcs)
		n = MaxProcs
	}
	return n
}

// reserveThreads makes n OS threads now and leaves them idle (see package
// threads): seen here, a detached supervisor at its container's pids limit
// died silently and the bomb lived on without a receipt.
func reserveThreads(n int) {
	if mutant.Is(mutant.NoThreads) {
		return
	}
	threads.Reserve(n)
}

// stderrToLog points fd 2 at the supervisor's log when it is /dev/null (a
// detached supervisor): what the Go runtime itself prints before it dies
// (a fatal error, a panic) then lands where `diagnose` and people look.
func stderrToLog(log *os.File) {
	var st, null syscall.Stat_t
	if syscall.Fstat(2, &st) != nil || syscall.Stat(os.DevNull, &null) != nil {
		return
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFCHR && st.Rdev == null.Rdev {
		unix.Dup3(int(log.Fd()), 2, 0)
	}
}

// MinDeadline is the shortest deadline that is still launched: anything
// shorter expires before the launch and leaves a receipt saying so.
const MinDeadline = 10 * time.Millisecond

// exitInfo is one reaped child.
type exitInfo struct {
	status syscall.WaitStatus
}

type supervisor struct {
	cfg   Config
	fs    proc.FS
	self  proc.Identity
	start time.Time
	log   io.Writer

	mu       sync.Mutex
	exited   map[int]exitInfo
	exitedCh chan struct{}

	// deadline is the launch's deadline from start: cfg.Deadline, or
	// sooner once a `warden renew --deadline` brought it forward.
	deadline time.Duration

	harness    proc.Identity
	harnessPID int
	services   map[string]proc.Identity
	// old pins the processes that started before the launch, so the stop's
	// rescans skip them (stop.OldSet); nil on fake roots.
	old *stop.OldSet
	// fence rules out, without reading their stat, the processes that
	// started before the harness's fork (stop.BirthFence); nil on fake
	// roots.
	fence *stop.BirthFence
	// cgroup is the harness's own cgroup v2 (tier cgroup), nil in the
	// subreaper tiers; svcCgroup is its sibling the services start in, and
	// svcOutside counts services that could not be started there.
	cgroup     *stop.Cgroup
	svcCgroup  *stop.Cgroup
	svcOutside int
}

// Run is the supervisor process's main. ready may be nil. It returns the
// process exit status.
//
// Its phases each return what the next needs. A start that ends before the
// harness runs returns an ended: what the front process is told, and the
// exit status; any receipt is written before the telling.
func Run(cfg Config, ready *os.File) int {
	s := &supervisor{
		cfg:      cfg,
		fs:       proc.NewFS(cfg.ProcRoot),
		start:    time.Now(),
		deadline: cfg.Deadline,
		log:      io.Discard,
		exited:   map[int]exitInfo{},
		exitedCh: make(chan struct{}, 1),
		services: map[string]proc.Identity{},
	}
	tell := teller(cfg.LaunchID, ready)
	defer tell(Ready{Status: "error", Message: "supervisor ended before it was ready"})

	if e := s.claim(); e != nil {
		tell(e.ready)
		return e.code
	}
	st := s.prepareStart()
	if st.log != nil {
		defer st.log.Close()
	}
	r := st.receipt
	if e := s.refuseEarly(r); e != nil {
		tell(e.ready)
		return e.code
	}

	watch, term := s.listen()
	defer watch.Close()
	s.cgroup = s.makeCgroup()
	<-st.threads
	s.fence = <-st.fence
	defer s.fence.Close()
	since, e := s.launchHarness(r)
	if e != nil {
		tell(e.ready)
		return e.code
	}
	tell(Ready{Status: "ok"})
	s.primeOld(since)
	return s.finishRun(r, watch, term, since)
}

// teller returns the function that writes the one readiness line to ready
// and closes it; calls after the first, and every call when ready is nil,
// do nothing.
func teller(launchID string, ready *os.File) func(Ready) {
	return func(r Ready) {
		if ready == nil {
			return
		}
		r.LaunchID, r.SupervisorPID = launchID, os.Getpid()
		data, _ := json.Marshal(r)
		ready.Write(append(data, '\n'))
		ready.Close()
		ready = nil
	}
}

// ended is a start that ends before the harness runs: what the front
// process is told, and the supervisor's exit status.
type ended struct {
	ready Ready
	code  int
}

// claim makes the supervisor a subreaper that leaks none of the caller's
// descriptors and takes the state dir's claim in its own name; nil when it
// holds the claim.
func (s *supervisor) claim() *ended {
	cfg := s.cfg
	// Descriptors the caller leaked to us must not reach the harness.
	if !mutant.Is(mutant.SupFDLeak) {
		fds.CloexecFrom(3)
	}
	if err := becomeSubreaper(); err != nil {
		return &ended{Ready{Status: "error", Message: fmt.Sprintf("become child subreaper: %v", err)}, 1}
	}
	self, err := launch.SelfIdentity()
	if err != nil {
		return &ended{Ready{Status: "error", Message: fmt.Sprintf("read own identity: %v", err)}, 1}
	}
	s.self = self
	err = launch.TakeClaim(cfg.State, launch.Claim{
		By: "supervise", LaunchID: cfg.LaunchID, PID: self.PID, StartTime: self.StartTime,
		LeaseSeconds: cfg.Lease.Seconds(),
	})
	if errors.Is(err, launch.ErrClaimed) {
		return &ended{Ready{Status: "claimed", Message: fmt.Sprintf("--state %q is already claimed by another launch", cfg.State)}, 2}
	}
	if err != nil {
		return &ended{Ready{Status: "error", Message: err.Error()}, 1}
	}
	return nil
}

// startState is what prepareStart set going: the birth fence and the
// reserved threads, each ready when its channel delivers; the launch's log
// (nil when it could not be opened; Run closes it when it returns); and
// the receipt.
type startState struct {
	fence   <-chan *stop.BirthFence
	threads <-chan struct{}
	log     *os.File
	receipt *receipt.Receipt
}

// prepareStart starts what the harness's fork waits for beside the rest of
// the start, points the supervisor's log and fd 2 at the launch's log, and
// reserves the receipt.
func (s *supervisor) prepareStart() startState {
	cfg := s.cfg
	var st startState
	// The birth fence is armed before the harness's fork; its few ms of
	// waiting for the clock to tick, on a host with many processes
	// (stop.FenceWaitFrom), go on beside the rest of the start.
	fenceC := make(chan *stop.BirthFence, 1)
	go func() { fenceC <- stop.NewBirthFence(s.fs) }()
	st.fence = fenceC
	if lf, err := os.OpenFile(filepath.Join(cfg.State, launch.LogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_CLOEXEC, 0o600); err == nil {
		s.log = lf
		st.log = lf
		stderrToLog(lf)
	}
	// Before the harness runs, while threads can still be made: a harness
	// that fills the pids limit must not cost the supervisor its life. They
	// are made beside the start's other work (the receipt's reserve and its
	// fsyncs, the fence, the cgroup), after the claim and once fd 2 is the
	// log, so a runtime that dies making them still leaves a claim and says
	// why where `diagnose` looks; the harness is forked only once all exist.
	threads := make(chan struct{})
	go func() {
		reserveThreads(BoundProcs() + ReservedThreads)
		close(threads)
	}()
	st.threads = threads
	if err := receipt.Reserve(cfg.State); err != nil {
		s.logf("%v", err)
	}
	r := receipt.New(cfg.LaunchID, version.String())
	r.StartedAt = receipt.Timestamp(s.start)
	r.DeadlineSeconds = cfg.Deadline.Seconds()
	r.Tier = stop.NewSignaller(s.fs).Tier()
	st.receipt = r
	return st
}

// refuseEarly ends a launch that must not start, with its receipt written:
// an unreadable proc root, or a deadline that expires before the launch.
// nil lets it start.
func (s *supervisor) refuseEarly(r *receipt.Receipt) *ended {
	cfg := s.cfg
	if err := s.fs.Check(); err != nil {
		r.Cause = receipt.CauseRefused
		r.CleanupConfirmed = true
		r.Error = receipt.String(fmt.Sprintf("proc root unreadable, refusing to launch: %v", err))
		s.finish(r)
		return &ended{Ready{Status: "refused", Message: *r.Error}, 1}
	}
	if cfg.Deadline < MinDeadline && mutant.Is(mutant.NoSubCentisecond) {
		return &ended{Ready{Status: "ok"}, 1} // the mutant: no receipt at all
	}
	if cfg.Deadline < MinDeadline {
		r.Cause = receipt.CauseDeadline
		r.TimedOut = true
		r.CleanupConfirmed = true
		r.Error = receipt.String(fmt.Sprintf("deadline %v expired before launch", cfg.Deadline))
		s.finish(r)
		return &ended{Ready{Status: "ok"}, 1}
	}
	return nil
}

// listen starts the one reaper, reaps the children that ended before its
// handler was in place, and returns the state dir's watch (Run closes it)
// and the signals that stop the launch.
func (s *supervisor) listen() (*launch.Watcher, <-chan os.Signal) {
	chld := make(chan os.Signal, 16)
	signal.Notify(chld, syscall.SIGCHLD)
	term := make(chan os.Signal, 4)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go s.reap(chld)
	s.reapNow() // children that ended before the handler was in place
	return launch.Watch(s.cfg.State), term
}

// launchHarness forks the harness and returns the launch's start time in
// clock ticks (zero when neither the harness's stat nor the uptime could be
// read). A harness that could not start ends the launch, its receipt
// written.
func (s *supervisor) launchHarness(r *receipt.Receipt) (since uint64, e *ended) {
	env := harnessEnv(os.Environ(), s.cfg.LaunchID)
	pid, err := s.startHarness(env)
	if err != nil {
		s.dropCgroup()
		r.Cause = receipt.CauseExecFailed
		r.CleanupConfirmed = true
		r.ReturnCode = receipt.Int(execFailureCode(err))
		r.Error = receipt.String(err.Error())
		s.finish(r)
		return 0, &ended{Ready{Status: "ok"}, 1}
	}
	s.harnessPID = pid
	if s.cgroup != nil {
		r.Tier = receipt.TierCgroup
	}
	if st, err := s.fs.Stat(pid); err == nil {
		s.harness = st.Identity()
		since = st.StartTime
	} else if up, err := s.fs.Uptime(); err == nil {
		since = uint64(up * proc.ClockTicks)
	}
	return since, nil
}

// primeOld learns the host's older processes while the harness runs, not
// while a stop is waiting for the scan.
func (s *supervisor) primeOld(since uint64) {
	if s.fs.IsReal() && since > 0 && stop.PidfdSupported() {
		s.old = stop.NewOldSet(since, 1<<16)
		s.old.StartPriming(s.fs)
	}
}

// finishRun waits for the launch to end, stops what it reached, writes the
// receipt, serves the services' stop requests, and returns the exit status:
// 0 only for a confirmed cleanup of a harness that returned 0.
func (s *supervisor) finishRun(r *receipt.Receipt, watch *launch.Watcher, term <-chan os.Signal, since uint64) int {
	cause, reqErr := s.loop(watch, term)
	if reqErr != "" {
		r.Error = receipt.String(reqErr)
	}
	r.DeadlineSeconds = s.deadline.Seconds()
	s.stopLaunch(r, cause, since)
	s.finish(r)
	s.serveServices(watch, term, since)
	if r.CleanupConfirmed && r.ReturnCode != nil && *r.ReturnCode == 0 {
		return 0
	}
	return 1
}

func (s *supervisor) logf(format string, args ...any) {
	fmt.Fprintf(s.log, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

// harnessEnv puts WARDEN_LAUNCH first, appending this launch's id to an
// outer launch's list so the outer stop still reaches everything here.
func harnessEnv(environ []string, id string) []string {
	value := id
	out := make([]string, 1, len(environ)+1)
	for _, kv := range environ {
		if strings.HasPrefix(kv, proc.MarkerVar+"=") {
			if outer := kv[len(proc.MarkerVar)+1:]; outer != "" {
				value = outer + ":" + id
			}
			continue
		}
		out = append(out, kv)
	}
	out[0] = proc.MarkerVar + "=" + value
	return out
}

func (s *supervisor) openOutput(name string) (*os.File, error) {
	return os.OpenFile(filepath.Join(s.cfg.State, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_CLOEXEC, 0o600)
}

// startHarness forks COMMAND in a new process group. It never uses os/exec's
// Wait: the reaper owns every wait, so the harness's status cannot be lost
// to the loop that reaps adopted orphans.
func (s *supervisor) startHarness(env []string) (int, error) {
	path, err := lookPath(s.cfg.Argv[0], env)
	if err != nil {
		return 0, err
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer devnull.Close()
	stdout, err := s.openOutput(launch.StdoutFile)
	if err != nil {
		return 0, err
	}
	defer stdout.Close()
	stderr, err := s.openOutput(launch.StderrFile)
	if err != nil {
		return 0, err
	}
	defer stderr.Close()
	sys := &syscall.SysProcAttr{Setpgid: true}
	if u := s.cfg.User; u != nil {
		sys.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: []uint32{}}
	}
	attr := &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{devnull.Fd(), stdout.Fd(), stderr.Fd()},
		Sys:   sys,
	}
	// Into the cgroup at the fork itself (clone3 CLONE_INTO_CGROUP): a move
	// after the fork would let the harness fork once outside it.
	s.cgroup.CloneIntoCgroup(sys)
	pid, err := syscall.ForkExec(path, s.cfg.Argv, attr)
	if err != nil && s.cgroup != nil {
		// clone3 into the cgroup may be what failed (an old kernel, a
		// cgroup that refuses processes), or the exec: the start is tried
		// once more without the cgroup, and that answer counts.
		sys.UseCgroupFD, sys.CgroupFD = false, 0
		first := err
		if pid, err = syscall.ForkExec(path, s.cfg.Argv, attr); err == nil {
			s.logf("tier cgroup unavailable, using the subreaper tier: start in cgroup %s: %v", s.cgroup.Dir, first)
			s.dropCgroup()
		}
	}
	if err != nil {
		return 0, &execError{path: path, err: err}
	}
	// The harness is what the kernel's OOM killer should pick, never its
	// supervisor: raising a process's score needs no privilege. What the
	// harness forks in the moment before this write keeps the old score.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid), []byte(HarnessOOMScoreAdj+"\n"), 0); err != nil {
		s.logf("raise the harness's oom_score_adj: %v", err)
	}
	return pid, nil
}

// makeCgroup makes the harness's cgroup for tier cgroup, or says in the
// launch's log why the launch runs in a subreaper tier instead: a fake proc
// root, --tier subreaper, or no writable cgroup v2 (containers see a
// read-only tree). None of these is an error.
func (s *supervisor) makeCgroup() *stop.Cgroup {
	switch {
	case !s.fs.IsReal():
		s.logf("tier cgroup not used: fake proc root %s", s.cfg.ProcRoot)
		return nil
	case s.cfg.Tier == TierSubreaper:
		s.logf("tier cgroup not used: --tier %s", TierSubreaper)
		return nil
	}
	cg, err := stop.NewLaunchCgroup(s.cfg.LaunchID, stop.CgroupOptions{})
	if err != nil {
		s.logf("tier cgroup unavailable, using the subreaper tier: %v", err)
		return nil
	}
	s.logf("tier cgroup: harness cgroup %s", cg.Dir)
	return cg
}

// dropCgroup removes the harness's cgroup (empty by then) and forgets it.
func (s *supervisor) dropCgroup() {
	if s.cgroup == nil {
		return
	}
	if err := s.cgroup.Remove(); err != nil {
		s.logf("remove cgroup: %v", err)
	}
	s.cgroup = nil
}

// HarnessOOMScoreAdj is the harness's oom_score_adj: the highest, so
// under memory pressure the harness goes first and the supervisor lives to
// write the receipt.
const HarnessOOMScoreAdj = "1000"

type execError struct {
	path string
	err  error
}

func (e *execError) Error() string { return fmt.Sprintf("exec %q: %v", e.path, e.err) }
func (e *execError) Unwrap() error { return e.err }

// execFailureCode maps a start failure to 127 (not found) or 126 (found but
// not executable), the statuses shells use.
func execFailureCode(err error) int {
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, errNotFound) {
		return 127
	}
	return 126
}

var errNotFound = errors.New("not found in PATH")

// lookPath resolves name the way execvp does, with the harness's PATH.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			path = kv[5:]
		}
	}
	var denied error
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() {
			continue
		}
		if fi.Mode()&0o111 == 0 {
			if denied == nil {
				denied = fmt.Errorf("exec %q: %w", p, syscall.EACCES)
			}
			continue
		}
		return p, nil
	}
	if denied != nil {
		return "", denied
	}
	return "", fmt.Errorf("exec %q: %w", name, errNotFound)
}

// reap is the one reaper: on every SIGCHLD it collects every exited child
// with wait4(-1, WNOHANG) until none is left, recording each status.
func (s *supervisor) reap(chld <-chan os.Signal) {
	for range chld {
		s.reapNow()
	}
}

func (s *supervisor) reapNow() {
	for {
		var ws syscall.WaitStatus
		waitFor := -1
		if mutant.Is(mutant.NoReap) {
			if s.harnessPID == 0 {
				return
			}
			waitFor = s.harnessPID // adopted orphans are never reaped
		}
		pid, err := syscall.Wait4(waitFor, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
		if !ws.Exited() && !ws.Signaled() {
			continue
		}
		s.mu.Lock()
		s.exited[pid] = exitInfo{status: ws}
		s.mu.Unlock()
		select {
		case s.exitedCh <- struct{}{}:
		default:
		}
	}
}

func (s *supervisor) exitOf(pid int) (exitInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.exited[pid]
	return e, ok
}

// loop waits for the harness to exit, the deadline, a stop request, a
// signal to the supervisor, or the lease to lapse, and returns the cause.
func (s *supervisor) loop(watch *launch.Watcher, term <-chan os.Signal) (cause string, errMsg string) {
	wait := s.cfg.Deadline - time.Since(s.start)
	if mutant.Is(mutant.LateDeadline) {
		wait += s.cfg.Grace // the mutant: the timer armed after the grace
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	// The deadline's instant on the sandbox's one monotonic clock: what a
	// `warden renew --deadline` request is compared with.
	deadlineAt := launch.Monotonic() + wait
	var leaseC <-chan time.Time
	var lease *time.Timer
	if s.cfg.Lease > 0 {
		lease = time.NewTimer(s.cfg.Lease)
		defer lease.Stop()
		leaseC = lease.C
	}
	// Requests made before the watch was in place.
	pending := s.listRequests()
	for {
		var name string
		if len(pending) > 0 {
			name, pending = pending[0], pending[1:]
		} else {
			if _, ok := s.exitOf(s.harnessPID); ok {
				return receipt.CauseExited, ""
			}
			select {
			case <-s.exitedCh:
				continue
			case <-deadline.C:
				return receipt.CauseDeadline, ""
			case <-leaseC:
				if mutant.Is(mutant.NoLease) {
					leaseC = nil
					continue
				}
				return receipt.CauseLease, ""
			case sig := <-term:
				s.logf("received %v: stopping", sig)
				return receipt.CauseStopped, ""
			case name = <-watch.C:
			}
		}
		switch {
		case name == launch.StopFile:
			return receipt.CauseStopped, ""
		case name == launch.DeadlineFile:
			s.bringDeadlineForward(deadline, &deadlineAt)
		case name == launch.RenewFile:
			if lease != nil {
				if !lease.Stop() {
					select {
					case <-lease.C:
					default:
					}
				}
				lease.Reset(s.cfg.Lease)
			}
		case strings.HasPrefix(name, "service.") && strings.HasSuffix(name, ".request"):
			s.startService(name)
		}
	}
}

// bringDeadlineForward serves a `warden renew --deadline` request: the
// deadline becomes the request's instant when that comes sooner, never
// later (the launch's --deadline stays its ceiling), and the receipt's
// deadline_seconds says so. A request already past ends the launch at
// once, as a deadline.
func (s *supervisor) bringDeadlineForward(timer *time.Timer, at *time.Duration) {
	req, err := launch.ReadDeadlineRequest(s.cfg.State)
	if err != nil {
		s.logf("deadline request ignored: %v", err)
		return
	}
	if req >= *at && !mutant.Is(mutant.DeadlineExtends) {
		s.logf("deadline request ignored: it falls %v after the deadline the launch has", req-*at)
		return
	}
	*at = req
	if !timer.Stop() {
		select {
		case <-timer.C:
		default:
		}
	}
	left := max(req-launch.Monotonic(), 0)
	timer.Reset(left)
	s.deadline = time.Since(s.start) + left
	s.logf("deadline brought forward: %v from now, %v from the start", left, s.deadline)
}

func (s *supervisor) listRequests() []string {
	entries, _ := os.ReadDir(s.cfg.State)
	var names []string
	for _, e := range entries {
		n := e.Name()
		if n == launch.StopFile || n == launch.DeadlineFile || strings.HasPrefix(n, "service.") && strings.HasSuffix(n, ".request") {
			names = append(names, n)
		}
	}
	return names
}

func (s *supervisor) scanner(since uint64) *stop.Scanner {
	var services []proc.Identity
	for _, id := range s.services {
		services = append(services, id)
	}
	return &stop.Scanner{FS: s.fs, Old: s.old, Fence: s.fence, Launch: stop.Launch{
		ID: s.cfg.LaunchID, Self: s.self.PID, Harness: s.harnessIdentity(), Since: since,
		Services: services,
	}}
}

// harnessIdentity returns the harness's identity; on a fake root, where the
// harness may only appear after the fork, it is looked up when needed.
func (s *supervisor) harnessIdentity() proc.Identity {
	if s.harness.PID == 0 && s.harnessPID > 0 {
		if st, err := s.fs.Stat(s.harnessPID); err == nil {
			s.harness = st.Identity()
		}
	}
	return s.harness
}

// stopLaunch stops everything the launch reached and fills in the receipt.
func (s *supervisor) stopLaunch(r *receipt.Receipt, cause string, since uint64) {
	r.Cause = cause
	r.TimedOut = cause == receipt.CauseDeadline
	r.Stopped = cause == receipt.CauseStopped
	eng := &stop.Engine{
		Scanner:   s.scanner(since),
		Signaller: stop.NewSignaller(s.fs),
		Grace:     s.cfg.Grace,
		// Fake roots keep a full scan every round: their specs step a
		// simulated kernel per round and expect the whole table each time.
		QuickFirstRound: s.fs.IsReal(),
		Cgroup:          s.cgroup,
		Log:             func(line string) { s.logf("%s", line) },
		Reap:            s.reapNow,
	}
	res := eng.Run(context.Background())
	// Every process below the supervisor is dead now; collect the zombies
	// it adopted before the receipt, so none outlives the supervisor and
	// lands on whatever reaps above it (a soak, a container's init).
	s.reapAdopted()
	s.dropCgroup()
	s.logf("stop (%s): %d reached, %d survivors, %d rounds (%d unsettled), %.3fs", cause, len(res.Reached), len(res.Survivors), res.Rounds, res.Unsettled, res.Seconds)
	r.StopSeconds = res.Seconds
	r.Reached = nonNil(res.Reached)
	r.Survivors = nonNil(res.Survivors)
	r.Unverified = nonNil(res.Unverified)
	r.Preserved = nonNil(res.Preserved)
	r.CleanupConfirmed = res.Confirmed
	if res.Err != nil && r.Error == nil {
		r.Error = receipt.String(fmt.Sprintf("scan: %v", res.Err))
	}
	// The harness is dead once the stop is confirmed; wait (bounded) for the
	// reaper to hand over its status rather than reporting it unknown.
	harnessGone := res.Confirmed || !containsPID(res.Survivors, s.harnessPID)
	if harnessGone && s.fs.IsReal() {
		limit := time.After(2 * time.Second)
	wait:
		for {
			if _, ok := s.exitOf(s.harnessPID); ok {
				break
			}
			select {
			case <-s.exitedCh:
			case <-limit:
				break wait
			case <-time.After(20 * time.Millisecond):
				s.reapNow()
			}
		}
	}
	if e, ok := s.exitOf(s.harnessPID); ok {
		ws := e.status
		switch {
		case ws.Exited():
			r.ReturnCode = receipt.Int(ws.ExitStatus())
		case ws.Signaled():
			r.ReturnCode = receipt.Int(128 + int(ws.Signal()))
			r.Signal = receipt.String(stop.SignalName(ws.Signal()))
		}
	}
}

// reapAdopted reaps until the kernel lists no zombie child of the
// supervisor, for at most a second. One pass is not enough: /proc shows a
// multi-threaded process as a zombie once its main thread has exited, but
// wait4 can collect it only when its last thread is gone.
func (s *supervisor) reapAdopted() {
	deadline := time.Now().Add(time.Second)
	for {
		s.reapNow()
		kids, err := s.fs.Children(s.self.PID)
		if err != nil || time.Now().After(deadline) {
			return
		}
		zombie := false
		for _, pid := range kids {
			if st, err := s.fs.Stat(pid); err == nil && st.State == 'Z' {
				zombie = true
				break
			}
		}
		if !zombie {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func containsPID(ms []stop.Member, pid int) bool {
	for _, m := range ms {
		if m.PID == pid {
			return true
		}
	}
	return false
}

func nonNil(ms []stop.Member) []stop.Member {
	if ms == nil {
		return []stop.Member{}
	}
	return ms
}

// finish stamps and writes the receipt.
func (s *supervisor) finish(r *receipt.Receipt) {
	r.EndedAt = receipt.Timestamp(time.Now())
	if r.ReturnCode == nil && mutant.Is(mutant.MadeUpZero) {
		r.ReturnCode = receipt.Int(0)
	}
	if err := receipt.Write(s.cfg.State, r); err != nil {
		s.logf("write receipt: %v", err)
	}
}

// becomeSubreaper makes adopted orphans come back to the supervisor.
func becomeSubreaper() error {
	if mutant.Is(mutant.NoSubreaper) {
		return nil
	}
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}
