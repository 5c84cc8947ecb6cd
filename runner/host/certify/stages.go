package certify

import (
	"context"
	"errors"
	"fmt"
	"github.com/sandproof/sandproof/runner/host/hostfile"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/agent"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/relay"
	"github.com/sandproof/sandproof/runner/host/session"
	"github.com/sandproof/sandproof/runner/model"
)

// runCase runs one case through the protocol of contract §7, one method
// per stage: setup (owner), seed and activation (adapter), close, verify
// (owner), teardown (owner). Whatever happens, the case ends with an
// evidence record and its container removed.
func (r *runner) runCase(ctx context.Context, c caseSpec) (_ *reports.Evidence, timing CaseTiming) {
	cr := r.newCase(c)
	defer cr.watchInterrupt()()
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
	if !cr.startModel() {
		cr.finish()
		return cr.ev, cr.timing
	}
	defer cr.stopModel()

	setupErr := cr.setup(ctx)
	switch {
	case setupErr != nil:
	case cr.skip != "":
		cr.skipCase()
	case !cr.interruptReached():
		if cr.seed(ctx) == nil {
			cr.activate(ctx)
		}
		cr.closeSession(ctx)
		// The agent is gone before the owner looks: verify sees no
		// process of the adapter's side, the agent included.
		cr.stopAgent()
		cr.verifyCase(ctx)
	}
	cr.rel.Close()
	cr.ev.ModelCalls = cr.rel.ModelCalls()
	cr.teardown()
	bounds := cr.rel.Bounds()
	cr.checkRelay(bounds)
	cr.checkCanary(bounds)
	cr.finish()
	return cr.ev, cr.timing
}

// newCase makes the case's evidence record and derives what its stages
// share: the task user, its home and the owner's markers.
func (r *runner) newCase(c caseSpec) *caseRun {
	m := c.adapter
	ev := &reports.Evidence{
		Schema: reports.Schema, RunID: r.runID, CaseID: c.id, Attempt: max(1, c.attempt), Harness: m.Name, Image: c.image.Name,
		Shard: r.opts.Shard.String(), MatrixSHA256: r.matrix.SHA256, MatrixCases: len(r.matrix.Cases),
		Status: reports.StatusUnknown, OutputItemTypes: map[string]int{}, CloseObservationGaps: []string{},
		Provenance: reports.Provenance{WardenSHA256: r.wardenSHA, AdapterSHA256: m.SHA256, SuiteVersion: suiteVersion(),
			StartedAt: time.Now().UTC(), Host: r.host},
		CaseDir: path.Join("cases", caseDirName(c.id)),
	}
	cr := &caseRun{r: r, c: c, ev: ev, dir: filepath.Join(r.opts.Out, "cases", caseDirName(c.id)),
		timing: CaseTiming{CaseID: c.id, Image: c.image.Name}, skip: c.skip, agentStderr: hostfile.HeadBuffer{Max: 64 << 10}, uid: 1000, gid: 1000, home: r.opts.TaskHome}
	if u, g, ok := strings.Cut(r.opts.User, ":"); ok {
		cr.uid, _ = strconv.Atoi(u)
		cr.gid, _ = strconv.Atoi(g)
	}
	for _, d := range []string{cr.home + "/.config", cr.home + "/.local/share", cr.home + "/.cache", cr.home + "/.local/state"} {
		cr.markers = append(cr.markers, d+"/sandproof-owner/marker")
	}
	for _, q := range c.requires {
		cr.reqPaths = append(cr.reqPaths, requirementPaths[q]...)
	}
	cr.allMarkers = append(slices.Clone(cr.markers), cr.reqPaths...)
	cr.sessID = "c-" + randomHex(6)
	cr.sessDir = path.Join(BaseDir, cr.sessID)
	cr.sessHome = path.Join(cr.sessDir, "home")
	if h := r.harness[c.rt]; h != nil {
		hc := *h
		ev.HarnessRuntime = &hc
	}
	return cr
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
}

