package certify

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/model"
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

// stallStop is how a writer scenario's owner (timeout, cancel) stops the
// launch once the model stalled and its looks are done, whatever they
// showed: a cancel's closes the session (cancel ends the activation's
// wait; close stops the launch); a timeout's brings the launch's deadline
// forward to stallStopAfter from then (forward, `warden renew
// --deadline`), so the stop is a real deadline stop a fixed time after
// the stall whatever the harness needed to reach it, and looks once more
// nearStopLead before it. ceiling is the launch's own deadline: the last
// look's anchor when forward fails.
type stallStop struct {
	cancel  context.CancelFunc
	forward func() (time.Time, error)
	ceiling time.Time
}

// stallStopAfter is how long after the owner's looks at the stall a
// timeout's deadline falls: room for its last look (nearStopLead before
// the stop) and a look's exec on a loaded host.
const stallStopAfter = 3 * time.Second

// watchStall is the owner's watch at the stall of a writer scenario
// (timeout, cancel): once the model stalls (stalled is closed), when the
// harness ran the writer (calls, the model's record, with the stalled
// request stallSeq gives, shows a request after the one that asked for
// it), the owner's probe looks (writerSnapshot, the task user's uid) for
// the process that runs the writer's command, bounded by writerShowWait;
// once it saw it, it looks again until the looks show the writer's file
// growing at its pace (writerPace), bounded by writerGrowWait:
// scenario.writer_started's witness (writerWitness.judge). Then the
// owner stops the launch (stallStop), also when the harness never ran
// the writer; a timeout's owner looks once more a moment before the
// deadline it set, so its looks, too, span the writer's run up to the
// stop. ctx ending first (the launch ended, or the run's interrupt)
// returns without stopping.
func watchStall(ctx context.Context, stalled <-chan struct{}, stallSeq func() int, calls func() []model.Call, sb provider.Sandbox, uid int, stop stallStop) writerWitness {
	var w writerWitness
	select {
	case <-ctx.Done():
		return w
	case <-stalled:
	}
	lk := looker{ctx: ctx, sb: sb, uid: uid, w: &w}
	seen := lk.watch(stallSeq, calls)
	if ctx.Err() != nil {
		return w
	}
	if stop.cancel != nil {
		stop.cancel()
		return w
	}
	lastLook := stop.ceiling.Add(-nearStopLead)
	if at, err := stop.forward(); err == nil {
		lastLook = at.Add(-nearStopLead)
	} else if ctx.Err() == nil {
		w.forwardErr = err
	}
	if seen && time.Now().Before(lastLook) && lk.pause(time.Until(lastLook)) {
		lk.look()
	}
	return w
}

// watch takes the looks at the stall up to the writer's growth, and says
// whether the writer was seen with nothing failing (the last look is
// then worth taking).
func (lk looker) watch(stallSeq func() int, calls func() []model.Call) bool {
	seen := calls()
	// The model records a request when it is answered, and a stalled one
	// is not answered until the stall ends: without it here, the request
	// after the writer's is missing and the owner closed at once, racing
	// the writer's first line (a loaded host lost that race).
	if seq := stallSeq(); seq > 0 {
		seen = append(seen, model.Call{Seq: seq, Reply: "stall"})
	}
	if state, _ := writerCalled(seen); state != writerRan {
		return false
	}
	for deadline := time.Now().Add(writerShowWait); ; {
		if !lk.look() {
			return false
		}
		if lk.w.seen() {
			break
		}
		if !time.Now().Before(deadline) || !lk.pause(100*time.Millisecond) {
			return false
		}
	}
	for end, wait := time.Now().Add(writerGrowWait), writerSpan; len(writerPace(lk.w.sights)) > 0 && time.Now().Before(end); wait = writerSpan / 2 {
		if !lk.pause(wait) || !lk.look() {
			return false
		}
	}
	return true
}

// looker takes the owner's looks at the writer into w.
type looker struct {
	ctx context.Context
	sb  provider.Sandbox
	uid int
	w   *writerWitness
}

// look takes one look; false when it failed (the error kept, unless ctx
// ended: the launch ended or the run was interrupted, no fault of the
// harness's).
func (l looker) look() bool {
	s, err := writerSnapshot(l.ctx, l.sb, l.uid)
	if err != nil {
		if l.ctx.Err() == nil {
			l.w.err = err
		}
		return false
	}
	l.w.look(s, l.uid)
	return true
}

