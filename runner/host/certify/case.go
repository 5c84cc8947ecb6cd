package certify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/agenthost"
	"github.com/sandproof/sandproof/runner/host/capture"
	"github.com/sandproof/sandproof/runner/host/hostfile"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/relay"
	"github.com/sandproof/sandproof/runner/host/session"
	"github.com/sandproof/sandproof/runner/model"
	"github.com/sandproof/sandproof/runner/probe"
	"github.com/sandproof/sandproof/runner/warden/receipt"
	"github.com/sandproof/sandproof/runner/witness"
)

// Sandbox paths the owner uses.
const (
	TaskDir     = session.TaskDir
	Deliverable = TaskDir + "/deliverable.txt"
	BaseDir     = session.DefaultBaseDir
	ownerDir    = BaseDir + "/owner" // the owner's volume, read-only
	probePath   = ownerDir + "/probe"
	agentPath   = ownerDir + "/sandagent"
	wardenPath  = ownerDir + "/warden" // placed into each session's bin/ by seed, not uploaded
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

// caseRun is one case in progress: what it is (its spec, its dirs, the
// owner's paths, the session's names, all fixed when it starts) and what
// it has recorded (its evidence and its clock). Nothing a stage finds in
// the sandbox is kept here: each stage (stages.go) returns it as a value
// that the next one takes, as containerd's shim returns a task's state
// (`ss, err := manager.Stop(ctx, id)`).
type caseRun struct {
	r      *runner
	c      caseSpec
	ev     *reports.Evidence
	timing CaseTiming
	dir    string // host dir of the case's files
	owner  ownerPaths
	sess   sessionPaths
	intr   interruptWatch
	// sb is the case's sandbox once created: the engine is asked about
	// it after a provider error (witness).
	sb provider.Sandbox
	// borrowed is what a borrowed case's owner started before the launch.
	borrowed borrowedSeen
	// resultFailure is the adapter's result rule's failure message
	// (readCaptures), where a fault case looks for the harness's own
	// report of the fault.
	resultFailure string
}

// ownerPaths are the task user and the owner's markers in the sandbox.
type ownerPaths struct {
	uid, gid   int
	home       string
	markers    []string // the four XDG markers
	reqPaths   []string // the files the declared requirements look for
	allMarkers []string
}

// sessionPaths name the adapter's session in the sandbox.
type sessionPaths struct {
	id, dir, home string
}

// modelSide is the model side of a case (startModel): the scripted
// model (nil for a real one) behind the case's recording relay, the
// challenge, and the adapter's context naming the relay.
type modelSide struct {
	// stall is told when the scripted model begins a stall (nil for a
	// real model).
	stall     *stallSignal
	srv       *model.Server
	rel       *relay.Relay
	modelName string
	challenge string
	actx      adapter.Context
}

// sandboxed is what setup leaves: the sandbox, the session agent over
// which the adapter's side reaches it, the probe's baseline, the adapter
// context with the runtime's mount, and the requirements the image
// lacks ("" when none). A setup that failed returns what it got so far
// (the sandbox for teardown).
type sandboxed struct {
	// ownerProcs are processes the owner started after the baseline
	// (borrowed's service): verify expects them alive, not gone.
	ownerProcs []witness.ID
	sb         provider.Sandbox
	agent      *sessionAgent
	before     probe.Snapshot
	actx       adapter.Context
	lacks      string
}

// sessionAgent is the session agent's channel, the sandbox as the
// session sees it, with its stderr kept for errors; closed once.
type sessionAgent struct {
	sb     *agenthost.Sandbox
	stderr *hostfile.HeadBuffer
}

// activationResult is what the activation stage leaves: whether the launch was
// started (close.receipts then requires its receipt), its result, and the
// CLI's version launch after it.
type activationResult struct {
	// cancelled is when a cancel's owner stopped waiting to close the
	// session (the model had stalled); zero otherwise.
	cancelled time.Time
	// writer is what the owner's probe saw of the writer from the stall
	// on (watchStall); zero outside the writer scenarios.
	writer     writerWitness
	launched   bool
	res        *session.Result
	version    *session.Result
	versionErr error
}

// closed is what close leaves: the session's close result and error.
type closed struct {
	res *session.CloseResult
	err error
}

// interruptWatch is where the run's interrupt found the case: the stage
// running, the last one ended, and where the interrupt came (written by
// the interrupt's own goroutine, hence the lock); reason is set the first
// time the case learns of it ("SIGINT during seed").
type interruptWatch struct {
	ic                          context.Context // nil: the run has no interrupt
	mu                          sync.Mutex
	running, ended, interruptAt string
	reason                      string
}

// interruptReached reports whether the run's interrupt has reached the
// case, and the first time it has, records why ("SIGINT during seed").
// Asked before a stage, true means that stage and every later one but
// close and teardown do not run; asked at the verdict, it makes the case
// unknown (contract §8 attempts and interrupts).
func (w *interruptWatch) interruptReached() bool {
	if w.reason != "" {
		return true
	}
	if w.ic == nil || w.ic.Err() == nil {
		return false
	}
	w.reason = interruptCause(w.ic) + " " + w.at()
	return true
}

// watch notes where the run's interrupt finds the case, for its reason;
// the returned func ends the watch.
func (w *interruptWatch) watch() (stop func() bool) {
	if w.ic == nil {
		return func() bool { return true }
	}
	return context.AfterFunc(w.ic, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.interruptAt == "" {
			w.interruptAt = w.whereLocked()
		}
	})
}

