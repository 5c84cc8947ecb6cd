package certify

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/capture"
	"github.com/sandproof/sandproof/runner/host/relay"
	"github.com/sandproof/sandproof/runner/model"
	"github.com/sandproof/sandproof/runner/warden/receipt"
	"github.com/sandproof/sandproof/runner/witness"
)

// The verdict rules of the scenarios other than the challenge (contract
// §7.6 scenarios, docs/certify.md scenarios), each a function of the
// values the stages read, so each is a unit test of its own.

// writerFile is where timeout's and cancel's writer appends, under the
// task dir (the fs diff allows it; the owner reads it after close).
const writerFile = TaskDir + "/sandproof-writer.log"

// writerQuiet is how long after close the owner waits before it reads
// the writer's file again: ten of the writer's periods, so a writer that
// survived the stop has grown it.
const writerQuiet = time.Second

// scenarioCheck is a check of the scenarios' clause, passed or failed.
func scenarioCheck(id string, ok bool, detail string, args ...any) reports.Check {
	c := newCheck(id, clauseScenario, ok, detail, args...)
	return c
}

func skippedCheck(id, why string) reports.Check {
	return reports.Check{ID: id, Status: reports.StatusSkipped, Clause: clauseScenario, Detail: why}
}

// stopCheck is scenario.stop: the activation's receipt (close's, which
// holds the stop) has the cause the scenario expects, timed_out only for
// the deadline, and its cleanup confirmed. Its detail says where a
// deadline stop's deadline fell (brought forward at the stall, or the
// launch's own, and why: forwardErr).
func stopCheck(sc Scenario, rec *reports.Receipt, launched float64, forwardErr error) reports.Check {
	const id = "scenario.stop"
	if rec == nil {
		return scenarioCheck(id, false, "want the activation's receipt with cause %s, confirmed: the stop left no receipt", sc.Cause)
	}
	wantTimedOut := !sc.ClosesAtStall
	ok := rec.Cause == sc.Cause && rec.TimedOut == wantTimedOut && rec.CleanupConfirmed
	c := scenarioCheck(id, ok, "activation receipt: cause %q (want %q), timed_out %t (want %t), cleanup_confirmed %t, return_code %s",
		rec.Cause, sc.Cause, rec.TimedOut, wantTimedOut, rec.CleanupConfirmed, intText(rec.ReturnCode))
	if sc.ClosesAtStall || rec.Cause != receipt.CauseDeadline {
		return c
	}
	in, known := rec.DeadlineSeconds()
	switch {
	case !known:
		c.Detail += "; the receipt has no deadline_seconds (a warden older than the deadline brought forward)"
	case launched > 0 && in < launched:
		c.Detail += fmt.Sprintf("; its deadline brought forward at the stall to %s after the launch (the launch's ceiling %s)", reports.FormatSeconds(in), reports.FormatSeconds(launched))
	default:
		c.Detail += fmt.Sprintf("; the launch's own deadline, %s", reports.FormatSeconds(in))
	}
	if forwardErr != nil {
		c.Detail += "; the owner could not bring it forward at the stall: " + truncate(forwardErr.Error(), 200)
	}
	return c
}

// writerSeen is what the owner read of the writer: whether the model's
// writer call was answered by the harness (a request carried its
// result), why not, the witnesses (what the probe saw from the stall on,
// the stop's receipt), the file as read after close, and its size then
// and writerQuiet later.
type writerSeen struct {
	state  writerState
	whyNot string // unless writerRan: why not
	uid    int    // the task user's, as whom the writer runs
	// witness is what the owner's probe saw from the stall on; reached
	// is what the stop's receipt says it reached (reachedErr: why it
	// could not be read).
	witness    writerWitness
	reached    []witness.Member
	reachedErr error
	content    string
	readErr    error
	atClose    int64
	then       int64
	present    bool // the file was there at close
	thenGone   bool // the file was not there writerQuiet after close
	// stopAt is when the stop began: the deadline (timeout) or the
	// owner's close (cancel).
	stopAt time.Time
	// lookCutoff: the owner's looks from it on are not judged (zero:
	// every look is; writerWitness.judge).
	lookCutoff time.Time
	// readAt is the sandbox's time of the owner's look after its read of
	// the file: no line of it is dated later.
	readAt time.Time
}

