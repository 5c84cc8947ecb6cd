package certify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/agenthost"
	"github.com/sandproof/sandproof/runner/host/hostfile"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/relay"
	"github.com/sandproof/sandproof/runner/host/session"
	"github.com/sandproof/sandproof/runner/model"
	"github.com/sandproof/sandproof/runner/probe"
)

// runCase runs one case through the protocol of contract §7, one method
// per stage, each taking what the one before returned: setup (owner),
// seed and activation (adapter), close, verify (owner), teardown
// (owner). Whatever happens, the case ends with an evidence record and
// its container removed.
func (r *runner) runCase(ctx context.Context, c caseSpec) (_ *reports.Evidence, timing CaseTiming) {
	cr := r.newCase(c)
	defer cr.intr.watch()()
	start := time.Now()
	defer func() {
		cr.endTiming(start)
		timing = cr.timing
	}()
	if err := os.MkdirAll(cr.dir, 0o755); err != nil {
		cr.check("setup.case_dir", clauseSetup, false, "create %s: %v", cr.dir, err)
		cr.finish()
		return cr.ev, cr.timing
	}
	if why := c.scenario.unsupported(c.adapter); why != "" {
		// Nothing of the harness is tried: the manifest says why.
		cr.skipScenario(why)
		cr.finish()
		return cr.ev, cr.timing
	}
	ms, ok := cr.startModel()
	if !ok {
		cr.finish()
		return cr.ev, cr.timing
	}
	defer stopModel(ms)

	bx, setupErr := cr.setup(ctx, ms)
	skip := joinSkip(c.skip, bx.lacks)
	switch {
	case setupErr != nil:
	case skip != "":
		cr.skipCase(skip)
	case !cr.intr.interruptReached():
		cr.runSession(ctx, ms, bx)
	}
	ms.rel.Close()
	cr.ev.ModelCalls = ms.rel.ModelCalls()
	// The relay is closed, so nothing writes into the case's dir any more:
	// its canary scan (host files only) runs beside the teardown (engine
	// calls only) and is judged after it, in the checks' order.
	scan := cr.startCanaryScan()
	cr.teardown(bx)
	bounds := ms.rel.Bounds()
	cr.checkRelay(bounds, ms.modelUnrecorded())
	cr.checkCanary(bounds, <-scan)
	cr.finish()
	return cr.ev, cr.timing
}

// runSession is the adapter's part of a set-up case and the owner's
// verify after it: seed, the activation, close, verify. A stage whose
// error stops the case (stopsCase) ends it there; close runs whenever a
// session exists and nothing stopped the case.
func (cr *caseRun) runSession(ctx context.Context, ms modelSide, bx sandboxed) {
	if before := cr.c.scenario.beforeSeed; before != nil {
		var err error
		if bx, err = before(cr, ctx, bx); err != nil {
			return
		}
	}
	sess, err := cr.seed(ctx, bx)
	var act activationResult
	if err == nil {
		act, err = cr.activate(ctx, sess, ms, bx.sb)
	}
	var cl closed
	if sess != nil && !stopsCase(err) {
		cl, err = cr.closeSession(ctx, sess, bx.actx, act)
	}
	// The agent is gone before the owner looks: verify sees no process
	// of the adapter's side, the agent included.
	cr.stopAgent(bx.agent)
	if stopsCase(err) || cl.res == nil || cr.intr.interruptReached() {
		return
	}
	cr.verifyCase(ctx, ms, bx, act, cl.res.ScratchRemoved)
}

// joinSkip joins why planning skips a case and what setup found the
// image lacks.
func joinSkip(planned, lacks string) string {
	switch {
	case lacks == "":
		return planned
	case planned == "":
		return lacks
	}
	return planned + "; " + lacks
}

// newCase makes the case's evidence record and derives what its stages
// share: the task user, its home and the owner's markers.
func (r *runner) newCase(c caseSpec) *caseRun {
	m := c.adapter
	ev := &reports.Evidence{
		Schema: reports.Schema, RunID: r.runID, CaseID: c.id, Attempt: max(1, c.attempt), Harness: m.Name, Image: c.image.Name,
		Shard: r.opts.Shard.String(), MatrixSHA256: r.matrix.SHA256, MatrixCases: len(r.matrix.Cases),
		Scenario: c.scenario.Name, Status: reports.StatusUnknown, OutputItemTypes: map[string]int{}, CloseObservationGaps: []string{},
		Provenance: reports.Provenance{WardenSHA256: r.wardenSHA, AdapterSHA256: m.SHA256, SuiteVersion: suiteVersion(),
			StartedAt: time.Now().UTC(), Host: r.host},
		CaseDir: path.Join("cases", caseDirName(c.id)),
	}
	cr := &caseRun{r: r, c: c, ev: ev, dir: filepath.Join(r.opts.Out, "cases", caseDirName(c.id)),
		timing: CaseTiming{CaseID: c.id, Image: c.image.Name}, owner: ownerPathsFor(r.opts, c.requires),
		intr: interruptWatch{ic: r.opts.Interrupt}}
	id := "c-" + randomHex(6)
	cr.sess = sessionPaths{id: id, dir: path.Join(BaseDir, id), home: path.Join(BaseDir, id, "home")}
	if h := r.harness[c.rt]; h != nil {
		hc := *h
		ev.HarnessRuntime = &hc
	}
	return cr
}