// pause waits d; false when ctx ended first.
func (l looker) pause(d time.Duration) bool {
	select {
	case <-l.ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// watchWriter starts the stall's watch of a writer scenario (watchStall;
// a cancel's owner closes through cancel; a timeout's brings the
// deadline forward through forward, its launch's own deadline seconds
// from now) and returns where its witness comes once ctx ends or the
// watch is done; outside a writer scenario, or with a real model, the
// witness is empty at once.
func (cr *caseRun) watchWriter(ctx context.Context, ms modelSide, sb provider.Sandbox, cancel context.CancelFunc, forward func() (time.Time, error), deadline float64) <-chan writerWitness {
	out := make(chan writerWitness, 1)
	sc := cr.c.scenario
	if !sc.Writer || ms.stall == nil || ms.srv == nil {
		out <- writerWitness{}
		return out
	}
	stop := stallStop{cancel: cancel}
	if !sc.ClosesAtStall {
		stop = stallStop{forward: forward, ceiling: time.Now().Add(time.Duration(deadline * float64(time.Second)))}
	}
	go func() {
		out <- watchStall(ctx, ms.stall.ctx.Done(), ms.stall.stalledSeq, ms.srv.Calls, sb, cr.owner.uid, stop)
	}()
	return out
}

// writerShowWait bounds the owner's look for the writer from the stall:
// past it a cancel's owner closes anyway, and scenario.writer_started
// judges what was seen.
const writerShowWait = 10 * time.Second

// skipScenario records a case whose scenario the manifest marks
// unsupported: nothing of the harness is tried.
func (cr *caseRun) skipScenario(why string) {
	cr.ev.Status = reports.StatusSkipped
	cr.ev.SkipReason = why
	cr.ev.Checks = append(cr.ev.Checks, reports.Check{ID: "scenario.supported", Status: reports.StatusSkipped, Clause: clauseScenario, Detail: why})
	cr.r.progress("%s: skipped: %s", cr.c.id, why)
}

// scenarioVerify adds the scenario's checks after verify's own (its verify
// step), reading what they need in the sandbox before teardown.
func (cr *caseRun) scenarioVerify(ctx context.Context, ms modelSide, bx sandboxed, act activationResult, v verified) error {
	if cr.c.scenario.verify == nil {
		return nil
	}
	return cr.c.scenario.verify(cr, ctx, scenarioInput{ms: ms, bx: bx, act: act, v: v})
}

// modelCalls is the scripted model's own record (nil for a real model).
func (ms modelSide) modelCalls() []model.Call {
	if ms.srv == nil {
		return nil
	}
	return ms.srv.Calls()
}

// writerReads are what the writer family's checks read after close: the
// writer's file.
func writerReads(int) ([]string, []int) { return []string{writerFile}, nil }

// verifyWriterStop is the writer family's verify (timeout, cancel): the
// writer's file a second time, writerQuiet after verify's snapshot
// (writerChecks), then scenario.partial_transcript.
func verifyWriterStop(cr *caseRun, ctx context.Context, in scenarioInput) error {
	ev, calls := cr.ev, in.ms.modelCalls()
	w, err := cr.readWriter(ctx, in.bx.sb, calls, in.v, in.act)
	if err != nil {
		return err
	}
	ev.Checks = append(ev.Checks, writerChecks(w)...)
	ev.Checks = append(ev.Checks, partialTranscriptCheck(transcriptSeen{calls: calls, relayCalls: in.ms.rel.ModelCalls(),
		records: ev.CloseObservationRecords, eventLines: ev.RecordedEventLines, gaps: ev.CloseObservationGaps,
		roundTripped: in.v.proof.steps != nil && in.v.proof.steps.ResultCall > 0}))
	return nil
}

// verifyModelFault is the fault family's verify (model-429, model-400):
// scenario.model_fault, and a case whose harness exited on the fault
// filed as a model error.
func verifyModelFault(cr *caseRun, _ context.Context, in scenarioInput) error {
	sc, ev, v := cr.c.scenario, cr.ev, in.v
	answered := 0
	for _, c := range in.ms.modelCalls() {
		if c.Fault == sc.Fault {
			answered++
		}
	}
	rec := ev.CloseReceipt
	if rec == nil {
		rec = ev.ActivationReceipt
	}
	writeCall, chain := 0, v.proof.broken
	if v.proof.steps != nil {
		writeCall = v.proof.steps.WriteCall
	}
	if chain == "" && (v.proof.steps == nil || v.proof.steps.ResultCall == 0) {
		chain = "no request carried the challenge back in the result of a tool call the model asked for"
	}
	c, modelErr := modelFaultCheck(faultSeen{fault: sc.Fault, answered: answered, calls: in.ms.rel.Calls(), rec: rec, response: ev.ResponseStatus,
		deliverable: v.delivered && (v.derived == "" || v.proof.want == v.derived), said: cr.harnessSaid(),
		writeCall: writeCall, chain: chain, retryAfter: faultRetryAfter * time.Second})
	ev.Checks = append(ev.Checks, c)
	if modelErr {
		ev.ResponseStatus = "model_error"
	}
	return nil
}

// harnessSaid is where a fault case looks for the harness's own report
// of the fault, all of it from what the case captured and bounded: its
// result's failure message (the adapter's result rule, read by
// readCaptures) and the last tailRead bytes of the activation's stderr,
// stdout and events (regular files only, never through a link: tailOf).
// A harness that reports a model error says so last, so the tails hold
// it.
func (cr *caseRun) harnessSaid() []said {
	out := []said{{"result", truncate(cr.resultFailure, tailRead)}}
	run := filepath.Join(cr.dir, "capture", "run", activation)
	for _, f := range []struct{ where, name string }{{"stderr", "stderr.log"}, {"stdout", "stdout.log"}, {"events", "events.jsonl"}} {
		if b, err := tailOf(filepath.Join(run, f.name)); err == nil {
			out = append(out, said{f.where, string(b)})
		}
	}
	return out
}

// readWriter reads the writer's file after close: its size in verify's
// snapshot, its content, and its size writerQuiet later (that look's
// time is when the content had been read); whether the harness ran the
// model's writer call comes from the model's calls. The looks judged
// are a cancel's all (they precede its owner's close), a timeout's
// those lookMargin or more before its stop (the receipt's time, the
// sandbox's clock, as the looks' are).
func (cr *caseRun) readWriter(ctx context.Context, sb provider.Sandbox, calls []model.Call, v verified, act activationResult) (writerSeen, error) {
	w := writerSeen{stopAt: act.cancelled, uid: cr.owner.uid, witness: act.writer}
	if w.stopAt.IsZero() {
		w.stopAt = stopBegan(cr.ev)
		w.lookCutoff = w.stopAt.Add(-lookMargin)
	}
	w.reached, w.reachedErr = reachedBy(stopReceipt(cr.ev))
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
	w.thenGone, w.readAt = true, later.TakenAt
	for _, lm := range later.Markers {
		if lm.Path == writerFile {
			w.then, w.thenGone = lm.Size, lm.Missing
		}
	}
	return w, nil
}

// stopBegan is when the activation's stop began by its receipt: the
// deadline (started_at plus the deadline in force: the receipt's
// deadline_seconds, brought forward at the stall, else the launch
// deadline) when it came before the launch ended, else ended_at (a
// harness that stops after its TERM's grace ends later than its writer,
// which the TERM ended).
func stopBegan(ev *reports.Evidence) time.Time {
	field := func(rec *reports.Receipt, name string) (time.Time, bool) {
		raw, ok := rec.Extra[name]
		if !ok {
			return time.Time{}, false
		}
		t, err := time.Parse(`"`+time.RFC3339Nano+`"`, string(raw))
		return t, err == nil
	}
	for _, rec := range []*reports.Receipt{ev.CloseReceipt, ev.ActivationReceipt} {
		if rec == nil {
			continue
		}
		end, ok := field(rec, "ended_at")
		if !ok {
			continue
		}
		deadline := ev.LaunchDeadlineSeconds
		if in, ok := rec.DeadlineSeconds(); ok {
			deadline = in
		}
		if start, ok := field(rec, "started_at"); ok && deadline > 0 {
			if dl := start.Add(time.Duration(deadline * float64(time.Second))); dl.Before(end) {
				return dl
			}
		}
		return end
	}
	return time.Now()
}

// writerCalled says whether the model's writer call was answered by the
// harness (a later request came, so the tool ran): writerRan; or the
// model stalled without asking for it because the harness declared no
// shell tool it can call (writerNoShell, the model's own note on the
// stall, model.StallNoShell: the checks are skipped); or neither
// (writerNotReached: the harness never got as far before the stop, and
// the positive control fails). why says which. Every fact here is the
// model's own record of what it answered, never the harness's history.
func writerCalled(calls []model.Call) (writerState, string) {
	asked, tools, noShell := 0, []string{}, false
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
		noShell = noShell || c.Reply == "stall" && strings.HasPrefix(c.Error, model.StallNoShell)
		if asked > 0 && c.Seq > asked {
			return writerRan, ""
		}
	}
	switch {
	case asked > 0:
		return writerNotReached, fmt.Sprintf("the model asked for it in request %d, and no request came after before the stop", asked)
	case noShell:
		return writerNoShell, fmt.Sprintf("the model stalled without asking for it: none of the harness's tools is a shell it can call (tools: %s)", strings.Join(tools, ", "))
	}
	return writerNotReached, fmt.Sprintf("the harness did not get as far as the writer before the stop (%d model request(s), the model never asked for it)", len(slices.DeleteFunc(slices.Clone(calls), func(c model.Call) bool { return c.Seq == 0 })))
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