// writerChecks are scenario.writer_started, the positive control, and
// scenario.writer_stopped. writer_started reads witnesses the harness
// cannot write (writer_witness.go): the owner's probe saw, from the
// stall on, a live process of the task user running the writer's
// command; its looks up to the stop saw it running the image's sh, not
// stopped, untraced, and its file (the task user's, writable) growing at
// the writer's pace, never dated after the look (writerWitness.judge);
// the stop's receipt lists that process (pid and start time) as reached,
// so it was of the harness's tree and alive until the stop; and its file
// after close keeps the writer's cadence up to the stop. The file alone,
// which the harness can write, never passes it. writer_stopped: the file's size writerQuiet
// after close equals its size at close (grown: the writer survived;
// shrunk or gone: the file was touched after the stop; a survivor is
// also a new process to verify.no_new_processes). A harness whose model
// call never reached a shell tool has both skipped, with the reason.
func writerChecks(w writerSeen) []reports.Check {
	switch w.state {
	case writerNoShell:
		why := "the writer was never started: " + w.whyNot
		return []reports.Check{skippedCheck("scenario.writer_started", why), skippedCheck("scenario.writer_stopped", why)}
	case writerNotReached:
		why := "the writer was never started, so the stop of one is not shown: " + w.whyNot
		return []reports.Check{scenarioCheck("scenario.writer_started", false, "%s", why), scenarioCheck("scenario.writer_stopped", false, "%s", why)}
	}
	_, inReceipt := witness.Find(w.reached, w.witness.proc.ID())
	cad := writerCadence(w.content, w.stopAt, w.readAt)
	looks := w.witness.judge(w.uid, w.lookCutoff)
	started := w.present && w.readErr == nil && w.witness.seen() && inReceipt && looks.ok && cad.ok(w.stopAt)
	detail := w.witness.text(w.uid)
	switch {
	case !w.witness.seen():
	case w.reachedErr != nil:
		detail += "; the stop's receipt: " + w.reachedErr.Error()
	case !inReceipt:
		detail += fmt.Sprintf("; the stop's receipt does not list it as reached (%d reached): it was not of the harness's tree, or gone before the stop", len(w.reached))
	default:
		detail += "; the stop's receipt lists it as reached"
	}
	if w.witness.seen() {
		detail += "; " + looks.text()
	}
	switch {
	case !w.present:
		detail += "; " + writerFile + " not there after close"
	case w.readErr != nil:
		detail += fmt.Sprintf("; %s: %d bytes at close, read: %s", writerFile, w.atClose, w.readErr.Error())
	default:
		detail += fmt.Sprintf("; %s: %d bytes at close, %s; the stop at %s", writerFile, w.atClose, cad.text(w.stopAt), w.stopAt.UTC().Format(time.RFC3339Nano))
	}
	stopped := started && !w.thenGone && w.atClose == w.then
	after := fmt.Sprintf("%d bytes", w.then)
	switch {
	case w.thenGone:
		after = "gone"
	case w.then > w.atClose:
		after += ": the detached writer survived the stop"
	case w.then < w.atClose:
		after += ": the file shrank after the stop"
	}
	return []reports.Check{
		scenarioCheck("scenario.writer_started", started, "%s", detail),
		scenarioCheck("scenario.writer_stopped", stopped, "%s: %d bytes at close, %s %s later", writerFile, w.atClose, after, writerQuiet),
	}
}

// transcriptSeen is what the case kept of a harness stopped mid-task: the
// model's calls (the stalled one among them), the tool results the relay
// recorded, and what reading the captures gave.
type transcriptSeen struct {
	calls        []model.Call
	relayCalls   int
	records      int      // result records the captures gave (events, rows)
	eventLines   int      // lines in the captured events
	gaps         []string // the close observations' gaps
	roundTripped bool     // a request carried the challenge back
}

