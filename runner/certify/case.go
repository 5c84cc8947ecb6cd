package certify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandproof/sandproof/fixtures/model"
	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/adapter"
	"github.com/sandproof/sandproof/runner/capture"
	"github.com/sandproof/sandproof/runner/hostfile"
	"github.com/sandproof/sandproof/runner/probe"
	"github.com/sandproof/sandproof/runner/provider"
	"github.com/sandproof/sandproof/runner/receipt"
	"github.com/sandproof/sandproof/runner/session"
)

// Sandbox paths the owner uses.
const (
	TaskDir     = "/task"
	Deliverable = "/task/deliverable.txt"
	BaseDir     = session.DefaultBaseDir
	ownerDir    = BaseDir + "/owner" // the probe, mounted read-only
	probePath   = ownerDir + "/probe"
	activation  = "activation"
)

// Clauses of docs/contract.md the checks cite.
const (
	clauseSetup     = "§7.1 setup"
	clauseSeed      = "§7.2 seed and activation"
	clauseClose     = "§7.3 close"
	clauseVerify    = "§7.4 verify"
	clauseTeardown  = "§7.5 teardown"
	clauseSecrets   = "§8 evidence"
	clauseSkip      = "§7 requirements"
	clauseCaptures  = "§8 captured files are data"
	clauseInterrupt = "§8 attempts and interrupts"
)

// requirementPaths are the files whose presence satisfies a requirement
// (any one of them), found by the probe in the image, never by its name.
var requirementPaths = map[string][]string{
	"glibc": {"/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1", "/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1"},
	"musl":  {"/lib/ld-musl-x86_64.so.1", "/lib/ld-musl-aarch64.so.1"},
	"libstdc++": {"/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "/usr/lib/aarch64-linux-gnu/libstdc++.so.6",
		"/usr/lib/libstdc++.so.6", "/usr/lib64/libstdc++.so.6", "/lib/libstdc++.so.6"},
	"libgcc": {"/lib/x86_64-linux-gnu/libgcc_s.so.1", "/lib/aarch64-linux-gnu/libgcc_s.so.1", "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1",
		"/usr/lib/libgcc_s.so.1", "/lib/libgcc_s.so.1", "/usr/lib64/libgcc_s.so.1"},
	"sh": {"/bin/sh"},
}

// caseRun is one case in progress.
type caseRun struct {
	r       *runner
	c       caseSpec
	ev      *reports.Evidence
	dir     string // host dir of the case's files
	stopped bool   // a provider error ended the case
	cut     int    // capture files cut at a cap, downloads stopped
	// interrupted says why the run's interrupt cut the case short
	// ("SIGINT during activation"); "" when it did not.
	interrupted string
}

// interruptedBefore reports whether the run was interrupted before stage
// began; the stage and every later one but close and teardown are then
// not run, and the case ends unknown (contract §8 attempts and interrupts).
func (cr *caseRun) interruptedBefore(stage string) bool {
	if cr.interrupted != "" {
		return true
	}
	ic := cr.r.opts.Interrupt
	if ic == nil || ic.Err() == nil {
		return false
	}
	cr.interrupted = fmt.Sprintf("%s before %s", interruptCause(ic), stage)
	return true
}

// interruptCause is the reason the interrupt context carries ("SIGINT").
func interruptCause(ic context.Context) string {
	if c := context.Cause(ic); c != nil && !errors.Is(c, context.Canceled) {
		return c.Error()
	}
	return "interrupted"
}

func (cr *caseRun) check(id, clause string, ok bool, detail string, args ...any) bool {
	st := reports.StatusPassed
	if !ok {
		st = reports.StatusFailed
	}
	cr.ev.Checks = append(cr.ev.Checks, reports.Check{ID: id, Status: st, Clause: clause, Detail: fmt.Sprintf(detail, args...)})
	return ok
}

func (cr *caseRun) errType(t string) {
	if cr.ev.ErrorType == nil {
		cr.ev.ErrorType = &t
	}
}