// startModel starts the scripted model (one server per case on the host's
// loopback, so its calls are the case's own; it requires the upstream key)
// unless the run has a real one, and the case's recording relay in front
// of it, which holds the canary in and the upstream key out. It reports
// false, with a failed check, when either cannot start.
func (cr *caseRun) startModel() bool {
	r := cr.r
	upstream, modelName := r.opts.ModelURL, r.opts.ModelURL
	if upstream == "" {
		srv, err := model.Start(model.Options{Addr: "127.0.0.1:0", APIKey: r.upstreamKey, LogPath: filepath.Join(cr.dir, "model_calls.jsonl")})
		if err != nil {
			cr.check("setup.model", clauseSetup, false, "start the scripted model: %v", err)
			return false
		}
		cr.srv = srv
		upstream, modelName = srv.URL(), "scripted"
	}
	lim := r.opts.Relay
	// The adapter may need larger bodies than the run's cap (its
	// manifest's relay.request_bytes); it never lowers it.
	if n := cr.c.adapter.Relay.RequestBytes; n > 0 {
		if lim.RequestBytes == 0 {
			lim.RequestBytes = relay.DefaultLimits.RequestBytes
		}
		lim.RequestBytes = max(n, lim.RequestBytes)
	}
	rel, err := startRelay(upstream, r.key, r.upstreamKey, filepath.Join(cr.dir, "model_relay.jsonl"), lim)
	if err != nil {
		cr.check("setup.relay", clauseSetup, false, "start the model relay: %v", err)
		if cr.srv != nil {
			cr.srv.Close()
		}
		return false
	}
	cr.rel, cr.modelName = rel, modelName
	cr.challenge = model.ChallengePrefix + randomHex(16)
	cr.actx = adapter.Context{ModelURL: rel.URL(), Model: r.opts.ModelName, TaskDir: TaskDir, RuntimeHostDir: cr.c.runtime}
	return true
}

func (cr *caseRun) stopModel() {
	cr.rel.Close()
	if cr.srv != nil {
		cr.srv.Close()
	}
}

// setup is stage 1 (owner): the container, /task, the markers and the
// probe's baseline, the challenge; it finds the requirements the image
// lacks, which skip the case.
func (cr *caseRun) setup(ctx context.Context) error {
	r, c, m, ev := cr.r, cr.c, cr.c.adapter, cr.ev
	vols := []provider.VolumeMount{{Volume: r.ownerVol, Target: ownerDir}}
	if v := r.rtVol[c.rt]; v != "" && m.Runtime.Delivery == adapter.DeliveryMount {
		cr.actx.RuntimeDir = adapter.RuntimeMountDir(m.Name)
		vols = append(vols, provider.VolumeMount{Volume: v, Target: cr.actx.RuntimeDir})
	}
	if v := r.layerVol[c.rt]; v != "" {
		vols = append(vols, provider.VolumeMount{Volume: v, Target: adapter.GlibcLayerMountDir})
		cr.actx.RuntimeEnv = map[string]string{"LD_LIBRARY_PATH": adapter.GlibcLayerMountDir}
	}
	err := cr.stage(reports.StageSetup, func() error {
		sb, err := r.prov.Create(ctx, provider.CreateSpec{
			Image: c.image.Ref, Network: r.opts.Network, Volumes: vols, Expire: 30 * time.Minute,
			Labels: map[string]string{provider.LabelRun: r.runID, "sandproof.case": caseDirName(c.id)},
			Limits: r.opts.Limits,
			// The key reaches the harness only through the environment.
			Env: []string{m.APIKeyEnv + "=" + r.key},
		})
		if err != nil {
			return err
		}
		if os.Getenv("SANDPROOF_TRACE") != "" {
			sb = provider.Trace(sb, func(format string, args ...any) { r.progress(c.id+": "+format, args...) })
		}
		cr.sb = sb
		info, err := sb.Inspect(ctx)
		if err != nil {
			return err
		}
		ev.ImageID = info.ImageID
		// What the engine applies, read back, not what was asked for.
		ev.Sandbox = &reports.Sandbox{Network: r.opts.Network, Provider: r.prov.Name(), Engine: info.Engine}
		if info.Network != "" {
			ev.Sandbox.Network = info.Network
		}
		if l := info.Limits; l != nil {
			ev.Sandbox.PidsLimit, ev.Sandbox.MemoryBytes, ev.Sandbox.CPUShares, ev.Sandbox.OOMScoreAdj = l.PidsLimit, l.MemoryBytes, l.CPUShares, l.OOMScoreAdj
		}
		// One probe run makes /task, the marker dirs and markers (owned
		// by the task user) and takes the baseline right after.
		dirs := []string{TaskDir, cr.home + "/.local"}
		for _, mk := range cr.markers {
			dirs = append(dirs, path.Dir(path.Dir(mk)), path.Dir(mk))
		}
		argv := []string{probePath, "setup", "--owner", fmt.Sprintf("%d:%d", cr.uid, cr.gid),
			"--dirs", strings.Join(dirs, ","), "--write-markers", strings.Join(cr.markers, ",")}
		if len(cr.reqPaths) > 0 {
			argv = append(argv, "--markers", strings.Join(cr.reqPaths, ","))
		}
		if cr.before, err = probeRun(ctx, sb, argv); err != nil {
			return err
		}
		// The session agent starts after the baseline, never in it: an
		// agent that outlived its stop is a new process to verify.
		if err := cr.startAgent(ctx); err != nil {
			return err
		}
		ev.Before = beforeOf(cr.before, cr.markers)
		// The challenge, readable by the harness user only; never in
		// the prompt, unknown to the adapter.
		if err := provider.UploadBytes(ctx, sb, []byte(cr.challenge+"\n"), ChallengeFile, 0o400, cr.uid, cr.gid); err != nil {
			return err
		}
		if missing := missingRequirements(cr.c.requires, cr.before, r.opts.Bash != ""); len(missing) > 0 {
			if cr.skip != "" {
				cr.skip += "; "
			}
			cr.skip += fmt.Sprintf("image %s lacks %s", c.image.Name, strings.Join(missing, "; "))
		}
		return nil
	})
	cr.check("setup", clauseSetup, err == nil, "container, /task, the challenge, four XDG markers, probe baseline: %s", errText(err, r.key))
	return err
}