// partialTranscriptCheck is scenario.partial_transcript: the transcript
// up to the stall is kept: the relay recorded every call the model
// answered, the stalled one last, the challenge came back in one, and the
// harness's captures were read (events or rows, no result gap).
func partialTranscriptCheck(t transcriptSeen) reports.Check {
	stalledAt := 0
	for _, c := range t.calls {
		if c.Seq > 0 && c.Reply == "stall" {
			stalledAt = c.Seq
		}
	}
	modelCalls := 0
	for _, c := range t.calls {
		if c.Seq > 0 {
			modelCalls++
		}
	}
	readOK := !strings.Contains(strings.Join(t.gaps, ","), capture.GapResult) && (t.records > 0 || t.eventLines > 0)
	ok := stalledAt > 0 && t.relayCalls >= modelCalls && t.roundTripped && readOK
	return scenarioCheck("scenario.partial_transcript", ok,
		"model stalled at request %d of %d; relay recorded %d call(s); challenge carried back: %t; captures read: %d record(s), %d event line(s), gaps %v",
		stalledAt, modelCalls, t.relayCalls, t.roundTripped, t.records, t.eventLines, t.gaps)
}

// faultSeen is what a model-fault case (model-429, model-400) ended with:
// the model's count of the fault answered, the relay's record of every
// request of the case, the activation's receipt, and what the harness
// itself said.
type faultSeen struct {
	fault       model.Fault
	answered    int          // requests the model answered with the fault
	calls       []relay.Call // the relay's record, in request order
	rec         *reports.Receipt
	response    string // response_status
	deliverable bool   // verify.deliverable's verdict, with the derived token
	// writeCall is the relay's number of the request whose answer asked
	// for the deliverable's write (model_steps.write_call), 0 for none.
	writeCall int
	// chain is "" when the challenge came back in the result of a tool
	// call the model asked for, every result holding it answering one
	// (the loop proof's chain, contract §7.4), else why not.
	chain string
	// retryAfter is the Retry-After the 429 carried.
	retryAfter time.Duration
	// said is where the harness reports, each read bounded from what
	// the case captured (harnessSaid): its result's failure message and
	// the tails of its stderr, stdout and events.
	said []said
}

// said is one place the harness reports in and the text read there.
type said struct{ where, text string }

// faultStatus is the HTTP status the scripted model answers each fault
// with: the relay's record finds the fault's answer by it.
var faultStatus = map[model.Fault]int{model.Fault429: 429, model.Fault400: 400}

// faultTerms are what a harness's own report of each fault says: the
// rate limit (the 429's reason phrase, the OpenAI error's code and
// wording, Claude Code's "Rate limit reached"), the context limit (the
// 400's code and wording, Codex's "context window", OpenCode's
// ContextOverflowError, OpenClaw's stored message, Gemini's "input token
// count ... exceeds the maximum number of tokens"). A bare status number
// is not enough: "400" is in too much output that has nothing to do with
// the fault.
var faultTerms = map[model.Fault]*regexp.Regexp{
	model.Fault429: regexp.MustCompile(`(?i)rate[ _-]?limit|too many requests`),
	model.Fault400: regexp.MustCompile(`(?i)context[ _-]?(length|window|limit|overflow)|maximum context|prompt is too long|too many tokens|exceeds the maximum number of tokens`),
}

// faultNames say what each fault is, for details.
var faultNames = map[model.Fault]string{model.Fault429: "rate limit", model.Fault400: "context limit"}

// faultTrail is what the relay saw of a fault case: the request the fault
// answered, the answer that reached the harness last, the requests after
// the fault's, and the first of those the model answered with a step of
// the task. Requests are the relay's numbers (Seq); 0 is none.
type faultTrail struct {
	// seq is the fault's answer: the first forwarded request the scripted
	// model answered with the fault (relay.Call.Fault, its mark), never
	// a 400 it gave a request it could not read, which a harness can ask
	// for at will.
	seq    int
	last   int // the last answer delivered whole (relay.Call.Delivered), by when, side answers left out
	later  int // forwarded requests after the fault's
	normal int // the first of them answered with a step of the task, delivered or not
}

// sideAnswer is an answer that gave the harness no work: a 2xx that asked
// for no tool (a title, a summary, the model's text, "done"). A harness
// that met the fault may still ask for those (OpenCode titles and
// compacts after a 400); they do not show it went on with the task. An
// answer that asked for a tool call does, and any other status is an
// answer the harness may have ended on.
func sideAnswer(c relay.Call) bool { return c.Status/100 == 2 && len(c.ToolCalls) == 0 }