// ownerPathsFor is the task user (opts.User, 1000:1000 unless set), its
// home, the four XDG markers under it and the files the declared
// requirements look for.
func ownerPathsFor(opts Options, requires []string) ownerPaths {
	o := ownerPaths{uid: 1000, gid: 1000, home: opts.TaskHome}
	if u, g, ok := strings.Cut(opts.User, ":"); ok {
		o.uid, _ = strconv.Atoi(u)
		o.gid, _ = strconv.Atoi(g)
	}
	o.markers = session.OwnerMarkers(o.home)
	for _, q := range requires {
		if adapter.IsPathRequirement(q) {
			o.reqPaths = append(o.reqPaths, q)
			continue
		}
		o.reqPaths = append(o.reqPaths, requirementPaths[q]...)
	}
	// What verify hashes: the markers. The requirements' files are the
	// image's, looked up once at setup (--present), never read.
	o.allMarkers = slices.Clone(o.markers)
	return o
}

// endTiming closes the case's clock: its whole time, and what sandproof
// added to the harness's run and install.
func (cr *caseRun) endTiming(start time.Time) {
	ev := cr.ev
	ev.EndedAt = time.Now().UTC()
	ev.Seconds = time.Since(start).Seconds()
	cr.timing.Seconds = ev.Seconds
	cr.timing.Overhead = ev.Seconds - cr.timing.Harness - cr.timing.Install
	cr.timing.Status = ev.Status
	if ev.Status == reports.StatusUnknown {
		cr.timing.Infrastructure = ev.Infrastructure
	}
}

// startModel starts the scripted model (one server per case on the host's
// loopback, so its calls are the case's own; it requires the upstream key)
// unless the run has a real one, and the case's recording relay in front
// of it, which holds the canary in and the upstream key out. It reports
// false, with a failed check, when either cannot start.
func (cr *caseRun) startModel() (modelSide, bool) {
	r := cr.r
	var ms modelSide
	upstream, modelName := r.opts.ModelURL, r.opts.ModelURL
	if upstream == "" {
		ms.stall = newStallSignal()
		srv, err := model.Start(model.Options{Addr: "127.0.0.1:0", APIKey: r.upstreamKey, LogPath: filepath.Join(cr.dir, "model_calls.jsonl"),
			Script: cr.c.scenario.Script, WriterPath: writerFile, OnStall: ms.stall.began, RetryAfter: faultRetryAfter,
			RecordBytes: relayLimits(r.opts.Relay, cr.c.adapter).RecordBytes})
		if err != nil {
			cr.check("setup.model", clauseSetup, false, "start the scripted model: %v", err)
			return ms, false
		}
		ms.srv = srv
		upstream, modelName = srv.URL(), "scripted"
	}
	rel, err := startRelay(upstream, r.key, r.upstreamKey, filepath.Join(cr.dir, "model_relay.jsonl"), relayLimits(r.opts.Relay, cr.c.adapter))
	if err != nil {
		cr.check("setup.relay", clauseSetup, false, "start the model relay: %v", err)
		if ms.srv != nil {
			ms.srv.Close()
		}
		return ms, false
	}
	ms.rel, ms.modelName = rel, modelName
	ms.challenge = model.ChallengePrefix + randomHex(16)
	ms.actx = adapter.Context{ModelURL: rel.URL(), Model: r.opts.ModelName, TaskDir: TaskDir, RuntimeHostDir: cr.c.runtime}
	return ms, true
}

// relayLimits are the run's relay limits for an adapter: it may need
// larger bodies than the run's cap (its manifest's relay.request_bytes);
// it never lowers it.
func relayLimits(lim relay.Limits, m *adapter.Manifest) relay.Limits {
	if n := m.Relay.RequestBytes; n > 0 {
		if lim.RequestBytes == 0 {
			lim.RequestBytes = relay.DefaultLimits.RequestBytes
		}
		lim.RequestBytes = max(n, lim.RequestBytes)
	}
	return lim
}

// modelUnrecorded counts the calls the scripted model answered past its
// log's budget (0 with a real upstream).
func (ms modelSide) modelUnrecorded() int {
	if ms.srv == nil {
		return 0
	}
	return ms.srv.Unrecorded()
}

func stopModel(ms modelSide) {
	ms.rel.Close()
	if ms.srv != nil {
		ms.srv.Close()
	}
}

