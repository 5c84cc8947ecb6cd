package certify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/model"
	"github.com/sandproof/sandproof/runner/probe"
	"github.com/sandproof/sandproof/runner/witness"
)

// What the owner does and reads in the scenarios beyond the protocol
// (contract §7.6 scenarios): the cancel's signal, the borrowed sandbox's
// service and state, the scenario checks after close.

// stallSignal is done once the scripted model begins a stall (its
// OnStall hook): a cancel's owner closes the session then, knowing the
// harness waits on the model, not after a guessed sleep.
type stallSignal struct {
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	seq    atomic.Int64 // the first stalled request's number, set before ctx ends
}

func newStallSignal() *stallSignal {
	ctx, cancel := context.WithCancel(context.Background())
	return &stallSignal{ctx: ctx, cancel: cancel}
}

func (s *stallSignal) began(seq int) {
	s.once.Do(func() {
		s.seq.Store(int64(seq))
		s.cancel()
	})
}

// stalledSeq is the first stalled request's number; 0 before a stall.
func (s *stallSignal) stalledSeq() int { return int(s.seq.Load()) }

// cancelOnStall is a cancel's owner: once the model stalls (stalled is
// closed) it closes the session (cancel ends the activation's wait;
// close stops the launch). When the harness ran the writer (calls, the
// model's record, with the stalled request stallSeq gives, shows a request
// after the one that asked for it), the owner first waits, bounded by
// writerShowWait, for the writer's file to show with a line in it in the
// sandbox, so the positive control does not race the writer's first line.
// ctx ending first (the launch ended, or the run's interrupt) returns
// without cancelling.
func cancelOnStall(ctx context.Context, stalled <-chan struct{}, stallSeq func() int, calls func() []model.Call, sb provider.Sandbox, cancel context.CancelFunc) {
	select {
	case <-ctx.Done():
		return
	case <-stalled:
	}
	defer cancel()
	seen := calls()
	// The model records a request when it is answered, and a stalled one
	// is not answered until the stall ends: without it here, the request
	// after the writer's is missing and the owner closed at once, racing
	// the writer's first line (a loaded host lost that race).
	if seq := stallSeq(); seq > 0 {
		seen = append(seen, model.Call{Seq: seq, Reply: "stall"})
	}
	if state, _ := writerCalled(seen); state != writerRan {
		return
	}
	for deadline := time.Now().Add(writerShowWait); time.Now().Before(deadline); {
		s, err := snapshot(ctx, sb, []string{writerFile})
		if err != nil || slices.ContainsFunc(s.Markers, func(m probe.Marker) bool { return m.Path == writerFile && !m.Missing && m.Size > 0 }) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writerShowWait bounds a cancel owner's wait for the writer's first
// line: past it the owner closes anyway, and scenario.writer_started
// judges what was there.
const writerShowWait = 10 * time.Second

// skipScenario records a case whose scenario the manifest marks
// unsupported: nothing of the harness is tried.
func (cr *caseRun) skipScenario(why string) {
	cr.ev.Status = reports.StatusSkipped
	cr.ev.SkipReason = why
	cr.ev.Checks = append(cr.ev.Checks, reports.Check{ID: "scenario.supported", Status: reports.StatusSkipped, Clause: clauseScenario, Detail: why})
	cr.r.progress("%s: skipped: %s", cr.c.id, why)
}

// borrowedState is the task state the owner of a borrowed sandbox writes
// before the launch; borrowedService is its service's command, a process
// with no children (so the owner's process table stays still).
const (
	borrowedState   = TaskDir + "/owner-service.state"
	borrowedSeconds = 1799
)

// borrow is borrowed's step before the seed (owner): it starts a task
// service of its own as the task user through an engine exec, in a
// session of its own (outside the harness's tree, as an environment
// server's services are), writes task state, and finds the service in
// the process table. A failure is the failed check setup.borrowed; the
// case stops there.
func (cr *caseRun) borrow(ctx context.Context, bx sandboxed) (sandboxed, error) {
	o := cr.owner
	state := []byte("owner task state " + randomHex(8) + "\n")
	sum := sha256.Sum256(state)
	cr.borrowed = borrowedSeen{stateBefore: hex.EncodeToString(sum[:])}
	err := provider.UploadBytes(ctx, bx.sb, state, borrowedState, 0o644, o.uid, o.gid)
	var res provider.ExecResult
	if err == nil {
		res, err = bx.sb.Exec(ctx, provider.ExecSpec{User: fmt.Sprintf("%d:%d", o.uid, o.gid),
			Argv: []string{"/bin/sh", "-c", fmt.Sprintf("setsid sleep %d </dev/null >/dev/null 2>&1 &", borrowedSeconds)}})
	}
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("start the owner's service: exit %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	var svc probe.Process
	if err == nil {
		svc, err = cr.findService(ctx, bx)
	}
	if err == nil {
		bx.ownerProcs = append(bx.ownerProcs, svc.ID())
		cr.borrowed.service = fmt.Sprintf("%d/%d %s", svc.PID, svc.StartTime, svc.Comm)
	}
	cr.check("setup.borrowed", clauseScenario, err == nil, "the owner's task service (%s, uid %d, a session of its own) and task state %s: %s",
		cr.borrowed.service, o.uid, borrowedState, errText(err, cr.r.key))
	if stopsCase(err) {
		cr.errType("provider_error")
	}
	return bx, err
}

// findService waits (bounded) for the owner's service to show in the
// probe's process table: the one new sleep of the task user.
func (cr *caseRun) findService(ctx context.Context, bx sandboxed) (probe.Process, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := snapshot(ctx, bx.sb, nil)
		if err != nil {
			return probe.Process{}, err
		}
		for _, p := range probe.Diff(bx.before, s).NewProcesses {
			if p.Comm == "sleep" && p.UID == cr.owner.uid {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			return probe.Process{}, fmt.Errorf("the owner's service is not in the process table 10 s after its start")
		}
		select {
		case <-ctx.Done():
			return probe.Process{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// scenarioVerify adds the scenario's checks after verify's own, reading
// what they need in the sandbox before teardown: the writer's file a
// second time, writerQuiet after verify's snapshot, for the stop
// scenarios; the service and the state for borrowed.
func (cr *caseRun) scenarioVerify(ctx context.Context, ms modelSide, bx sandboxed, act activationResult, v verified) error {
	sc, ev := cr.c.scenario, cr.ev
	var calls []model.Call
	if ms.srv != nil {
		calls = ms.srv.Calls()
	}
	if sc.Writer {
		w, err := cr.readWriter(ctx, bx.sb, calls, v, act)
		if err != nil {
			return err
		}
		ev.Checks = append(ev.Checks, writerChecks(w)...)
	}
	if sc.Cause != "" {
		ev.Checks = append(ev.Checks, partialTranscriptCheck(transcriptSeen{calls: calls, relayCalls: ms.rel.ModelCalls(),
			records: ev.CloseObservationRecords, eventLines: ev.RecordedEventLines, gaps: ev.CloseObservationGaps,
			roundTripped: v.proof.steps != nil && v.proof.steps.ResultCall > 0}))
	}
	if sc.Fault != model.FaultNone {
		answered := 0
		for _, c := range calls {
			if c.Fault == sc.Fault {
				answered++
			}
		}
		rec := ev.CloseReceipt
		if rec == nil {
			rec = ev.ActivationReceipt
		}
		c, modelErr := modelFaultCheck(faultSeen{fault: sc.Fault, answered: answered, rec: rec, response: ev.ResponseStatus,
			delivered: v.delivered && (v.derived == "" || v.proof.want == v.derived)})
		ev.Checks = append(ev.Checks, c)
		if modelErr {
			ev.ResponseStatus = "model_error"
		}
	}
	if sc.Owner == ownerBorrowed {
		ev.Checks = append(ev.Checks, borrowedCheck(borrowedAfter(cr.borrowed, bx.ownerProcs, v.after)))
	}
	return nil
}

// borrowedAfter is b with what verify's snapshot found after close: the
// owner's service alive (its pid and start time, not dead), the state's
// hash.
func borrowedAfter(b borrowedSeen, owner []witness.ID, a afterClose) borrowedSeen {
	m, ok := a.seen[borrowedState]
	b.stateMissing = !ok || m.Missing || m.Error != ""
	b.stateAfter = m.SHA256
	b.alive = len(owner) > 0 && slices.ContainsFunc(a.snap.Processes, func(p probe.Process) bool {
		return p.ID() == owner[0] && !p.Dead()
	})
	return b
}

// readWriter reads the writer's file after close: its size in verify's
// snapshot, its content, and its size writerQuiet later; whether the
// harness ran the model's writer call comes from the model's calls.
func (cr *caseRun) readWriter(ctx context.Context, sb provider.Sandbox, calls []model.Call, v verified, act activationResult) (writerSeen, error) {
	w := writerSeen{stopAt: act.cancelled}
	if w.stopAt.IsZero() {
		w.stopAt = receiptEnd(cr.ev)
	}
	w.state, w.whyNot = writerCalled(calls)
	m, ok := v.after.seen[writerFile]
	w.present = ok && !m.Missing && m.Error == ""
	w.atClose = m.Size
	if !w.present {
		return w, nil
	}
	got, err := provider.DownloadFile(ctx, sb, writerFile, 1<<20)
	if provider.IsProviderError(err) {
		return w, err
	}
	w.content, w.readErr = string(got), err
	select {
	case <-ctx.Done():
		return w, ctx.Err()
	case <-time.After(writerQuiet - time.Since(v.after.snap.TakenAt)):
	}
	later, err := snapshot(ctx, sb, []string{writerFile})
	if err != nil {
		return w, err
	}
	for _, lm := range later.Markers {
		if lm.Path == writerFile {
			w.then = lm.Size
		}
	}
	return w, nil
}

// receiptEnd is when the activation's receipt says the launch ended.
func receiptEnd(ev *reports.Evidence) time.Time {
	for _, rec := range []*reports.Receipt{ev.CloseReceipt, ev.ActivationReceipt} {
		if rec == nil {
			continue
		}
		if raw, ok := rec.Extra["ended_at"]; ok {
			if t, err := time.Parse(`"`+time.RFC3339Nano+`"`, string(raw)); err == nil {
				return t
			}
		}
	}
	return time.Now()
}

// writerCalled says whether the model's writer call was answered by the
// harness (a later request came, so the tool ran): writerRan; or the
// model stalled with no shell tool to ask (writerNoShell, the checks are
// skipped); or neither (writerNotReached: the harness never got as far
// before the stop, and the positive control fails). why says which.
func writerCalled(calls []model.Call) (writerState, string) {
	asked, tools, stalled := 0, []string{}, false
	for _, c := range calls {
		if c.Seq == 0 {
			continue
		}
		if c.Reply == "start_writer" && asked == 0 {
			asked = c.Seq
		}
		if len(c.ToolNames) > 0 {
			tools = c.ToolNames
		}
		stalled = stalled || c.Reply == "stall"
		if asked > 0 && c.Seq > asked {
			return writerRan, ""
		}
	}
	switch {
	case asked > 0:
		return writerNotReached, fmt.Sprintf("the model asked for it in request %d, and no request came after before the stop", asked)
	case stalled:
		return writerNoShell, fmt.Sprintf("the harness declared no shell tool the model can use (tools: %s)", strings.Join(tools, ", "))
	}
	return writerNotReached, fmt.Sprintf("the harness did not get as far as the writer before the stop (%d model request(s), none stalled)", len(slices.DeleteFunc(slices.Clone(calls), func(c model.Call) bool { return c.Seq == 0 })))
}

// writerState is how far the harness got with the writer.
type writerState int

const (
	writerNotReached writerState = iota
	writerRan
	writerNoShell
)

// stopReceipt is the activation's receipt as close recorded it, the one
// that holds a stop.
func stopReceipt(ev *reports.Evidence) *reports.Receipt {
	if ev.CloseReceipt != nil {
		return ev.CloseReceipt
	}
	return ev.ActivationReceipt
}