// skipCase records a case that setup found it cannot run.
func (cr *caseRun) skipCase() {
	cr.ev.Status = reports.StatusSkipped
	cr.ev.SkipReason = cr.skip
	cr.ev.Checks = append(cr.ev.Checks, reports.Check{ID: "requirements", Status: reports.StatusSkipped, Clause: clauseSkip, Detail: cr.skip})
	cr.r.progress("%s: skipped: %s", cr.c.id, cr.skip)
}

// seed is stage 2a (adapter): the session's private dirs, warden, the
// runtime and the install.
func (cr *caseRun) seed(ctx context.Context) error {
	r, m := cr.r, cr.c.adapter
	err := cr.stage(reports.StageSeed, func() error {
		ad, err := m.Session(cr.actx)
		if err != nil {
			return err
		}
		// Private state dirs, owned by the harness user, made in seed's
		// one transfer.
		dirs, err := m.StateDirs(cr.actx, cr.sessDir, cr.sessHome)
		if err != nil {
			return err
		}
		for _, d := range dirs {
			if rel := strings.TrimPrefix(d, cr.sessHome+"/"); rel != d {
				ad.Dirs = append(ad.Dirs, path.Join("home", rel))
			}
		}
		// The captures are confined reads (session.Config's default)
		// over the session agent: no link followed at any component, the
		// harness's files read with its ids.
		cr.sess, err = session.New(cr.asb, ad, session.Config{ID: cr.sessID, User: r.opts.User, Binaries: r.bins,
			CaptureDir:    filepath.Join(cr.dir, "capture"),
			CaptureLimits: provider.FetchLimits{Entries: provider.NewBudget(int64(r.captureEntries()))}})
		if err != nil {
			return err
		}
		err = cr.sess.Seed(ctx)
		cr.ev.SeedSeconds = cr.sess.SeedDuration().Seconds()
		return err
	})
	var re *session.ReceiptError
	if errors.As(err, &re) {
		cr.timing.Install = launchSeconds(re.Receipt)
	}
	if !cr.stopped {
		cr.check("seed", clauseSeed, err == nil, "warden uploaded and verified, runtime and install: %s", errText(err, r.key))
	}
	if err != nil {
		cr.errType("seed_failed")
	}
	return err
}

// activate is stage 2b (adapter): the one activation, then the CLI's own
// version (under warden with a deadline, after the activation so it
// cannot help it; its output is read after close from the captured run
// dir).
func (cr *caseRun) activate(ctx context.Context) {
	r, m := cr.r, cr.c.adapter
	if !cr.interruptReached() {
		err := cr.stage(reports.StageActivation, func() error {
			// The run's interrupt ends the wait, not the launch: close
			// stops it through the session, so its receipt is kept.
			wctx, cancel := interruptible(ctx, r.opts.Interrupt)
			defer cancel()
			var err error
			cr.activated = true
			cr.actRes, err = cr.sess.Activate(wctx, activation, model.ChallengePrompt(ChallengeFile, Deliverable), m.Launch.Deadline)
			if err != nil && cr.actRes == nil && ctx.Err() == nil && wctx.Err() != nil {
				cr.interruptReached()
				return nil
			}
			return err
		})
		if cr.actRes != nil {
			cr.ev.ActivationReceipt = receiptSummary(cr.actRes.ReceiptJSON)
			cr.timing.Harness = launchSeconds(cr.actRes.Receipt)
		}
		if !cr.stopped && cr.interrupted == "" {
			ok := err == nil && cr.actRes != nil && cr.actRes.Receipt.CleanupConfirmed
			cr.check("activation.receipt", clauseSeed, ok, "activation receipt: %s", receiptText(cr.actRes, err, r.key))
		}
	}
	if !cr.stopped && cr.interrupted == "" && len(m.VersionArgv) > 0 {
		cr.versionRes, cr.versionErr = cr.sess.Activate(ctx, adapter.VersionLaunchID, "", versionDeadline)
	}
}