// at is where the interrupt found the case ("during seed", "after
// activation"), or where the case is now if the watch has not run yet.
func (w *interruptWatch) at() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.interruptAt != "" {
		return w.interruptAt
	}
	return w.whereLocked()
}

func (w *interruptWatch) whereLocked() string {
	switch {
	case w.running != "":
		return "during " + w.running
	case w.ended != "":
		return "after " + w.ended
	}
	return "before " + reports.StageSetup
}

// stageBegins and stageEnds keep where for the interrupt's reason.
func (w *interruptWatch) stageBegins(name string) {
	w.mu.Lock()
	w.running = name
	w.mu.Unlock()
}

func (w *interruptWatch) stageEnds(name string) {
	w.mu.Lock()
	w.running, w.ended = "", name
	w.mu.Unlock()
}

// interruptCause is the reason the interrupt context carries ("SIGINT").
func interruptCause(ic context.Context) string {
	if c := context.Cause(ic); c != nil && !errors.Is(c, context.Canceled) {
		return c.Error()
	}
	return "interrupted"
}

// newCheck is a check that passed or failed.
func newCheck(id, clause string, ok bool, detail string, args ...any) reports.Check {
	st := reports.StatusPassed
	if !ok {
		st = reports.StatusFailed
	}
	return reports.Check{ID: id, Status: st, Clause: clause, Detail: fmt.Sprintf(detail, args...)}
}

// check records a check that passed or failed and reports whether it
// passed.
func (cr *caseRun) check(id, clause string, ok bool, detail string, args ...any) bool {
	cr.ev.Checks = append(cr.ev.Checks, newCheck(id, clause, ok, detail, args...))
	return ok
}

func (cr *caseRun) errType(t string) { setErrType(cr.ev, t) }

// setErrType keeps the first error type a case met.
func setErrType(ev *reports.Evidence, t string) {
	if ev.ErrorType == nil {
		ev.ErrorType = &t
	}
}

// stopsCase says whether a stage's error stops the case: a provider
// error does (the later stages but teardown do not run: an answer from a
// dead sandbox proves nothing).
func stopsCase(err error) bool { return provider.IsProviderError(err) }

// engineFailed is a stage's provider error that the engine, asked right
// after it (provider.EngineWitness), confirmed as its own failure: cause
// is the engine's word. It wraps the error, so stopsCase still holds.
type engineFailed struct {
	err   error
	cause string
}

func (e *engineFailed) Error() string { return e.err.Error() }
func (e *engineFailed) Unwrap() error { return e.err }

// infraCause is the engine's word on err when a stage found err to be
// the engine's failure (witness); "" for every other error.
func infraCause(err error) string {
	var ef *engineFailed
	if errors.As(err, &ef) {
		return ef.cause
	}
	return ""
}