// trailOf reads the relay's record of a fault case. A request the relay
// answered itself (refused) is no answer of the model's and no retry. A
// request is after the fault's when it was numbered after it or received
// whole after the fault's answer was written (afterFault): a request
// numbered at its headers before the fault's can be finished after it.
func trailOf(f model.Fault, calls []relay.Call) faultTrail {
	var t faultTrail
	var fc relay.Call
	for _, c := range calls {
		if c.Seq > 0 && c.Refused == "" && c.Fault == string(f) {
			t.seq, fc = c.Seq, c
			break
		}
	}
	var lastAt time.Time
	for _, c := range calls {
		if c.Seq == 0 || c.Refused != "" {
			continue
		}
		if t.seq > 0 && c.Seq != t.seq && afterFault(fc, c) {
			t.later++
			if t.normal == 0 && c.Status/100 == 2 && !sideAnswer(c) {
				t.normal = c.Seq
			}
		}
		// An answer the harness never had whole is not one it read.
		if !c.Delivered || sideAnswer(c) {
			continue
		}
		if !c.DeliveredAt.Before(lastAt) {
			t.last, lastAt = c.Seq, c.DeliveredAt
		}
	}
	return t
}

// afterFault says request c came after the fault's request fc: numbered
// after it, or received whole after the fault's answer was written to the
// harness (the causal order, relay.Call.WrittenAt).
func afterFault(fc, c relay.Call) bool {
	return c.Seq > fc.Seq || (!fc.WrittenAt.IsZero() && fc.WrittenAt.Before(c.ReceivedAt))
}

// modelFaultCheck is scenario.model_fault (contract §7.6 scenarios): the
// harness met the fault and finished the challenge (exit 0, the
// deliverable holding the token the model derived from the challenge,
// through the write call that came after it, the challenge having come
// back through the model's own tool call; through the faulted
// conversation, finishedThrough), or exited non-zero because of the
// fault (exitedOnFault; the 400's turn one where the challenge came back
// through the model's tool call, as the 400 is on it), which
// the receipt carries and the case files as a model error; never exit 0
// without the deliverable, never a hang to the deadline, and the cleanup
// confirmed either way.
func modelFaultCheck(f faultSeen) (reports.Check, bool) {
	const id = "scenario.model_fault"
	rec := f.rec
	t := trailOf(f.fault, f.calls)
	var ok, modelErr bool
	var why string
	switch {
	case f.answered == 0:
		why = fmt.Sprintf("the %s was never answered: no request carried %s", f.fault, faultTargets[f.fault])
	case rec == nil:
		why = "no activation receipt"
	case rec.TimedOut:
		why = "the harness hung until the deadline"
	case !rec.CleanupConfirmed:
		why = "cleanup not confirmed"
	case rec.ReturnCode == nil:
		why = "no return code"
	case f.fault == model.Fault400 && f.chain != "":
		why = "the 400 answered a turn whose challenge came back in no tool call the model asked for (" + f.chain + "): the harness never ran the turn the fault is on"
	case *rec.ReturnCode == 0 && f.deliverable && f.chain != "":
		why = "exit 0 with the deliverable, yet the challenge did not come back through a tool call the model asked for (" + f.chain + "): not the challenge finished"
	case *rec.ReturnCode == 0 && f.deliverable:
		// Its own result may still report the fault it got past (Pi's
		// events keep the 400's stopReason error before it compacted).
		ok, why = finishedThrough(f, t)
	case *rec.ReturnCode == 0:
		why = fmt.Sprintf("exit 0 without finishing (deliverable %t, response_status %s): a made-up success", f.deliverable, f.response)
	default:
		ok, why = exitedOnFault(f, t)
		modelErr = ok
	}
	rc, cause := "null", ""
	if rec != nil {
		rc, cause = intText(rec.ReturnCode), rec.Cause
	}
	return scenarioCheck(id, ok, "%s answered %d request(s); relay: the %s on request %d, last answer delivered: request %d, %d request(s) after; receipt cause %q, return_code %s; deliverable %t, response_status %s: %s",
		f.fault, f.answered, f.fault, t.seq, t.last, t.later, cause, rc, f.deliverable, f.response, why), modelErr
}

// faultTargets say which request each fault answers (the scenario's
// model.Script.On), for details.
var faultTargets = map[model.Fault]string{
	model.Fault429: "the task (the harness's tools and the challenge prompt)",
	model.Fault400: "the challenge's tool result",
}

// faultRetryAfter is the Retry-After, in seconds, of model-429's 429 (the
// scripted model's model.Options.RetryAfter; scenario.model_fault times
// the retry against it).
const faultRetryAfter = 1