// closeSession is stage 3: always, once a session exists, so what ran is
// stopped and captured; then the captures are judged.
func (cr *caseRun) closeSession(ctx context.Context) {
	m, ev := cr.c.adapter, cr.ev
	if cr.sess == nil {
		return
	}
	if !cr.stopped {
		cr.stage(reports.StageClose, func() error {
			cr.closeRes, cr.closeErr = cr.sess.Close(ctx)
			return cr.closeErr
		})
	}
	if res := cr.closeRes; res != nil {
		ev.SessionClosed = cr.closeErr == nil
		if rec, ok := res.Receipts[activation]; ok {
			ev.CloseReceipt = receiptOf(rec)
		}
		ev.AdapterSessionDirRemoved = res.SessionDirRemoved
		ev.CaptureBytes = res.CaptureBytes
		ev.CaptureEntries = res.CaptureEntries
		// The evidence line stays small: the cut entries first, then the
		// rest, 100 at most.
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
		cr.cut = res.CaptureCut
	}
	if cr.stopped {
		return
	}
	if cr.closeReceipts() {
		cr.errType("close_failed")
	}
	cr.checkCaptures()
	if cr.interrupted == "" {
		captures, _ := m.CapturePaths(cr.actx, cr.sessDir, cr.sessHome)
		cr.readCaptures(cr.actRes, captures)
	}
	if len(m.VersionArgv) > 0 && ev.HarnessRuntime != nil {
		ev.HarnessRuntime.CLIVersion, ev.HarnessRuntime.CLIVersionError = cr.readVersion(cr.versionRes, cr.versionErr)
	}
}

// verifyCase is stage 4 (owner), only after close. The relay and the model
// are closed first: Close waits for calls in flight, so the transcript is
// whole.
func (cr *caseRun) verifyCase(ctx context.Context) {
	if cr.stopped || cr.closeRes == nil || cr.interruptReached() {
		return
	}
	cr.stage(reports.StageVerify, func() error {
		cr.rel.Close()
		derived := ""
		if cr.srv != nil {
			cr.srv.Close()
			derived = cr.srv.Token(cr.challenge)
		}
		cr.ev.ModelCalls = cr.rel.ModelCalls()
		proof := analyse(cr.rel.Calls(), cr.challenge, derived, cr.modelName)
		cr.loopChecks(proof, derived)
		return cr.verify(ctx, cr.sb, cr.before, cr.allMarkers, cr.markers, proof, cr.sessDir)
	})
}