// setup is stage 1 (owner): the container, /task, the markers and the
// probe's baseline, the challenge; it finds the requirements the image
// lacks, which skip the case.
func (cr *caseRun) setup(ctx context.Context, ms modelSide) (sandboxed, error) {
	r, c, m := cr.r, cr.c, cr.c.adapter
	bx := sandboxed{actx: ms.actx}
	vols := []provider.VolumeMount{{Volume: r.ownerVol, Target: ownerDir}}
	if v := r.rtVol[c.rt]; v != "" && m.Runtime.Delivery == adapter.DeliveryMount {
		bx.actx.RuntimeDir = adapter.RuntimeMountDir(m.Name)
		vols = append(vols, provider.VolumeMount{Volume: v, Target: bx.actx.RuntimeDir})
	}
	if v := r.layerVol[c.rt]; v != "" {
		vols = append(vols, provider.VolumeMount{Volume: v, Target: adapter.GlibcLayerMountDir})
		bx.actx.RuntimeEnv = map[string]string{"LD_LIBRARY_PATH": adapter.GlibcLayerMountDir}
	}
	err := cr.stage(reports.StageSetup, func() error {
		t := time.Now()
		sb, err := cr.createSandbox(ctx, vols)
		cr.timing.Container += time.Since(t).Seconds()
		if err != nil {
			return err
		}
		bx.sb = sb
		// The probe's setup run becomes the session agent once the
		// baseline is printed: the agent starts after the baseline, never
		// in it (it is the baseline's self, which probe.Diff counts as
		// new), so an agent that outlived its stop is a new process to
		// verify.
		relayAddr, err := hostPort(ms.rel.URL())
		if err != nil {
			return err
		}
		stderr := &hostfile.HeadBuffer{Max: 64 << 10}
		var proc *provider.Process
		if bx.before, proc, err = cr.ownerSetup(ctx, sb, ms.challenge, cr.agentArgv(relayAddr), stderr); err != nil {
			return err
		}
		if bx.agent, err = attachAgent(ctx, sb, proc, relayAddr, stderr); err != nil {
			return err
		}
		cr.ev.Before = beforeOf(bx.before, cr.owner.markers)
		if missing := missingRequirements(c.requires, bx.before, r.opts.Bash != ""); len(missing) > 0 {
			bx.lacks = fmt.Sprintf("image %s lacks %s", c.image.Name, strings.Join(missing, "; "))
		}
		return nil
	})
	cr.checkErr("setup", clauseSetup, err, "container, /task, the challenge, four XDG markers, probe baseline: %s", errText(err, r.key))
	return bx, err
}

// ownerSetup is setup's part in the created sandbox: what the engine
// applied, read back, then the probe's one run as root, which makes /task
// and the markers, writes the challenge (readable by the harness user
// only, never in the prompt, unknown to the adapter), takes the baseline
// and then becomes then (the session agent). It is one streamed exec: the
// challenge goes as a frame on its stdin, the baseline comes back as a
// frame on its stdout (probe.ReadFrame), and what follows on both is
// then's. The process returned is then's, running; stderr gets the
// probe's and then then's.
func (cr *caseRun) ownerSetup(ctx context.Context, sb provider.Sandbox, challenge string, then []string, stderr io.Writer) (probe.Snapshot, *provider.Process, error) {
	st, ok := provider.As[provider.Streamer](sb)
	if !ok {
		return probe.Snapshot{}, nil, fmt.Errorf("probe setup: the %T sandbox cannot stream a command (no provider.Streamer)", sb)
	}
	// The read-back of what the engine applied and the probe's run need
	// nothing of each other: one engine round trip goes beside the other.
	inspected := make(chan error, 1)
	go func() { inspected <- cr.inspectSandbox(ctx, sb) }()
	s, proc, err := cr.setupRun(ctx, sb, st, challenge, then, stderr)
	if ierr := <-inspected; ierr != nil {
		if proc != nil {
			endProcess(proc)
		}
		return probe.Snapshot{}, nil, ierr
	}
	return s, proc, err
}

// setupRun is ownerSetup's one streamed exec, up to the baseline.
func (cr *caseRun) setupRun(ctx context.Context, sb provider.Sandbox, st provider.Streamer, challenge string, then []string, stderr io.Writer) (probe.Snapshot, *provider.Process, error) {
	argv := append(append(cr.setupArgv(), "--"), then...)
	// The process outlives ctx (it becomes the session's channel); only
	// the wait for the baseline is bounded by it.
	var errb hostfile.HeadBuffer
	errb.Max = 16 << 10
	proc, err := st.Start(context.WithoutCancel(ctx), provider.ExecSpec{Argv: argv, User: "0"}, io.MultiWriter(stderr, &errb))
	if err != nil {
		return probe.Snapshot{}, nil, provider.Errorf("probe setup", sb.ID(), err)
	}
	s, err := readBaseline(ctx, cr.r.opts.ownerDeadline(), proc, challenge)
	if err != nil {
		code, werr := endProcess(proc)
		switch {
		case ownerBlind(err):
			// The provider did not answer in time, as ownerSandbox's.
			return s, nil, provider.Errorf("probe setup", sb.ID(), err)
		case errors.Is(err, io.EOF) && werr == nil && code == probe.ExitDeadline:
			return s, nil, probeDeadline(argv, []byte(errb.String()))
		case errors.Is(err, io.EOF) && werr == nil:
			// The probe printed nothing: its own error is on its stderr.
			return s, nil, fmt.Errorf("probe setup: exit %d: %s", code, strings.TrimSpace(errb.String()))
		case werr != nil:
			err = fmt.Errorf("%w (the exec: %v)", err, werr)
		}
		if e := strings.TrimSpace(errb.String()); e != "" {
			err = fmt.Errorf("%w; its stderr: %s", err, truncate(e, 300))
		}
		return s, nil, fmt.Errorf("probe setup: %w", err)
	}
	return s, proc, nil
}