// retryTolerance is how much earlier than its Retry-After a retry may
// come after the 429 reached the harness. The relay sees a retry no
// earlier than the harness sent it, and a harness cannot have waited
// before the 429 reached it, so a slow host only makes the delay seen
// longer; the tolerance covers a harness that counts its wait from the
// answer's headers.
const retryTolerance = 250 * time.Millisecond

// continues is the one definition of a request that goes on with another
// one's conversation (scenario.model_fault's retry of the 429's, and the
// write through it): l was sent once f's answer had reached the harness whole
// (answeredBefore), and l's history begins with f's whole history turn for
// turn (extends), so l is f sent again or a later step of it.
func continues(f, l relay.Call) bool {
	return answeredBefore(f, l) && l.Seq != f.Seq && extends(f, l)
}

// answeredBefore says whether f's answer had reached the harness whole
// (delivered) before l's request was received whole: the relay began
// writing its last bytes (WrittenAt) before l's body was complete
// (ReceivedAt), the causal order the loop proof uses too (contract
// §7.4). DeliveredAt is not the order: it is taken after the upstream's
// end and a check of the connection, so a quick harness's next request
// can be complete before it.
func answeredBefore(f, l relay.Call) bool {
	return f.Delivered && !f.WrittenAt.IsZero() && !l.ReceivedAt.IsZero() && f.WrittenAt.Before(l.ReceivedAt)
}

// writtenBefore says f's answer was written to the harness whole before
// l was received whole (relay.Call.WrittenAt, ReceivedAt): l can follow
// from f's answer. Unlike answeredBefore it asks nothing of the delivery
// check.
func writtenBefore(f, l relay.Call) bool {
	return !f.WrittenAt.IsZero() && !l.ReceivedAt.IsZero() && f.WrittenAt.Before(l.ReceivedAt)
}

// extends says whether l's history (relay.Call.History) begins with every
// turn of f's, in order (sameTurn). f's history must be there and whole
// (no turn past the record's cap).
func extends(f, l relay.Call) bool {
	if len(f.History) == 0 || f.HistoryDropped > 0 || len(l.History) < len(f.History) {
		return false
	}
	for i, d := range f.History {
		if !sameTurn(d, l.History[i]) {
			return false
		}
	}
	return true
}

// sameTurn says whether two turn digests are the same turn: the same
// kind, and the same digest unless both are user turns. A harness may
// reword a user turn it sends again (OpenClaw stamps the minute before
// the prompt and wraps a prompt it re-sends in "[Queued user message ...]
// Continue the current task ..."); the model's turns and the tool results
// answering them it sends back as they were.
func sameTurn(a, b string) bool {
	return a != "" && b != "" && a[0] == b[0] && (a[0] == 'u' || a == b)
}

// compacts says whether l goes on with f's conversation with its context
// made shorter or rewritten, what a context-limit answer asks: sent once
// f's answer had reached the harness whole, l keeps something of f's
// conversation (one of f's turns, word for word) and is not f's history
// sent again or gone on (extends): a turn of f's was dropped, cut or
// summarised away, or a summary put before them (Pi keeps the turns
// behind a summary of them).
func compacts(f, l relay.Call) bool {
	if !answeredBefore(f, l) || l.Seq == f.Seq || len(f.History) == 0 || extends(f, l) {
		return false
	}
	return slices.ContainsFunc(f.History, func(d string) bool { return slices.Contains(l.History, d) })
}

