package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"time"

	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/warden/harness"
	"github.com/sandproof/sandproof/runner/warden/launch"
	"github.com/sandproof/sandproof/runner/warden/receipt"
)

// Exit statuses of `warden wait` and `warden stop --wait` (contract §4).
const (
	wardenConfirmed    = 0
	wardenNotConfirmed = 1
	wardenUsage        = 2
	wardenNoReceipt    = 3
	wardenGone         = 4
)

// Result is how one launch (an activation, or the install step) ended.
type Result struct {
	ID      string
	Receipt *receipt.Receipt
	// ReceiptJSON is the receipt as warden wrote it (unknown fields kept).
	ReceiptJSON json.RawMessage
	// Joined is set when this call found the launch already running and
	// waited for it; Replayed when its receipt was already written.
	Joined   bool
	Replayed bool
	// RunDir is the sandbox dir holding the launch's outputs.
	RunDir  string
	Seconds float64
}

// activation lets concurrent callers of one id in this process share one
// wait.
type activation struct {
	done chan struct{}
	res  *Result
	err  error
}

// Activate launches the harness with prompt under the activation id, or
// joins the launch already running under that id, or replays its receipt:
// the same id never runs twice. deadline is in seconds and must be finite
// and positive. A cancelled ctx returns without stopping the launch (the
// lease goes on being renewed until Close); a later Activate with the same
// id picks the result up.
func (s *Session) Activate(ctx context.Context, id, prompt string, deadline float64) (*Result, error) {
	if !launch.ValidID(id) || id == "install" {
		return nil, fmt.Errorf("activate %q: %w (want [A-Za-z0-9._-]{1,64}, not \"install\")", id, ErrBadID)
	}
	if _, err := checkDeadline(deadline); err != nil {
		return nil, fmt.Errorf("activate %q: %w", id, err)
	}
	s.mu.Lock()
	switch s.phase {
	case phaseSeeded:
	case phaseClosed:
		s.mu.Unlock()
		return nil, fmt.Errorf("activate %q: %w", id, ErrClosed)
	default:
		s.mu.Unlock()
		return nil, fmt.Errorf("activate %q: %w", id, ErrNotSeeded)
	}
	if a, ok := s.acts[id]; ok {
		s.mu.Unlock()
		return a.wait(ctx, id)
	}
	a := &activation{done: make(chan struct{})}
	s.acts[id] = a
	s.mu.Unlock()

	go func() {
		// The launch outlives the caller's ctx on purpose: losing the
		// waiter must not cancel or forget the run. Close ends it.
		defer close(a.done)
		runDir := path.Join(s.dir, "run", id)
		params, err := s.adapter.Launch(s.env(runDir, prompt))
		if err != nil {
			a.err = fmt.Errorf("activate %q: build params: %w", id, err)
			return
		}
		a.res, a.err = s.launch(context.Background(), id, params, deadline, false)
		if a.err != nil {
			a.err = fmt.Errorf("activate %q: %w", id, a.err)
		}
	}()
	return a.wait(ctx, id)
}

func (a *activation) wait(ctx context.Context, id string) (*Result, error) {
	select {
	case <-a.done:
		return a.res, a.err
	case <-ctx.Done():
		return nil, fmt.Errorf("activate %q: wait: %w (the launch goes on)", id, ctx.Err())
	}
}

// BringDeadlineForward has the supervisor of activation id end it as a
// deadline stop d from now (`warden renew --deadline`, contract §2
// deadline), never later than the deadline it was launched with. An error
// says the request was not recorded (the launch has ended, or the sandbox's
// warden predates the flag and refused it as usage): the launch keeps its
// own deadline.
func (s *Session) BringDeadlineForward(ctx context.Context, id string, d time.Duration) error {
	if !launch.ValidID(id) {
		return fmt.Errorf("bring the deadline of %q forward: %w", id, ErrBadID)
	}
	if d <= 0 {
		return fmt.Errorf("bring the deadline of %q forward: %v is not a positive time", id, d)
	}
	r, err := s.warden(ctx, "renew", "--state", s.x(path.Join(s.dir, "state", id)), "--deadline", secs(d))
	if err != nil {
		return err
	}
	if r.ExitCode != 0 {
		return fmt.Errorf("warden renew --deadline %s of %q: exit %d: %s", secs(d), id, r.ExitCode, firstLine(r.Stderr))
	}
	return nil
}

// warden runs the uploaded warden as the provider's default user.
func (s *Session) warden(ctx context.Context, args ...string) (provider.ExecResult, error) {
	argv := append([]string{s.x(path.Join(s.dir, "bin", "warden"))}, args...)
	return s.sb.Exec(ctx, provider.ExecSpec{Argv: argv})
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }

// launch runs one launch to its receipt: replay, join, or start it. put
// says the run dir and params are in the sandbox already (seed sends the
// install step's with the session tree).
func (s *Session) launch(ctx context.Context, id string, params harness.Params, deadline float64, put bool) (*Result, error) {
	dl, err := checkDeadline(deadline)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	state := path.Join(s.dir, "state", id)
	runDir := path.Join(s.dir, "run", id)
	res := &Result{ID: id, RunDir: runDir}
	finish := func(rec *receipt.Receipt, raw []byte) (*Result, error) {
		res.Receipt, res.ReceiptJSON = rec, raw
		res.Seconds = time.Since(start).Seconds()
		s.unlease(state)
		return res, nil
	}

	// Replay or join what an earlier host process started: a receipt or a
	// claim is already there. A handle that seeded the session itself
	// skips the look (two engine round trips): its state dir began empty
	// and this process launches each id once, so only another handle
	// opened on the same session could have started the id, and warden's
	// claim still makes the start below join that launch instead of
	// running the id twice.
	claimed := false
	if !s.seededHere {
		code, rec, raw, err := s.waitOnce(ctx, state, 0)
		if err != nil {
			return nil, err
		}
		switch code {
		case wardenConfirmed, wardenNotConfirmed:
			res.Replayed = true
			return finish(rec, raw)
		case wardenGone:
			return nil, fmt.Errorf("launch %q: %w", id, ErrSupervisorGone)
		}
		if claimed, err = s.exists(ctx, path.Join(state, "claim")); err != nil {
			return nil, err
		}
	}
	if claimed {
		res.Joined = true
	} else {
		started, err := s.start(ctx, id, state, runDir, params, dl, put)
		if err != nil {
			return nil, err
		}
		res.Joined = !started
	}
	s.lease(state)

	// The host's backstop: warden's own deadline, its stop, and a margin
	// for a busy machine. Past it the host asks for a stop itself.
	backstop := start.Add(time.Duration(deadline*float64(time.Second)) + 2*s.cfg.Grace + s.cfg.Lease + 30*time.Second)
	for {
		code, rec, raw, err := s.waitOnce(ctx, state, s.cfg.Slice)
		if err != nil {
			return nil, err
		}
		switch code {
		case wardenConfirmed, wardenNotConfirmed:
			return finish(rec, raw)
		case wardenGone:
			return nil, fmt.Errorf("launch %q: %w", id, ErrSupervisorGone)
		case wardenNoReceipt:
		default:
			return nil, fmt.Errorf("launch %q: warden wait: unexpected exit %d", id, code)
		}
		if time.Now().After(backstop) {
			code, rec, raw, err := s.stopWait(ctx, state)
			if err != nil {
				return nil, err
			}
			if code == wardenConfirmed || code == wardenNotConfirmed {
				return finish(rec, raw)
			}
			return nil, fmt.Errorf("launch %q: %w (warden stop exit %d)", id, ErrNoReceipt, code)
		}
	}
}

// paramsEntries returns the run dir and the params file of a launch, its
// defaults filled in and checked as warden run will check them.
func (s *Session) paramsEntries(id, runDir string, params harness.Params) ([]provider.Entry, error) {
	if params.Mode == "" {
		params.Mode = harness.ModeEvents
	}
	if params.Mode == harness.ModeEvents && params.Events == "" {
		params.Events = s.x(path.Join(runDir, "events.jsonl"))
	}
	if params.Stderr == "" {
		params.Stderr = s.x(path.Join(runDir, "stderr.log"))
	}
	if s.bashProvided {
		params.PathPrefix = append([]string{s.x(path.Join(s.dir, "bin"))}, params.PathPrefix...)
	}
	data, err := json.MarshalIndent(params, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode params of %q: %w", id, err)
	}
	if _, err := harness.ParseParams(data); err != nil {
		return nil, fmt.Errorf("check params of %q: %w", id, err)
	}
	return []provider.Entry{
		{Path: runDir, Dir: true, Mode: 0o700, UID: s.uid, GID: s.gid},
		{Path: path.Join(runDir, "params.json"), Data: data, Mode: 0o600, UID: s.uid, GID: s.gid},
	}, nil
}

// start writes the params (unless put says they are there) and starts the
// supervisor. It reports false when another caller claimed the state dir
// first (then this one joins).
func (s *Session) start(ctx context.Context, id, state, runDir string, params harness.Params, deadline string, put bool) (bool, error) {
	paramsPath := path.Join(runDir, "params.json")
	if !put {
		entries, err := s.paramsEntries(id, runDir, params)
		if err != nil {
			return false, err
		}
		if err := provider.Put(ctx, s.sb, entries); err != nil {
			return false, err
		}
	}
	wardenPath := s.x(path.Join(s.dir, "bin", "warden"))
	args := []string{"supervise", "--detach", "--state", s.x(state), "--deadline", deadline,
		"--grace", secs(s.cfg.Grace), "--lease", secs(s.cfg.Lease), "--launch-id", id}
	if s.cfg.User != "" {
		args = append(args, "--user", s.cfg.User)
	}
	args = append(args, "--", wardenPath, "run", "--params", s.x(paramsPath))
	r, err := s.warden(ctx, args...)
	if err != nil {
		return false, err
	}
	switch r.ExitCode {
	case 0:
		return true, nil
	case wardenUsage:
		// Claimed by a concurrent start of the same id (or fenced by a
		// stop): join it. Any other usage error leaves no claim.
		if ok, err := s.exists(ctx, path.Join(state, "claim")); err == nil && ok {
			return false, nil
		} else if err != nil {
			return false, err
		}
	}
	return false, fmt.Errorf("warden supervise %q: exit %d: %s", id, r.ExitCode, firstLine(r.Stderr))
}