// maxSnapshot bounds the baseline's frame (a process table of some
// thousand entries is well under it).
const maxSnapshot = 16 << 20

// readBaseline writes the challenge's frame to the setup run's stdin and
// reads the baseline's frame from its stdout, nothing past either: the
// rest of both streams is the agent's. It waits at most d (the owner's
// deadline) for the frame.
func readBaseline(ctx context.Context, d time.Duration, proc *provider.Process, challenge string) (probe.Snapshot, error) {
	type read struct {
		b   []byte
		err error
	}
	got := make(chan read, 1)
	go func() {
		b, err := probe.ReadFrame(proc.Stdout, probe.TagSnapshot, maxSnapshot)
		got <- read{b, err}
	}()
	if err := probe.WriteFrame(proc.Stdin, probe.TagSecret, challengeBytes(challenge)); err != nil {
		return probe.Snapshot{}, err
	}
	var r read
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	select {
	case r = <-got:
	case <-ctx.Done():
		return probe.Snapshot{}, fmt.Errorf("wait for the baseline: %w", ctx.Err())
	case <-deadline.C:
		return probe.Snapshot{}, &ownerDeadlineError{op: "probe setup (its baseline)", after: d, by: "the host"}
	}
	if r.err != nil {
		return probe.Snapshot{}, r.err
	}
	var s probe.Snapshot
	if err := json.Unmarshal(r.b, &s); err != nil {
		return s, fmt.Errorf("decode probe snapshot: %w", err)
	}
	if s.Schema != probe.Schema {
		return s, fmt.Errorf("decode probe snapshot: schema %q, want %q", s.Schema, probe.Schema)
	}
	return s, nil
}

// endProcess ends a setup run the host will not talk to: its stdin
// closed (an agent exits on the EOF), its stdout drained, its status
// waited for at most 10 s (teardown removes the container anyway).
func endProcess(proc *provider.Process) (int, error) {
	proc.Stdin.Close()
	go io.Copy(io.Discard, proc.Stdout)
	type status struct {
		code int
		err  error
	}
	done := make(chan status, 1)
	go func() {
		code, err := proc.Wait()
		done <- status{code, err}
	}()
	select {
	case s := <-done:
		return s.code, s.err
	case <-time.After(10 * time.Second):
		return -1, errors.New("no exit status within 10 s")
	}
}

// createSandbox creates the case's container with the owner's volumes.
func (cr *caseRun) createSandbox(ctx context.Context, vols []provider.VolumeMount) (provider.Sandbox, error) {
	r, c, m := cr.r, cr.c, cr.c.adapter
	sb, err := r.prov.Create(ctx, provider.CreateSpec{
		Image: c.image.Ref, Network: r.opts.Network, Volumes: vols, Expire: 30 * time.Minute,
		Labels: map[string]string{provider.LabelRun: r.runID, "sandproof.case": caseDirName(c.id)},
		Limits: r.opts.Limits,
		// The key reaches the harness only through the environment.
		Env: []string{m.APIKeyEnv + "=" + r.key},
	})
	if err != nil {
		return nil, err
	}
	cr.sb = sb
	if os.Getenv("SANDPROOF_TRACE") != "" {
		sb = provider.Trace(sb, func(format string, args ...any) { r.progress(c.id+": "+format, args...) })
	}
	// Every owner step on it from here on has the owner's deadline.
	return withOwnerDeadline(sb, r.opts.ownerDeadline()), nil
}

// inspectSandbox records what the engine applies, read back, not what
// was asked for.
func (cr *caseRun) inspectSandbox(ctx context.Context, sb provider.Sandbox) error {
	r, ev := cr.r, cr.ev
	info, err := sb.Inspect(ctx)
	if err != nil {
		return err
	}
	ev.ImageID = info.ImageID
	ev.Sandbox = &reports.Sandbox{Network: r.opts.Network, Provider: r.prov.Name(), Engine: info.Engine}
	if info.Network != "" {
		ev.Sandbox.Network = info.Network
	}
	if l := info.Limits; l != nil {
		ev.Sandbox.PidsLimit, ev.Sandbox.MemoryBytes, ev.Sandbox.CPUShares, ev.Sandbox.OOMScoreAdj = l.PidsLimit, l.MemoryBytes, l.CPUShares, l.OOMScoreAdj
	}
	return nil
}

// challengeBytes is the challenge file's content.
func challengeBytes(challenge string) []byte { return []byte(challenge + "\n") }