// witness asks the engine, never the sandbox, whether the provider error
// err of stage is its own failure: the case's sandbox's witness once it
// is made (its engine's ping, the event stream held since its creation,
// its inspect), the provider's before (a ping). Confirmed, err comes back
// wrapped with the cause, and the case's record keeps the first cause
// (Evidence.Infrastructure). A provider without a witness confirms
// nothing, nor does an engine that answers, stayed up and holds the
// container: a channel the harness broke (it killed the agent, it ran the
// container out of memory or pids) stays the harness's failure
// (docs/threat-model.md, Infrastructure failures).
func (cr *caseRun) witness(stage string, err error) error {
	if !stopsCase(err) || infraCause(err) != "" {
		return err
	}
	var w provider.EngineWitness
	if cr.sb != nil {
		w, _ = provider.As[provider.EngineWitness](cr.sb)
	} else if cr.r != nil {
		w, _ = cr.r.prov.(provider.EngineWitness)
	}
	if w == nil {
		return err
	}
	cause := w.EngineFault(context.Background())
	if cause == "" {
		return err
	}
	if cr.ev.Infrastructure == "" {
		cr.ev.Infrastructure = cause + " (after " + stage + "'s provider error)"
	}
	return &engineFailed{err: err, cause: cause}
}

// stage runs fn as one stage of the protocol, timing it and printing its
// progress. A provider error is recorded as the stage's check: failed,
// unless the engine confirms it as its own failure (witness), which makes
// the check unknown; the caller, seeing stopsCase, runs no later stage
// but teardown.
func (cr *caseRun) stage(name string, fn func() error) error {
	t := time.Now()
	cr.intr.stageBegins(name)
	cr.r.progress("%s: %s ...", cr.c.id, name)
	err := fn()
	cr.intr.stageEnds(name)
	secs := time.Since(t).Seconds()
	cr.ev.Stages = append(cr.ev.Stages, reports.Stage{Name: name, StartedAt: t.UTC(), Seconds: secs})
	if err != nil {
		cr.r.progress("%s: %s failed after %.2fs: %v", cr.c.id, name, secs, redact(err.Error(), cr.r.key))
		if stopsCase(err) {
			err = cr.witness(name, err)
			if infraCause(err) == "" {
				cr.errType("provider_error")
			}
			cr.checkErr(name+".provider", clauseFor(name), err, "provider error, case stopped: %s", redact(err.Error(), cr.r.key))
		}
		return err
	}
	cr.r.progress("%s: %s done in %.2fs", cr.c.id, name, secs)
	return nil
}