// finishedThrough judges an exit 0 with the deliverable: it passes only
// when the challenge was finished through the conversation the fault
// answered, as the fault asks. After the 429: the deliverable's write was
// asked in a request that continues the faulted one, and the first
// request that did (the retry) came no earlier than the 429's Retry-After
// (less retryTolerance) after the 429 reached the harness. After the
// 400: a later request compacts the faulted one's conversation, and the
// write was asked in that request or one that begins with its turns. A harness
// that left the faulted conversation for another, or sent the 400's
// request again as it was, finished nothing the fault asked of it.
func finishedThrough(f faultSeen, t faultTrail) (bool, string) {
	bySeq := map[int]relay.Call{}
	var order []relay.Call
	for _, c := range f.calls {
		if c.Seq > 0 && c.Refused == "" {
			bySeq[c.Seq] = c
			order = append(order, c)
		}
	}
	slices.SortStableFunc(order, func(a, b relay.Call) int { return a.Seq - b.Seq })
	fc, w := bySeq[t.seq], bySeq[f.writeCall]
	switch {
	case f.writeCall == 0:
		return false, "exit 0 with the deliverable, yet no answer the relay recorded asked for its write"
	case f.fault == model.Fault429:
		return retriedThrough(f, fc, w, order)
	}
	// The write's request is the compacted one or its conversation gone
	// on, received whole after the compacted request's answer was
	// written (writtenBefore: the causal order, not the delivery stamp,
	// which a quick harness's next step can beat): a throw-away
	// "compaction" sent after the write came through the 400's
	// conversation sent again is no compaction of the write's.
	for _, l := range order {
		if compacts(fc, l) && (l.Seq == w.Seq || extends(l, w) && writtenBefore(l, w)) {
			return true, fmt.Sprintf("the harness went on with the 400's conversation compacted (request %d: %d turn(s), the 400's %d) and finished the challenge through it (the write asked in request %d)",
				l.Seq, len(l.History), len(fc.History), w.Seq)
		}
	}
	if ok, why := resumedThrough(fc, w, order); ok {
		return true, why
	}
	return false, fmt.Sprintf("exit 0 with the deliverable, yet the write (asked in request %d) did not come through the 400's conversation made shorter or compacted: the harness sent it again as it was, or left it for another", w.Seq)
}

// resumedThrough is finishedThrough's compaction by a summary (Claude
// Code, OpenCode: the summary replaces the turns, which the resumed
// conversation keeps none of, word for word): once the 400 had reached
// the harness, it asked the model for a summary (l, the model's summary
// answer, relay.Call.Summary), went on from that summary (r: the model
// found its summary in r, relay.Call.Resumes, received whole after l's
// answer was written; not the 400's conversation sent again), and the
// write was asked in r or in a request going on with r, received whole
// after r's answer was written. The marks are the scripted model's,
// which the relay takes off its answers: a harness can neither set nor
// see them.
func resumedThrough(fc, w relay.Call, order []relay.Call) (bool, string) {
	for _, l := range order {
		if l.Summary == "" || l.Seq == fc.Seq || !answeredBefore(fc, l) {
			continue
		}
		for _, r := range order {
			if r.Resumes != l.Summary || !writtenBefore(l, r) || extends(fc, r) {
				continue
			}
			if r.Seq == w.Seq || extends(r, w) && writtenBefore(r, w) {
				return true, fmt.Sprintf("the harness compacted the 400's conversation into the model's summary (request %d) and finished the challenge through the conversation resumed from it (request %d; the write asked in request %d)",
					l.Seq, r.Seq, w.Seq)
			}
		}
	}
	return false, ""
}