// setupArgv is the one probe run that makes /task, the marker dirs and
// markers (owned by the task user), writes the challenge it reads from
// its stdin (mode 0400, the task user's) and takes the baseline right
// after.
func (cr *caseRun) setupArgv() []string {
	o := cr.owner
	dirs := []string{TaskDir, o.home + "/.local"}
	for _, mk := range o.markers {
		dirs = append(dirs, path.Dir(path.Dir(mk)), path.Dir(mk))
	}
	argv := []string{probePath, "setup", "--owner", fmt.Sprintf("%d:%d", o.uid, o.gid),
		"--dirs", strings.Join(dirs, ","), "--write-markers", strings.Join(o.markers, ","), "--secret", ChallengeFile}
	if len(o.reqPaths) > 0 {
		argv = append(argv, "--present", strings.Join(o.reqPaths, ","))
	}
	return argv
}

// skipCase records a case that setup found it cannot run.
func (cr *caseRun) skipCase(skip string) {
	cr.ev.Status = reports.StatusSkipped
	cr.ev.SkipReason = skip
	cr.ev.Checks = append(cr.ev.Checks, reports.Check{ID: "requirements", Status: reports.StatusSkipped, Clause: clauseSkip, Detail: skip})
	cr.r.progress("%s: skipped: %s", cr.c.id, skip)
}

// seed is stage 2a (adapter): the session's private dirs, warden, the
// runtime and the install. It returns the session once made, also when
// its seed failed (close then stops what ran).
func (cr *caseRun) seed(ctx context.Context, bx sandboxed) (*session.Session, error) {
	var sess *session.Session
	err := cr.stage(reports.StageSeed, func() error {
		var err error
		if sess, err = cr.newSession(bx); err != nil {
			return err
		}
		err = sess.Seed(ctx)
		cr.ev.SeedSeconds = sess.SeedDuration().Seconds()
		return err
	})
	var re *session.ReceiptError
	if errors.As(err, &re) {
		cr.timing.Install = launchSeconds(re.Receipt)
	}
	if !stopsCase(err) {
		cr.check("seed", clauseSeed, err == nil, "warden placed from the owner volume and its sha256 verified, runtime and install: %s", errText(err, cr.r.key))
	}
	if err != nil {
		cr.errType("seed_failed")
	}
	return sess, err
}

// newSession makes the adapter's session over the session agent, with
// its private state dirs, owned by the harness user, made in seed's one
// transfer. The captures are confined reads (session.Config's default)
// over the session agent: no link followed at any component, the
// harness's files read with its ids.
func (cr *caseRun) newSession(bx sandboxed) (*session.Session, error) {
	r, m, sp := cr.r, cr.c.adapter, cr.sess
	ad, err := m.Session(bx.actx)
	if err != nil {
		return nil, err
	}
	dirs, err := m.StateDirs(bx.actx, sp.dir, sp.home)
	if err != nil {
		return nil, err
	}
	for _, d := range dirs {
		if rel := strings.TrimPrefix(d, sp.home+"/"); rel != d {
			ad.Dirs = append(ad.Dirs, path.Join("home", rel))
		}
	}
	return session.New(bx.agent.sb, ad, session.Config{ID: sp.id, User: r.opts.User, Binaries: r.bins,
		CaptureDir:    filepath.Join(cr.dir, "capture"),
		CaptureLimits: provider.FetchLimits{Entries: provider.NewBudget(int64(r.captureEntries()))}})
}

// activate is stage 2b (adapter): the one activation, then the CLI's own
// version (under warden with a deadline, after the activation so it
// cannot help it; its output is read after close from the captured run
// dir). The error is the activation stage's.
func (cr *caseRun) activate(ctx context.Context, sess *session.Session, ms modelSide, sb provider.Sandbox) (activationResult, error) {
	var act activationResult
	var err error
	m, sc := cr.c.adapter, cr.c.scenario
	if !cr.intr.interruptReached() {
		err = cr.stage(reports.StageActivation, func() error {
			// The run's interrupt ends the wait, not the launch: close
			// stops it through the session, so its receipt is kept. A
			// cancel's owner ends it the same way once the model stalls.
			wctx, cancel := interruptible(ctx, cr.r.opts.Interrupt)
			defer cancel()
			// Recorded before the launch, so a case interrupted in it
			// still shows where its deadline would have fallen.
			deadline := sc.launchDeadline(m)
			cr.ev.LaunchDeadlineSeconds = deadline
			forward := func() (time.Time, error) {
				at := time.Now().Add(stallStopAfter)
				return at, sess.BringDeadlineForward(wctx, activation, stallStopAfter)
			}
			watched := cr.watchWriter(wctx, ms, sb, cancel, forward, deadline)
			defer func() { cancel(); act.writer = <-watched }()
			var err error
			act.launched = true
			act.res, err = sess.Activate(wctx, activation, model.ChallengePrompt(ChallengeFile, Deliverable), deadline)
			if err != nil && act.res == nil && ctx.Err() == nil && wctx.Err() != nil {
				if sc.ClosesAtStall && ms.stall.ctx.Err() != nil {
					act.cancelled = time.Now()
					return nil
				}
				cr.intr.interruptReached()
				return nil
			}
			return err
		})
		if act.res != nil {
			cr.ev.ActivationReceipt = receiptSummary(act.res.ReceiptJSON)
			cr.timing.Harness = launchSeconds(act.res.Receipt)
		}
		// A stop scenario's receipt is judged after close (scenario.stop).
		if !stopsCase(err) && cr.intr.reason == "" && sc.Cause == "" {
			cr.ev.Checks = append(cr.ev.Checks, activationReceiptCheck(act.res, err, cr.r.key))
		}
	}
	// A cancel's owner closes the session now, not after a version run.
	if !stopsCase(err) && cr.intr.reason == "" && len(m.VersionArgv) > 0 && act.cancelled.IsZero() {
		act.version, act.versionErr = sess.Activate(ctx, adapter.VersionLaunchID, "", m.VersionSeconds())
	}
	return act, err
}