// checkErr records a check that passes when err is nil and fails
// otherwise, unless err is the engine's failure (infraCause): then it is
// unknown, with the engine's word, since what the engine cut short proves
// nothing either way.
func (cr *caseRun) checkErr(id, clause string, err error, detail string, args ...any) bool {
	if cause := infraCause(err); cause != "" {
		cr.ev.Checks = append(cr.ev.Checks, reports.Check{ID: id, Status: reports.StatusUnknown, Clause: clause,
			Detail: fmt.Sprintf(detail, args...) + "; not judged, the engine failed: " + redact(cause, cr.r.key) + " (--resume runs the case again)"})
		return false
	}
	return cr.check(id, clause, err == nil, detail, args...)
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
// is the conjunction of the checks, and no checks is unknown. A case the
// run's interrupt reached at any point before this verdict, whatever
// stage it was in (verify and teardown included, which it does not cut
// short), or one the engine failed (its own word, Evidence.Infrastructure),
// is unknown unless a check failed on its own: --resume runs it again.
func (cr *caseRun) finish() {
	cr.verdict()
	if cr.r != nil {
		cr.causes()
	}
}

// verdict asks the interrupt a last time (a skipped case stays skipped)
// and judges the case.
func (cr *caseRun) verdict() {
	if cr.ev.Status != reports.StatusSkipped {
		cr.intr.interruptReached()
	}
	judge(cr.ev, cr.intr.reason)
}

// judge sets a case's status from its checks, the interrupt's reason
// ("" when the interrupt did not reach it) and the engine's word on its
// own failure (ev.Infrastructure, "" when it did not fail the case). An
// unknown check makes a case unknown only for these two causes, which
// the harness cannot bring about, and for the scripted model's own limit
// (model.tools_understood, limitChecks: the harness's tools are not
// blamed for what the model cannot call, and nothing is proven, so the
// case never passes); for any other it fails the case.
func judge(ev *reports.Evidence, interrupted string) {
	if interrupted != "" && ev.Status != reports.StatusSkipped {
		// What the interrupt cut short proves nothing either way; a
		// check that failed on its own still fails the case.
		ev.Interrupted = interrupted
		ev.Checks = append(ev.Checks, reports.Check{ID: "interrupt", Status: reports.StatusUnknown, Clause: clauseInterrupt,
			Detail: interrupted + "; the running launch was stopped through the session (receipts kept); --resume runs the case again"})
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
	if !failed && interrupted != "" {
		ev.Status = reports.StatusUnknown
		setErrType(ev, "interrupted")
		return
	}
	if !failed && ev.Infrastructure != "" {
		// Not the harness's failure, whatever a stage that met the
		// engine's failure set before.
		ev.Status = reports.StatusUnknown
		t := "infrastructure"
		ev.ErrorType = &t
		return
	}
	if !failed && modelLimited(ev.Checks) {
		ev.Status = reports.StatusUnknown
		setErrType(ev, "model_limit")
		return
	}
	if pass {
		ev.Status = reports.StatusPassed
		ev.ErrorType = nil
	} else {
		ev.Status = reports.StatusFailed
		setErrType(ev, "check_failed")
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
	if res.ExitCode == probe.ExitDeadline {
		return probe.Snapshot{}, probeDeadline(argv, res.Stderr)
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
		// The probe itself is no baseline process: it became the session
		// agent (probe.Diff leaves it out of the baseline the same way).
		if s.IsSelf(p) {
			continue
		}
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

// imageHas says whether the probe found p in the image (a regular file,
// links followed: probe --present).
func imageHas(s probe.Snapshot, p string) bool {
	for _, m := range s.Present {
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
			if adapter.IsPathRequirement(q) {
				if !imageHas(s, q) {
					out = append(out, fmt.Sprintf("%s (no such file in the image)", q))
				}
				continue
			}
			if !slices.ContainsFunc(requirementPaths[q], func(p string) bool { return imageHas(s, p) }) {
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
func (cr *caseRun) checkCaptures(cut int) {
	ev := cr.ev
	var notes []string
	for _, w := range ev.CapturesWithheld {
		switch w.Kind {
		case provider.WithheldSymlink, provider.WithheldHardlink:
			notes = append(notes, fmt.Sprintf("%s: %s to %q (recorded, not followed)", w.Path, w.Kind, w.Target))
		case provider.WithheldSpecial:
			notes = append(notes, fmt.Sprintf("%s: special file, skipped", w.Path))
		case provider.WithheldDenied:
			notes = append(notes, fmt.Sprintf("%s: the harness's user may not read it, not read", w.Path))
		case provider.WithheldStopped:
			notes = append(notes, fmt.Sprintf("%s: stopped here (a case cap), %d of %d bytes kept", w.Path, w.Written, w.Size))
		default:
			notes = append(notes, fmt.Sprintf("%s: %s, %d of %d bytes kept", w.Path, w.Kind, w.Written, w.Size))
		}
	}
	cr.check("close.captures_bounded", clauseCaptures, cut == 0,
		"%d bytes and %d entries captured (caps: %d bytes per file, %d per case, %d entries per case); %d withheld (%d more not listed): %s",
		ev.CaptureBytes, ev.CaptureEntries, provider.DefaultFileBytes, provider.DefaultCaseBytes, cr.r.captureEntries(), len(notes), ev.CapturesWithheldOmitted, redact(strings.Join(truncList(notes, 20), "; "), cr.r.key))
}

// readCaptures reads the activation's events and the adapter's result
// source into the evidence.
//
// The check activation.result is recorded only for a scenario that judges
// the deliverable; the others read the same fields into the evidence and
// judge them in their own checks.
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
	if name, ok := strings.CutPrefix(m.Result.From, "json:"); ok {
		if p, ok := captures[name]; !ok {
			readErr = fmt.Errorf("file capture %q: no path", name)
		} else {
			_, readErr = capture.ReadJSONRecords(filepath.Join(capDir, "files", filepath.FromSlash(p)), m.Result.Records, j.Add)
		}
	}
	out := j.Outcome()
	cr.resultFailure = out.FailureMessage
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
	if cr.c.scenario.NoDeliverable {
		cr.r.progress("%s: %s", cr.c.id, detail)
		return
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