// retriedThrough is finishedThrough after a 429: the retry, its delay,
// and the write through the same conversation.
func retriedThrough(f faultSeen, fc, w relay.Call, order []relay.Call) (bool, string) {
	if !continues(fc, w) {
		return false, fmt.Sprintf("exit 0 with the deliverable, yet the write (asked in request %d) does not continue the conversation the 429 answered (request %d): a rate limit passes only with a retry", w.Seq, fc.Seq)
	}
	// The retry is the first request received whole after the 429's that
	// carries its conversation, whether or not the 429 had reached the
	// harness (a copy sent at once is no retry of it). The order is when
	// each was whole (ReceivedAt), not its headers: a request opened
	// before the 429's and finished at once after it is a retry that did
	// not wait. A side request the model gave no work (sideAnswer: Kilo's
	// title request, which repeats the prompt, sent 2 ms after the 429's
	// on a loaded host) is no copy of the conversation: the harness did
	// not go on with the task through it.
	var retry relay.Call
	for _, l := range order {
		if l.Seq != fc.Seq && !sideAnswer(l) && !l.ReceivedAt.Before(fc.ReceivedAt) && extends(fc, l) && (retry.Seq == 0 || l.ReceivedAt.Before(retry.ReceivedAt)) {
			retry = l
		}
	}
	// From when the 429's last bytes were written to when the retry was
	// whole: the harness cannot have started its wait before it had the
	// answer whole, and the model acts on a request only once it is.
	delay := retry.ReceivedAt.Sub(fc.WrittenAt)
	switch {
	case delay < 0:
		return false, fmt.Sprintf("request %d, the 429's sent again, came %s before the 429 reached the harness, before its Retry-After (%s): no retry of it", retry.Seq, (-delay).Round(time.Millisecond), f.retryAfter)
	case delay < f.retryAfter-retryTolerance:
		return false, fmt.Sprintf("retried in request %d %s after the 429 reached it, before its Retry-After (%s): the rate limit was not honoured", retry.Seq, delay.Round(time.Millisecond), f.retryAfter)
	}
	// Whatever its history, a request the model gave work, received whole
	// after the 429's and before its Retry-After had passed, is the rate
	// limit not honoured: a harness controls its history's shape (a turn
	// put before the prompt, red team rt39), not that the model worked,
	// and a copy sent before the 429 reached it is no wait for it either.
	for _, l := range order {
		if l.Seq == fc.Seq || sideAnswer(l) || l.ReceivedAt.Before(fc.ReceivedAt) {
			continue
		}
		switch d := l.ReceivedAt.Sub(fc.WrittenAt); {
		case d < 0:
			return false, fmt.Sprintf("request %d, given work by the model, came %s before the 429 reached the harness: the task was sent again without waiting for the 429's Retry-After (%s)",
				l.Seq, (-d).Round(time.Millisecond), f.retryAfter)
		case d < f.retryAfter-retryTolerance:
			return false, fmt.Sprintf("request %d, given work by the model %s after the 429 reached the harness, came before its Retry-After (%s): the rate limit was not honoured",
				l.Seq, d.Round(time.Millisecond), f.retryAfter)
		}
	}
	return true, fmt.Sprintf("the harness retried the 429's request (request %d, %s after the 429 reached it, Retry-After %s) and finished the challenge through that conversation (the write asked in request %d)",
		retry.Seq, delay.Round(time.Millisecond), f.retryAfter, w.Seq)
}

// exitedOnFault judges a non-zero exit: a model error only when the exit
// was the fault's doing, as far as what happened shows it. The fault's
// answer reached the harness whole and was the last answer it got (the
// relay's record; side answers, which gave it no work, left out), no
// request after it was answered normally, with a step of the task (one
// that was means the harness went on past the fault, whether it read
// that answer or crashed first), and the harness itself reported the
// fault (faultTerms, in said): a harness that exits whatever the model
// answers is a crash, not a model error.
func exitedOnFault(f faultSeen, t faultTrail) (bool, string) {
	rc := *f.rec.ReturnCode
	switch {
	case t.seq == 0:
		return false, fmt.Sprintf("exited %d, and the relay recorded no %d answer of the scripted %s: not a model error", rc, faultStatus[f.fault], faultNames[f.fault])
	case t.normal > 0:
		return false, fmt.Sprintf("exited %d after request %d, later than the %s's (request %d), was answered normally (a tool call): not a model error", rc, t.normal, f.fault, t.seq)
	case t.last != t.seq:
		return false, fmt.Sprintf("exited %d, the last answer delivered to it whole being %s, not the %s's to request %d: not a model error", rc, lastText(t.last), f.fault, t.seq)
	}
	where, term := faultNamed(f.fault, f.said)
	if where == "" {
		return false, fmt.Sprintf("exited %d, the %s's answer the last that asked anything of it, and said nothing of the %s itself (read: its %s): a crash, not a model error",
			rc, f.fault, faultNames[f.fault], saidPlaces(f.said))
	}
	return true, fmt.Sprintf("exited %d, the %s's answer the last that asked anything of it, reporting it (%q in its %s): filed as a model error", rc, f.fault, term, where)
}

func lastText(seq int) string {
	if seq == 0 {
		return "none"
	}
	return fmt.Sprintf("request %d's", seq)
}

// faultNamed is the first place the harness named the fault, and the
// words it used ("" when it did not).
func faultNamed(f model.Fault, ss []said) (where, term string) {
	re := faultTerms[f]
	if re == nil {
		return "", ""
	}
	for _, s := range ss {
		if m := re.FindString(s.text); m != "" {
			return s.where, strings.ToLower(m)
		}
	}
	return "", ""
}

// saidPlaces lists the places read, for a detail.
func saidPlaces(ss []said) string {
	var names []string
	for _, s := range ss {
		names = append(names, s.where)
	}
	if len(names) == 0 {
		return "nothing captured"
	}
	return strings.Join(names, ", ")
}

func short(s string) string { return truncate(s, 12) }