// stage runs fn as one stage of the protocol, timing it and printing its
// progress. A provider error stops the case (the later stages but teardown
// do not run: an answer from a dead sandbox proves nothing).
func (cr *caseRun) stage(name string, fn func() error) error {
	if cr.stopped && name != reports.StageTeardown {
		return errors.New("case stopped")
	}
	t := time.Now()
	cr.r.progress("%s: %s ...", cr.c.id, name)
	err := fn()
	secs := time.Since(t).Seconds()
	cr.ev.Stages = append(cr.ev.Stages, reports.Stage{Name: name, StartedAt: t.UTC(), Seconds: secs})
	if err != nil {
		cr.r.progress("%s: %s failed after %.2fs: %v", cr.c.id, name, secs, redact(err.Error(), cr.r.key))
		if provider.IsProviderError(err) {
			cr.stopped = true
			cr.errType("provider_error")
			cr.check(name+".provider", clauseFor(name), false, "provider error, case stopped: %s", redact(err.Error(), cr.r.key))
		}
		return err
	}
	cr.r.progress("%s: %s done in %.2fs", cr.c.id, name, secs)
	return nil
}

func clauseFor(stage string) string {
	switch stage {
	case reports.StageSetup:
		return clauseSetup
	case reports.StageSeed, reports.StageActivation:
		return clauseSeed
	case reports.StageClose:
		return clauseClose
	case reports.StageVerify:
		return clauseVerify
	}
	return clauseTeardown
}

func redact(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[REDACTED]")
}

func receiptSummary(raw []byte) *reports.Receipt {
	if len(raw) == 0 {
		return nil
	}
	var r reports.Receipt
	if json.Unmarshal(raw, &r) != nil {
		return nil
	}
	return &r
}

func receiptOf(rec *receipt.Receipt) *reports.Receipt {
	if rec == nil {
		return nil
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil
	}
	return receiptSummary(b)
}

func launchSeconds(rec *receipt.Receipt) float64 {
	if rec == nil {
		return 0
	}
	a, err1 := time.Parse(time.RFC3339Nano, rec.StartedAt)
	b, err2 := time.Parse(time.RFC3339Nano, rec.EndedAt)
	if err1 != nil || err2 != nil || b.Before(a) {
		return 0
	}
	return b.Sub(a).Seconds()
}