// activationReceiptCheck is activation.receipt: the activation ended
// without an error, with a receipt whose cleanup is confirmed.
func activationReceiptCheck(res *session.Result, err error, key string) reports.Check {
	ok := err == nil && res != nil && res.Receipt.CleanupConfirmed
	return newCheck("activation.receipt", clauseSeed, ok, "activation receipt: %s", receiptText(res, err, key))
}

// closeSession is stage 3: always, once a session exists, so what ran is
// stopped and captured; then the captures are judged. The error is
// close's.
func (cr *caseRun) closeSession(ctx context.Context, sess *session.Session, actx adapter.Context, act activationResult) (closed, error) {
	m, ev := cr.c.adapter, cr.ev
	var cl closed
	err := cr.stage(reports.StageClose, func() error {
		cl.res, cl.err = sess.Close(ctx)
		return cl.err
	})
	if cl.res != nil {
		ev.SessionClosed = cl.err == nil
		closeEvidence(ev, cl.res)
		cr.timing.Harness = harnessSeconds(cr.timing.Harness, act.launched, cl.res)
	}
	if stopsCase(err) {
		return cl, err
	}
	c, closeFailed := closeReceipts(act.launched, cl, ev.CloseReceipt, cr.intr.reason, cr.r.key)
	ev.Checks = append(ev.Checks, c)
	if closeFailed {
		cr.errType("close_failed")
	}
	cut := 0
	if cl.res != nil {
		cut = cl.res.CaptureCut
	}
	cr.checkCaptures(cut)
	if sc := cr.c.scenario; sc.Cause != "" && cr.intr.reason == "" {
		ev.Checks = append(ev.Checks, stopCheck(sc, stopReceipt(ev), ev.LaunchDeadlineSeconds, act.writer.forwardErr))
	}
	if cr.intr.reason == "" {
		captures, _ := m.CapturePaths(actx, cr.sess.dir, cr.sess.home)
		cr.readCaptures(act.res, captures)
	}
	if len(m.VersionArgv) > 0 && ev.HarnessRuntime != nil {
		ev.HarnessRuntime.CLIVersion, ev.HarnessRuntime.CLIVersionError = cr.readVersion(act.version, act.versionErr)
	}
	return cl, err
}

// closeEvidence records what close returned: the activation's receipt,
// the session dir, the captures' sizes and what they withheld. The
// evidence line stays small: the cut entries first, then the rest, 100
// at most.
// harnessSeconds is the launch's time: the activation's own receipt's
// (had, from activate) when it came back, else the one close recorded. A
// cancel's owner ends the activation's wait before its receipt, so close
// stops the launch and holds it; without this the harness's whole run was
// counted as sandproof's overhead.
func harnessSeconds(had float64, launched bool, res *session.CloseResult) float64 {
	if had > 0 || !launched || res == nil {
		return had
	}
	return launchSeconds(res.Receipts[activation])
}

func closeEvidence(ev *reports.Evidence, res *session.CloseResult) {
	if rec, ok := res.Receipts[activation]; ok {
		ev.CloseReceipt = receiptOf(rec)
	}
	ev.AdapterSessionDirRemoved = res.SessionDirRemoved
	ev.CaptureBytes = res.CaptureBytes
	ev.CaptureEntries = res.CaptureEntries
	ws := slices.Clone(res.Withheld)
	slices.SortStableFunc(ws, func(a, b provider.Withheld) int { return cutFirst(a) - cutFirst(b) })
	for _, w := range ws {
		if len(ev.CapturesWithheld) == maxWithheldEvidence {
			ev.CapturesWithheldOmitted++
			continue
		}
		ev.CapturesWithheld = append(ev.CapturesWithheld, reports.Withheld(w))
	}
	ev.CapturesWithheldOmitted += res.WithheldOmitted
}