// teardown is stage 5 (owner), whatever happened: the container removed
// and unknown to the engine.
func (cr *caseRun) teardown() {
	sb := cr.sb
	if sb == nil {
		return
	}
	tctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := cr.stage(reports.StageTeardown, func() error {
		cr.stopAgent()
		if err := sb.Destroy(tctx); err != nil {
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
	cr.check("teardown.container_removed", clauseTeardown, err == nil, "container removed and unknown to the engine: %s", errText(err, cr.r.key))
}

// checkCanary: no key may be in anything this case left on the host,
// nor in a request the relay refused for carrying it. A scan cut at its
// bound fails (what it did not read is not known to be clean).
func (cr *caseRun) checkCanary(b relay.Bounds) {
	r := cr.r
	leaks, err := FindCanaryLimit(cr.dir, r.key, r.opts.Scan)
	if err == nil && r.opts.APIKey != "" {
		var more []string
		more, err = FindCanaryLimit(cr.dir, r.opts.APIKey, r.opts.Scan)
		leaks = append(leaks, more...)
	}
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
// concurrency or held bytes, no call left out of the transcript.
func (cr *caseRun) checkRelay(b relay.Bounds) {
	l := b.Limits
	cr.check("close.relay_bounded", clauseCaptures, !b.Over(),
		"model relay: refused %d too large (cap %d bytes), %d stalled (body %s, idle %s), %d over %d at once, %d over %d bytes held, %d outside the model API; %d call(s) not recorded past the transcript budget of %d bytes (%d used)",
		b.Refused[relay.RefusedTooLarge], l.RequestBytes, b.Refused[relay.RefusedBodyTimeout], l.BodyTime, l.BodyIdle,
		b.Refused[relay.RefusedBusy], l.Concurrent, b.Refused[relay.RefusedHeld], l.HeldBytes, b.Refused[relay.RefusedRoute],
		b.Unrecorded, l.RecordBytes, b.RecordBytes)
}

// startAgent starts the session agent (contract §7 session agent) as root
// from the owner's volume, over one streamed exec. With network none it
// listens inside the sandbox on the relay's own address, so {model_url} is
// the same string inside as on the host, and every connection it accepts
// is forwarded by the host's end into the case's relay, never anywhere
// the sandbox names. The adapter's side of the session (warden's
// commands, uploads, downloads) goes over the same channel; the owner's
// probe never does.
func (cr *caseRun) startAgent(ctx context.Context) error {
	relayAddr, err := hostPort(cr.rel.URL())
	if err != nil {
		return err
	}
	argv := []string{agentPath, "serve"}
	if cr.r.opts.Network == provider.NetworkNone {
		argv = append(argv, "--listen", relayAddr)
	}
	asb, err := agent.Start(ctx, cr.sb, argv, &cr.agentStderr, agent.HostOptions{Target: relayAddr})
	if err != nil {
		return fmt.Errorf("start the session agent: %w%s", err, stderrNote(cr.agentStderr.String()))
	}
	cr.asb, cr.agent = asb, asb
	return nil
}

// stopAgent ends the agent's channel; the agent exits on its stdin's EOF.
// A status other than 0 is noted in the progress, not judged: the case's
// checks read the sandbox through the owner's probe.
func (cr *caseRun) stopAgent() {
	if cr.agent == nil {
		return
	}
	code, err := cr.agent.Close()
	cr.agent = nil
	if err != nil || code != 0 {
		cr.r.progress("%s: session agent ended with status %d: %v%s", cr.c.id, code, err, stderrNote(cr.agentStderr.String()))
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
// or kept it from starting. It reports whether close itself failed.
func (cr *caseRun) closeReceipts() (closeFailed bool) {
	ev, key := cr.ev, cr.r.key
	var launches, notThere []string
	if cr.closeRes != nil {
		for id := range cr.closeRes.Receipts {
			launches = append(launches, id)
		}
		slices.Sort(launches)
	}
	closeErr := cr.closeErr
	if closeErr != nil && cr.interrupted != "" && cr.closeRes != nil && onlyNotFound(closeErr) {
		closeErr, notThere = nil, cr.closeRes.Missing
	}
	const id = "close.receipts"
	unknown := func(detail string) {
		ev.Checks = append(ev.Checks, reports.Check{ID: id, Status: reports.StatusUnknown, Clause: clauseClose, Detail: detail})
	}
	switch {
	case closeErr != nil:
		cr.check(id, clauseClose, false, "every launch stopped with a confirmed receipt, captures downloaded: %s", errText(closeErr, key))
		return true
	case cr.activated && ev.CloseReceipt == nil:
		cr.check(id, clauseClose, false, "every launch stopped with a confirmed receipt, captures downloaded: ok, but the activation's stop left no receipt")
	case cr.activated && !ev.CloseReceipt.CleanupConfirmed:
		cr.check(id, clauseClose, false, "every launch stopped with a confirmed receipt, captures downloaded: ok, but the activation's receipt is not confirmed")
	case len(launches) == 0:
		why := "the activation never launched"
		if cr.interrupted != "" {
			why += " (" + cr.interrupted + ")"
		}
		unknown("no launch ran, so no receipt to judge: " + why + "; captures downloaded: " + notThereText(notThere))
	case len(notThere) > 0:
		unknown(fmt.Sprintf("every launch stopped with a confirmed receipt (%s); captures downloaded: %s, not judged: the harness was cut short (%s)",
			strings.Join(launches, ", "), notThereText(notThere), cr.interrupted))
	default:
		cr.check(id, clauseClose, true, "every launch stopped with a confirmed receipt (%s), captures downloaded: ok", strings.Join(launches, ", "))
	}
	return false
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