// waitOnce runs `warden wait` for at most timeout and decodes the receipt
// when there is one.
func (s *Session) waitOnce(ctx context.Context, state string, timeout time.Duration) (int, *receipt.Receipt, []byte, error) {
	r, err := s.warden(ctx, "wait", "--state", s.x(state), "--timeout", secs(timeout))
	if err != nil {
		return 0, nil, nil, err
	}
	code, rec, raw, err := decodeReceipt("wait", state, r)
	return code, rec, raw, s.suspect(ctx, err)
}

// stopWait runs `warden stop --wait`.
func (s *Session) stopWait(ctx context.Context, state string) (int, *receipt.Receipt, []byte, error) {
	wait := 2*s.cfg.Grace + 30*time.Second
	r, err := s.warden(ctx, "stop", "--state", s.x(state), "--wait", secs(wait))
	if err != nil {
		return 0, nil, nil, err
	}
	code, rec, raw, err := decodeReceipt("stop", state, r)
	return code, rec, raw, s.suspect(ctx, err)
}

// suspect turns an unexpected warden status into a ProviderError when the
// sandbox is no longer running: a status read from a dying sandbox proves
// nothing, and certify must stop rather than verify.
func (s *Session) suspect(ctx context.Context, err error) error {
	if err == nil || provider.IsProviderError(err) {
		return err
	}
	info, ierr := s.sb.Inspect(ctx)
	if ierr != nil {
		return ierr
	}
	if !info.Exists || !info.Running {
		return provider.Errorf("exec", s.sb.ID(), fmt.Errorf("%w: %v", provider.ErrGone, err))
	}
	return err
}

func decodeReceipt(cmd, state string, r provider.ExecResult) (int, *receipt.Receipt, []byte, error) {
	switch r.ExitCode {
	case wardenConfirmed, wardenNotConfirmed:
		rec, err := receipt.Parse(r.Stdout)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("warden %s %q: decode receipt: %w", cmd, state, err)
		}
		return r.ExitCode, rec, r.Stdout, nil
	case wardenNoReceipt, wardenGone:
		return r.ExitCode, nil, nil, nil
	}
	return 0, nil, nil, fmt.Errorf("warden %s %q: exit %d: %s", cmd, state, r.ExitCode, firstLine(r.Stderr))
}

// exists reports whether a sandbox path exists, by downloading it: no
// command of the image is needed.
func (s *Session) exists(ctx context.Context, p string) (bool, error) {
	tmp, err := os.MkdirTemp("", "sandproof-exists-")
	if err != nil {
		return false, fmt.Errorf("check %q: %w", p, err)
	}
	defer os.RemoveAll(tmp)
	// Existence only: nothing needs writing, and a big tree is not read
	// through.
	_, err = provider.Fetch(ctx, s.sb, p, tmp+"/x", provider.FetchLimits{FileBytes: 1, Budget: provider.NewBudget(0), ReadBytes: 1 << 20})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, provider.ErrPathNotFound):
		return false, nil
	}
	return false, err
}

// lease adds a state dir to the renewer, starting it on first use. It
// renews every third of the lease until the launch's receipt is read or the
// session closes; a host that dies stops renewing, and the supervisor stops
// the launch with cause "lease".
func (s *Session) lease(state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leases[state] {
		return
	}
	s.leases[state] = true
	if !s.renewing {
		s.renewing = true
		s.renewWG.Add(1)
		go s.renew()
	}
}

func (s *Session) unlease(state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.leases, state)
}

func (s *Session) renew() {
	defer s.renewWG.Done()
	t := time.NewTicker(s.cfg.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-s.stopRenw:
			return
		case <-t.C:
		}
		s.mu.Lock()
		var states []string
		for st := range s.leases {
			states = append(states, st)
		}
		s.mu.Unlock()
		for _, st := range states {
			// Two thirds of the lease, not one: on a loaded host one renew
			// over the agent channel took longer than a third, each was
			// cancelled, and the supervisor stopped a healthy install with
			// cause "lease". A renew that succeeds late still renews in time.
			ctx, cancel := context.WithTimeout(context.Background(), 2*s.cfg.Lease/3)
			// Failures are not fatal here: the waiter sees the same
			// provider or supervisor trouble and reports it.
			s.warden(ctx, "renew", "--state", s.x(st))
			cancel()
		}
	}
}