// verifyCase is stage 4 (owner), only after close. The relay and the model
// are closed first: Close waits for calls in flight, so the transcript is
// whole.
func (cr *caseRun) verifyCase(ctx context.Context, ms modelSide, bx sandboxed, act activationResult, scratchRemoved []string) {
	cr.verifyStage(func() error {
		ms.rel.Close()
		derived := ""
		if ms.srv != nil {
			ms.srv.Close()
			derived = ms.srv.Token(ms.challenge)
		}
		cr.ev.ModelCalls = ms.rel.ModelCalls()
		proof := analyse(ms.rel.Calls(), ms.challenge, derived, ms.modelName)
		cr.loopChecks(proof, derived)
		v, err := cr.verify(ctx, bx.sb, verifyInput{before: bx.before, allMarkers: cr.owner.allMarkers, markers: cr.owner.markers,
			sessDir: cr.sess.dir, proof: proof, allowed: cr.allowed(), key: cr.r.key,
			scratch: cr.c.adapter.Scratch, scratchRemoved: scratchRemoved, ownerProcs: bx.ownerProcs,
			scenarioPaths: cr.c.scenario.paths(cr.owner.uid), detailUIDs: cr.c.scenario.detailUIDs(cr.owner.uid), noDeliverable: cr.c.scenario.NoDeliverable})
		if err != nil {
			return err
		}
		v.derived = derived
		err = cr.scenarioVerify(ctx, ms, bx, act, v)
		cr.ev.Checks = limitChecks(cr.ev.Checks, ms.modelCalls())
		return err
	})
}

// teardown is stage 5 (owner), whatever happened: the container removed
// and unknown to the engine.
func (cr *caseRun) teardown(bx sandboxed) {
	sb := bx.sb
	if sb == nil {
		return
	}
	tctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := cr.stage(reports.StageTeardown, func() error {
		cr.stopAgent(bx.agent)
		t := time.Now()
		err := sb.Destroy(tctx)
		cr.timing.Container += time.Since(t).Seconds()
		if err != nil {
			return err
		}
		info, err := sb.Inspect(tctx)
		if err != nil {
			return err
		}
		if info.Exists {
			return fmt.Errorf("the engine still knows container %s", sb.ID())
		}
		return nil
	})
	cr.ev.OwnerTeardownContainerRemoved = err == nil
	cr.checkErr("teardown.container_removed", clauseTeardown, err, "container removed and unknown to the engine: %s", errText(err, cr.r.key))
}

// canaryScan is what the scan of the case's dir found: the files holding
// the canary or the model key, or why the scan stopped.
type canaryScan struct {
	leaks []string
	err   error
}

// startCanaryScan scans the case's dir for the canary and the model key
// in the background; the channel gives the one result. The caller starts
// it once nothing writes into the dir any more.
func (cr *caseRun) startCanaryScan() <-chan canaryScan {
	r, dir := cr.r, cr.dir
	out := make(chan canaryScan, 1)
	go func() {
		var s canaryScan
		s.leaks, s.err = FindCanaryLimit(dir, r.key, r.opts.Scan)
		if s.err == nil && r.opts.APIKey != "" {
			var more []string
			more, s.err = FindCanaryLimit(dir, r.opts.APIKey, r.opts.Scan)
			s.leaks = append(s.leaks, more...)
		}
		out <- s
	}()
	return out
}

// checkCanary: no key may be in anything this case left on the host
// (the scan, startCanaryScan), nor in a request the relay refused for
// carrying it. A scan cut at its bound fails (what it did not read is not
// known to be clean).
func (cr *caseRun) checkCanary(b relay.Bounds, scan canaryScan) {
	r := cr.r
	leaks, err := scan.leaks, scan.err
	refused := b.Refused[relay.RefusedCanary]
	detail := fmt.Sprintf("API key canary or model key in the case's files: %d file(s) %v; requests carrying the canary, refused by the relay: %d %q",
		len(leaks), relAll(cr.dir, leaks), refused, b.Canary)
	if err != nil {
		detail += "; " + redact(err.Error(), r.key)
	}
	cr.check("secrets.canary", clauseSecrets, err == nil && len(leaks) == 0 && refused == 0, "%s", detail)
}

// checkRelay: the model relay stayed within its limits (contract §8
// captured files are data): no request refused for its size, time,
// concurrency or held bytes, no call left out of the transcript, and no
// call left out of the scripted model's own log (modelUnrecorded: past
// its budget, the transcript's).
func (cr *caseRun) checkRelay(b relay.Bounds, modelUnrecorded int) {
	l := b.Limits
	cr.check("close.relay_bounded", clauseCaptures, !b.Over() && modelUnrecorded == 0,
		"model relay: refused %d too large (cap %d bytes), %d stalled (body %s, idle %s), %d over %d at once, %d over %d bytes held, %d outside the model API; %d call(s) not recorded past the transcript budget of %d bytes (%d used); %d call(s) not in the scripted model's log past the same budget",
		b.Refused[relay.RefusedTooLarge], l.RequestBytes, b.Refused[relay.RefusedBodyTimeout], l.BodyTime, l.BodyIdle,
		b.Refused[relay.RefusedBusy], l.Concurrent, b.Refused[relay.RefusedHeld], l.HeldBytes, b.Refused[relay.RefusedRoute],
		b.Unrecorded, l.RecordBytes, b.RecordBytes, modelUnrecorded)
}

// agentArgv is the session agent (contract §7 session agent), run as
// root from the owner's volume by the probe's setup run it follows. With
// network none it listens inside the sandbox on the relay's own address,
// so {model_url} is the same string inside as on the host, and every
// connection it accepts is forwarded by the host's end into the case's
// relay, never anywhere the sandbox names. The adapter's side of the
// session (warden's commands, uploads, downloads) goes over the same
// channel; the owner's probe never does.
func (cr *caseRun) agentArgv(relayAddr string) []string {
	argv := []string{agentPath, "serve"}
	if cr.r.opts.Network == provider.NetworkNone {
		argv = append(argv, "--listen", relayAddr)
	}
	return argv
}