func (r *runner) runCase(ctx context.Context, c caseSpec) (ev *reports.Evidence, timing CaseTiming) {
	start := time.Now()
	m := c.adapter
	ev = &reports.Evidence{
		Schema: reports.Schema, RunID: r.runID, CaseID: c.id, Attempt: max(1, c.attempt), Harness: m.Name, Image: c.image.Name,
		Shard: r.opts.Shard.String(), MatrixSHA256: r.matrix.SHA256, MatrixCases: len(r.matrix.Cases),
		Status: reports.StatusUnknown, OutputItemTypes: map[string]int{}, CloseObservationGaps: []string{},
		Provenance: reports.Provenance{WardenSHA256: r.wardenSHA, AdapterSHA256: m.SHA256, SuiteVersion: suiteVersion(),
			StartedAt: start.UTC(), Host: r.host},
	}
	cr := &caseRun{r: r, c: c, ev: ev, dir: filepath.Join(r.opts.Out, "cases", caseDirName(c.id))}
	ev.CaseDir = path.Join("cases", caseDirName(c.id))
	timing = CaseTiming{CaseID: c.id}
	defer func() {
		ev.EndedAt = time.Now().UTC()
		ev.Seconds = time.Since(start).Seconds()
		timing.Seconds = ev.Seconds
		timing.Overhead = ev.Seconds - timing.Harness - timing.Install
		timing.Status = ev.Status
	}()
	if err := os.MkdirAll(cr.dir, 0o755); err != nil {
		cr.check("setup.case_dir", clauseSetup, false, "create %s: %v", cr.dir, err)
		cr.finish()
		return ev, timing
	}

	uid, gid := 1000, 1000
	if u, g, ok := strings.Cut(r.opts.User, ":"); ok {
		uid, _ = strconv.Atoi(u)
		gid, _ = strconv.Atoi(g)
	}
	home := r.opts.TaskHome
	xdg := []string{home + "/.config", home + "/.local/share", home + "/.cache", home + "/.local/state"}
	var markers []string
	for _, d := range xdg {
		markers = append(markers, d+"/sandproof-owner/marker")
	}
	var reqPaths []string
	for _, q := range m.Requires {
		reqPaths = append(reqPaths, requirementPaths[q]...)
	}
	allMarkers := append(slices.Clone(markers), reqPaths...)

	// The scripted model: one server per case on the host's loopback, so
	// its calls are the case's own; it requires the upstream key. Every
	// model, scripted or not, is reached through the case's recording
	// relay, which holds the canary in and the upstream key out.
	upstream, modelName := r.opts.ModelURL, r.opts.ModelURL
	var srv *model.Server
	if upstream == "" {
		var err error
		srv, err = model.Start(model.Options{Addr: "127.0.0.1:0", APIKey: r.upstreamKey, LogPath: filepath.Join(cr.dir, "model_calls.jsonl")})
		if err != nil {
			cr.check("setup.model", clauseSetup, false, "start the scripted model: %v", err)
			cr.finish()
			return ev, timing
		}
		defer srv.Close()
		upstream, modelName = srv.URL(), "scripted"
	}
	rel, err := startRelay(upstream, r.key, r.upstreamKey, filepath.Join(cr.dir, "model_relay.jsonl"))
	if err != nil {
		cr.check("setup.relay", clauseSetup, false, "start the model relay: %v", err)
		cr.finish()
		return ev, timing
	}
	defer rel.Close()
	modelURL := rel.URL()
	if h := r.harness[c.rt]; h != nil {
		hc := *h
		ev.HarnessRuntime = &hc
	}
	challenge := model.ChallengePrefix + randomHex(16)

	actx := adapter.Context{ModelURL: modelURL, Model: r.opts.ModelName, TaskDir: TaskDir, RuntimeHostDir: c.runtime}
	mounts := []provider.Mount{{Source: r.probeDir, Target: ownerDir}}
	if m.Runtime.Delivery == adapter.DeliveryMount && c.runtime != "" {
		actx.RuntimeDir = adapter.RuntimeMountDir(m.Name)
		mounts = append(mounts, provider.Mount{Source: c.runtime, Target: actx.RuntimeDir})
	}

	var sb provider.Sandbox
	var before probe.Snapshot
	skip := c.skip

	// 1. Setup (owner).
	setupErr := cr.stage(reports.StageSetup, func() error {
		var err error
		sb, err = r.prov.Create(ctx, provider.CreateSpec{
			Image: c.image.Ref, Network: provider.NetworkHost, Mounts: mounts, Expire: 30 * time.Minute,
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
		info, err := sb.Inspect(ctx)
		if err != nil {
			return err
		}
		ev.ImageID = info.ImageID
		// What the engine applies, read back, not what was asked for.
		ev.Sandbox = &reports.Sandbox{Network: provider.NetworkHost}
		if l := info.Limits; l != nil {
			ev.Sandbox.PidsLimit, ev.Sandbox.MemoryBytes, ev.Sandbox.CPUShares, ev.Sandbox.OOMScoreAdj = l.PidsLimit, l.MemoryBytes, l.CPUShares, l.OOMScoreAdj
		}
		// One probe run makes /task, the marker dirs and markers (owned
		// by the task user) and takes the baseline right after.
		dirs := []string{TaskDir, home + "/.local"}
		for _, mk := range markers {
			dirs = append(dirs, path.Dir(path.Dir(mk)), path.Dir(mk))
		}
		argv := []string{probePath, "setup", "--owner", fmt.Sprintf("%d:%d", uid, gid),
			"--dirs", strings.Join(dirs, ","), "--write-markers", strings.Join(markers, ",")}
		if len(reqPaths) > 0 {
			argv = append(argv, "--markers", strings.Join(reqPaths, ","))
		}
		before, err = probeRun(ctx, sb, argv)
		if err != nil {
			return err
		}
		ev.Before = beforeOf(before, markers)
		// The challenge, readable by the harness user only; never in
		// the prompt, unknown to the adapter.
		if err := provider.UploadBytes(ctx, sb, []byte(challenge+"\n"), ChallengeFile, 0o400, uid, gid); err != nil {
			return err
		}
		missing := missingRequirements(m.Requires, before, r.opts.Bash != "")
		if len(missing) > 0 {
			if skip != "" {
				skip += "; "
			}
			skip += fmt.Sprintf("image %s lacks %s", c.image.Name, strings.Join(missing, "; "))
		}
		return nil
	})
	cr.check("setup", clauseSetup, setupErr == nil, "container, /task, the challenge, four XDG markers, probe baseline: %s", errText(setupErr, r.key))

	var sess *session.Session
	var actRes *session.Result
	var closeRes *session.CloseResult
	var closeErr error
	sessID := "c-" + randomHex(6)
	sessDir := path.Join(BaseDir, sessID)
	sessHome := path.Join(sessDir, "home")

	if setupErr == nil && skip == "" && !cr.interruptedBefore(reports.StageSeed) {
		// 2. Seed and activation (adapter).
		seedErr := cr.stage(reports.StageSeed, func() error {
			ad, err := m.Session(actx)
			if err != nil {
				return err
			}
			// Private state dirs, owned by the harness user, made in
			// seed's one transfer.
			dirs, err := m.StateDirs(actx, sessDir, sessHome)
			if err != nil {
				return err
			}
			for _, d := range dirs {
				if rel := strings.TrimPrefix(d, sessHome+"/"); rel != d {
					ad.Dirs = append(ad.Dirs, path.Join("home", rel))
				}
			}
			sess, err = session.New(sb, ad, session.Config{ID: sessID, User: r.opts.User, Binaries: r.bins,
				CaptureDir: filepath.Join(cr.dir, "capture")})
			if err != nil {
				return err
			}
			err = sess.Seed(ctx)
			ev.SeedSeconds = sess.SeedDuration().Seconds()
			return err
		})
		var re *session.ReceiptError
		if errors.As(seedErr, &re) {
			timing.Install = launchSeconds(re.Receipt)
		}
		if !cr.stopped {
			cr.check("seed", clauseSeed, seedErr == nil, "warden uploaded and verified, runtime and install: %s", errText(seedErr, r.key))
		}
		if seedErr != nil {
			cr.errType("seed_failed")
		}

		if seedErr == nil && !cr.interruptedBefore(reports.StageActivation) {
			actErr := cr.stage(reports.StageActivation, func() error {
				// The run's interrupt ends the wait, not the launch:
				// close below stops it through the session, so its
				// receipt is kept.
				wctx, cancel := interruptible(ctx, r.opts.Interrupt)
				defer cancel()
				var err error
				actRes, err = sess.Activate(wctx, activation, model.ChallengePrompt(ChallengeFile, Deliverable), m.Launch.Deadline)
				if err != nil && actRes == nil && ctx.Err() == nil && wctx.Err() != nil {
					cr.interrupted = interruptCause(r.opts.Interrupt) + " during activation"
					return nil
				}
				return err
			})
			if actRes != nil {
				ev.ActivationReceipt = receiptSummary(actRes.ReceiptJSON)
				timing.Harness = launchSeconds(actRes.Receipt)
			}
			if !cr.stopped && cr.interrupted == "" {
				ok := actErr == nil && actRes != nil && actRes.Receipt.CleanupConfirmed
				cr.check("activation.receipt", clauseSeed, ok, "activation receipt: %s", receiptText(actRes, actErr, r.key))
			}
		}

		// The CLI's own version, under warden with a deadline, after the
		// activation so it cannot help it; its output is read after
		// close from the captured run dir.
		var versionRes *session.Result
		var versionErr error
		if seedErr == nil && !cr.stopped && cr.interrupted == "" && len(m.VersionArgv) > 0 {
			versionRes, versionErr = sess.Activate(ctx, adapter.VersionLaunchID, "", versionDeadline)
		}

		// 3. Close: always, so what ran is stopped and captured.
		if !cr.stopped {
			cr.stage(reports.StageClose, func() error {
				closeRes, closeErr = sess.Close(ctx)
				return closeErr
			})
		}
		if closeRes != nil {
			ev.SessionClosed = closeErr == nil
			if rec, ok := closeRes.Receipts[activation]; ok {
				ev.CloseReceipt = receiptOf(rec)
			}
			ev.AdapterSessionDirRemoved = closeRes.SessionDirRemoved
			ev.CaptureBytes = closeRes.CaptureBytes
			// The evidence line stays small: the cut entries first, then
			// the rest, 100 at most.
			ws := slices.Clone(closeRes.Withheld)
			slices.SortStableFunc(ws, func(a, b provider.Withheld) int { return cutFirst(a) - cutFirst(b) })
			for _, w := range ws {
				if len(ev.CapturesWithheld) == maxWithheldEvidence {
					ev.CapturesWithheldOmitted++
					continue
				}
				ev.CapturesWithheld = append(ev.CapturesWithheld, reports.Withheld(w))
			}
			ev.CapturesWithheldOmitted += closeRes.WithheldOmitted
			cr.cut = closeRes.CaptureCut
		}
		if !cr.stopped && sess != nil {
			cr.check("close.receipts", clauseClose, closeErr == nil && ev.CloseReceipt != nil && ev.CloseReceipt.CleanupConfirmed,
				"every launch stopped with a confirmed receipt, captures downloaded: %s", errText(closeErr, r.key))
			if closeErr != nil {
				cr.errType("close_failed")
			}
			cr.checkCaptures()
			if cr.interrupted == "" {
				captures, _ := m.CapturePaths(actx, sessDir, sessHome)
				cr.readCaptures(actRes, captures)
			}
			if len(m.VersionArgv) > 0 && ev.HarnessRuntime != nil {
				ev.HarnessRuntime.CLIVersion, ev.HarnessRuntime.CLIVersionError = cr.readVersion(versionRes, versionErr)
			}
		}

		// 4. Verify, only after close (owner). The relay and the model
		// are closed first: Close waits for calls in flight, so the
		// transcript is whole.
		if !cr.stopped && closeRes != nil && !cr.interruptedBefore(reports.StageVerify) {
			cr.stage(reports.StageVerify, func() error {
				rel.Close()
				derived := ""
				if srv != nil {
					srv.Close()
					derived = srv.Token(challenge)
				}
				ev.ModelCalls = rel.ModelCalls()
				proof := analyse(rel.Calls(), challenge, derived, modelName)
				cr.loopChecks(proof, derived)
				return cr.verify(ctx, sb, before, allMarkers, markers, proof, sessDir)
			})
		}
	} else if setupErr == nil && skip != "" {
		ev.Status = reports.StatusSkipped
		ev.SkipReason = skip
		ev.Checks = append(ev.Checks, reports.Check{ID: "requirements", Status: reports.StatusSkipped, Clause: clauseSkip, Detail: skip})
		r.progress("%s: skipped: %s", c.id, skip)
	}
	rel.Close()
	ev.ModelCalls = rel.ModelCalls()

	// 5. Teardown (owner), whatever happened.
	if sb != nil {
		tctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		terr := cr.stage(reports.StageTeardown, func() error {
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
		cancel()
		ev.OwnerTeardownContainerRemoved = terr == nil
		cr.check("teardown.container_removed", clauseTeardown, terr == nil, "container removed and unknown to the engine: %s", errText(terr, r.key))
	}

	// No key may be in anything this case left on the host.
	leaks, err := FindCanary(cr.dir, r.key)
	if err == nil && r.opts.APIKey != "" {
		var more []string
		more, err = FindCanary(cr.dir, r.opts.APIKey)
		leaks = append(leaks, more...)
	}
	cr.check("secrets.canary", clauseSecrets, err == nil && len(leaks) == 0, "API key canary or model key in the case's files: %d file(s) %v", len(leaks), relAll(cr.dir, leaks))
	cr.finish()
	return ev, timing
}

func relAll(dir string, ps []string) []string {
	out := []string{}
	for _, p := range ps {
		if r, err := filepath.Rel(dir, p); err == nil {
			out = append(out, r)
		}
	}
	return out
}

func errText(err error, key string) string {
	if err == nil {
		return "ok"
	}
	return redact(err.Error(), key)
}

func receiptText(res *session.Result, err error, key string) string {
	if err != nil {
		return errText(err, key)
	}
	if res == nil || res.Receipt == nil {
		return "none"
	}
	rc := "null"
	if res.Receipt.ReturnCode != nil {
		rc = strconv.Itoa(*res.Receipt.ReturnCode)
	}
	return fmt.Sprintf("cause %s, return_code %s, cleanup_confirmed %t, %d reached", res.Receipt.Cause, rc, res.Receipt.CleanupConfirmed, len(res.Receipt.Reached))
}

// finish sets the verdict: a skipped case stays skipped; otherwise passed
// is the conjunction of the checks, and no checks is unknown.
func (cr *caseRun) finish() {
	cr.judge()
	if cr.r != nil {
		cr.causes()
	}
}

// judge sets the case's status from its checks.
func (cr *caseRun) judge() {
	ev := cr.ev
	if cr.interrupted != "" && ev.Status != reports.StatusSkipped {
		// What the interrupt cut short proves nothing either way; a
		// check that failed on its own still fails the case.
		ev.Interrupted = cr.interrupted
		ev.Checks = append(ev.Checks, reports.Check{ID: "interrupt", Status: reports.StatusUnknown, Clause: clauseInterrupt,
			Detail: cr.interrupted + "; the running launch was stopped through the session (receipts kept); --resume runs the case again"})
	}
	if ev.Status == reports.StatusSkipped {
		ev.Passed = false
		return
	}
	if len(ev.Checks) == 0 {
		ev.Status = reports.StatusUnknown
		return
	}
	pass, failed := true, false
	for _, c := range ev.Checks {
		if c.Status != reports.StatusPassed {
			pass = false
		}
		failed = failed || c.Status == reports.StatusFailed
	}
	ev.Passed = pass
	if !failed && cr.interrupted != "" {
		ev.Status = reports.StatusUnknown
		cr.errType("interrupted")
		return
	}
	if pass {
		ev.Status = reports.StatusPassed
		ev.ErrorType = nil
	} else {
		ev.Status = reports.StatusFailed
		cr.errType("check_failed")
	}
}

func snapshot(ctx context.Context, sb provider.Sandbox, markers []string) (probe.Snapshot, error) {
	argv := []string{probePath, "snapshot"}
	if len(markers) > 0 {
		argv = append(argv, "--markers", strings.Join(markers, ","))
	}
	return probeRun(ctx, sb, argv)
}

// probeRun runs the owner's probe as root and decodes the snapshot it
// prints.
func probeRun(ctx context.Context, sb provider.Sandbox, argv []string) (probe.Snapshot, error) {
	res, err := sb.Exec(ctx, provider.ExecSpec{Argv: argv, User: "0"})
	if err != nil {
		return probe.Snapshot{}, err
	}
	if res.ExitCode != 0 {
		return probe.Snapshot{}, fmt.Errorf("probe %s: exit %d: %s", argv[1], res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	var s probe.Snapshot
	if err := json.Unmarshal(res.Stdout, &s); err != nil {
		return s, fmt.Errorf("decode probe snapshot: %w", err)
	}
	return s, nil
}

func toolText(t probe.Tool) string {
	if t.Absent() {
		return probe.None
	}
	return t.Path
}

func beforeOf(s probe.Snapshot, markers []string) *reports.Before {
	b := &reports.Before{OS: s.OS, Python3: toolText(s.Python3), Bash: toolText(s.Bash), Markers: slices.Clone(markers)}
	for _, p := range s.Processes {
		b.Processes = append(b.Processes, reports.Process{PID: p.PID, StartTime: p.StartTime, Comm: p.Comm})
	}
	return b
}

func markerPresent(s probe.Snapshot, p string) bool {
	for _, m := range s.Markers {
		if m.Path == p {
			return !m.Missing && m.Error == ""
		}
	}
	return false
}

// missingRequirements lists the declared requirements the probed image
// lacks, each with what was looked for.
func missingRequirements(reqs []string, s probe.Snapshot, hostBash bool) []string {
	var out []string
	for _, q := range reqs {
		switch q {
		case "bash":
			if s.Bash.Absent() && !hostBash {
				out = append(out, "bash (none on the image's PATH and no static bash on the host to provide)")
			}
		case "python3":
			if s.Python3.Absent() {
				out = append(out, "python3 (none on the image's PATH)")
			}
		default:
			if !slices.ContainsFunc(requirementPaths[q], func(p string) bool { return markerPresent(s, p) }) {
				out = append(out, fmt.Sprintf("%s (none of %s)", q, strings.Join(requirementPaths[q], ", ")))
			}
		}
	}
	return out
}

// maxWithheldEvidence caps captures_withheld.
const maxWithheldEvidence = 100

func cutFirst(w provider.Withheld) int {
	if w.Kind == provider.WithheldTruncated || w.Kind == provider.WithheldStopped {
		return 0
	}
	return 1
}

// checkCaptures records what the captures withheld: links and specials
// are data (recorded, never followed) and pass; a file cut at a cap or a
// download stopped fails the case, since its result was judged on part of
// the data.
func (cr *caseRun) checkCaptures() {
	ev := cr.ev
	var notes []string
	cut := cr.cut
	for _, w := range ev.CapturesWithheld {
		switch w.Kind {
		case provider.WithheldSymlink, provider.WithheldHardlink:
			notes = append(notes, fmt.Sprintf("%s: %s to %q (recorded, not followed)", w.Path, w.Kind, w.Target))
		case provider.WithheldSpecial:
			notes = append(notes, fmt.Sprintf("%s: special file, skipped", w.Path))
		default:
			notes = append(notes, fmt.Sprintf("%s: %s, %d of %d bytes kept", w.Path, w.Kind, w.Written, w.Size))
		}
	}
	cr.check("close.captures_bounded", clauseCaptures, cut == 0,
		"%d bytes captured (caps: %d per file, %d per case); %d withheld (%d more not listed): %s",
		ev.CaptureBytes, provider.DefaultFileBytes, provider.DefaultCaseBytes, len(notes), ev.CapturesWithheldOmitted, redact(strings.Join(truncList(notes, 20), "; "), cr.r.key))
}

// readCaptures reads the activation's events and the adapter's result
// source into the evidence.
func (cr *caseRun) readCaptures(act *session.Result, captures map[string]string) {
	ev, m := cr.ev, cr.c.adapter
	capDir := filepath.Join(cr.dir, "capture")
	events := filepath.Join(capDir, "run", activation, "events.jsonl")
	j := capture.NewJudge(m.Result)
	var readErr error
	if m.Launch.Mode == "events" {
		fn := j.Add
		if m.Result.From != "events" {
			fn = nil
		}
		st, err := capture.ReadEvents(events, fn)
		ev.RecordedEventLines = st.Lines
		ev.EventsOversizedLines = st.Oversized
		if err != nil && m.Result.From == "events" {
			readErr = err
		}
	}
	if name, ok := strings.CutPrefix(m.Result.From, "sqlite:"); ok {
		p, ok := captures[name]
		if !ok {
			readErr = fmt.Errorf("sqlite capture %q: no path", name)
		} else {
			_, readErr = capture.ReadSQLiteLimit(context.Background(), filepath.Join(capDir, "files", filepath.FromSlash(p)), m.Result.Query, capture.SQLiteLimits{}, j.Add)
		}
	}
	out := j.Outcome()
	var rc *int
	if act != nil && act.Receipt != nil {
		rc = act.Receipt.ReturnCode
	}
	ev.ResponseStatus = capture.ResponseStatus(m.Result, out, rc)
	if readErr != nil {
		ev.ResponseStatus = capture.ResponseIncomplete
		out.Gaps = append(out.Gaps, capture.GapResult)
	}
	ev.OutputItemTypes = out.ItemTypes
	ev.CloseObservationRecords = len(out.Observations)
	ev.CloseObservationGaps = out.Gaps
	detail := fmt.Sprintf("response_status %s from %s (%d records, exit %s)", ev.ResponseStatus, m.Result.From, out.Records, intText(rc))
	if out.FailureMessage != "" {
		detail += ": " + redact(out.FailureMessage, cr.r.key)
	}
	if readErr != nil {
		detail += ": " + errText(readErr, cr.r.key)
	}
	// warden's runner's own word on a CLI it could not start (a missing
	// loader, say), from the captured state dir.
	if stderr, err := hostfile.ReadFile(filepath.Join(capDir, "state", activation, "stderr"), provider.DefaultSmallBytes); err == nil || errors.Is(err, hostfile.ErrTooLarge) {
		if said := session.RunnerSaid(stderr); said != "" {
			detail += "; " + redact(said, cr.r.key)
		}
	}
	if !cr.check("activation.result", clauseSeed, ev.ResponseStatus == capture.ResponseCompleted, "%s", detail) {
		cr.errType("harness_failed")
	}
}

func intText(p *int) string {
	if p == nil {
		return "null"
	}
	return strconv.Itoa(*p)
}