// attachAgent attaches the host's end to the agent the setup run became
// and waits for its hello.
func attachAgent(ctx context.Context, sb provider.Sandbox, proc *provider.Process, relayAddr string, stderr *hostfile.HeadBuffer) (*sessionAgent, error) {
	asb, err := agenthost.Attach(ctx, sb, proc, agenthost.Options{Target: relayAddr})
	if err != nil {
		return nil, fmt.Errorf("start the session agent: %w%s", err, stderrNote(stderr.String()))
	}
	return &sessionAgent{sb: asb, stderr: stderr}, nil
}

// stopAgent ends the agent's channel, once; the agent exits on its
// stdin's EOF. A status other than 0 is noted in the progress, not
// judged: the case's checks read the sandbox through the owner's probe.
func (cr *caseRun) stopAgent(a *sessionAgent) {
	if a == nil || a.sb == nil {
		return
	}
	code, err := a.sb.Close()
	a.sb = nil
	if err != nil || code != 0 {
		cr.r.progress("%s: session agent ended with status %d: %v%s", cr.c.id, code, err, stderrNote(a.stderr.String()))
	}
}

// hostPort is the host:port of an http URL.
func hostPort(u string) (string, error) {
	pu, err := url.Parse(u)
	if err != nil || pu.Host == "" {
		return "", fmt.Errorf("relay URL %q: no host:port", u)
	}
	return pu.Host, nil
}

func stderrNote(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	return " (agent stderr: " + truncate(s, 300) + ")"
}

// closeReceipts is the check close.receipts: every launch the session ran
// stopped with a confirmed receipt (close fails otherwise), the
// activation's among them once it was launched, and the captures
// downloaded. What the interrupt left nothing to judge is unknown, never
// failed: a session in which no launch ran (the interrupt came before the
// activation, and the adapter has no install step), and declared
// captures that are not there because the interrupt cut the harness short
// or kept it from starting. launched says the activation was launched,
// closeReceipt is its receipt as close recorded it, interrupted the
// interrupt's reason ("" when none). It reports whether close itself
// failed.
func closeReceipts(launched bool, cl closed, closeReceipt *reports.Receipt, interrupted, key string) (_ reports.Check, closeFailed bool) {
	var launches, notThere []string
	if cl.res != nil {
		for id := range cl.res.Receipts {
			launches = append(launches, id)
		}
		slices.Sort(launches)
	}
	closeErr := cl.err
	if closeErr != nil && interrupted != "" && cl.res != nil && onlyNotFound(closeErr) {
		closeErr, notThere = nil, cl.res.Missing
	}
	const id = "close.receipts"
	unknown := func(detail string) reports.Check {
		return reports.Check{ID: id, Status: reports.StatusUnknown, Clause: clauseClose, Detail: detail}
	}
	switch {
	case closeErr != nil:
		return newCheck(id, clauseClose, false, "every launch stopped with a confirmed receipt, captures downloaded: %s", errText(closeErr, key)), true
	case launched && closeReceipt == nil:
		return newCheck(id, clauseClose, false, "every launch stopped with a confirmed receipt, captures downloaded: ok, but the activation's stop left no receipt"), false
	case launched && !closeReceipt.CleanupConfirmed:
		return newCheck(id, clauseClose, false, "every launch stopped with a confirmed receipt, captures downloaded: ok, but the activation's receipt is not confirmed"), false
	case len(launches) == 0:
		why := "the activation never launched"
		if interrupted != "" {
			why += " (" + interrupted + ")"
		}
		return unknown("no launch ran, so no receipt to judge: " + why + "; captures downloaded: " + notThereText(notThere)), false
	case len(notThere) > 0:
		return unknown(fmt.Sprintf("every launch stopped with a confirmed receipt (%s); captures downloaded: %s, not judged: the harness was cut short (%s)",
			strings.Join(launches, ", "), notThereText(notThere), interrupted)), false
	}
	return newCheck(id, clauseClose, true, "every launch stopped with a confirmed receipt (%s), captures downloaded: ok", strings.Join(launches, ", ")), false
}

func notThereText(ps []string) string {
	if len(ps) == 0 {
		return "ok"
	}
	return "not there: " + strings.Join(truncList(ps, 10), ", ")
}

// onlyNotFound reports whether every error joined in err ends in
// provider.ErrPathNotFound (a declared capture that was not there), so a
// close that failed for nothing else can be told apart. A wrapper is
// followed to what it wraps; a join needs all of its parts to qualify.
func onlyNotFound(err error) bool {
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		errs := u.Unwrap()
		if len(errs) == 0 {
			return false
		}
		for _, e := range errs {
			if !onlyNotFound(e) {
				return false
			}
		}
		return true
	case interface{ Unwrap() error }:
		if next := u.Unwrap(); next != nil {
			return onlyNotFound(next)
		}
	}
	return errors.Is(err, provider.ErrPathNotFound)
}
