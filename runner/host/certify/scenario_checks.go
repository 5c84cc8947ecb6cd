package certify

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/capture"
	"github.com/sandproof/sandproof/runner/model"
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
// the deadline, and its cleanup confirmed.
func stopCheck(sc Scenario, rec *reports.Receipt) reports.Check {
	const id = "scenario.stop"
	if rec == nil {
		return scenarioCheck(id, false, "want the activation's receipt with cause %s, confirmed: the stop left no receipt", sc.Cause)
	}
	wantTimedOut := sc.Owner != ownerCancel
	ok := rec.Cause == sc.Cause && rec.TimedOut == wantTimedOut && rec.CleanupConfirmed
	return scenarioCheck(id, ok, "activation receipt: cause %q (want %q), timed_out %t (want %t), cleanup_confirmed %t, return_code %s",
		rec.Cause, sc.Cause, rec.TimedOut, wantTimedOut, rec.CleanupConfirmed, intText(rec.ReturnCode))
}

// writerSeen is what the owner read of the writer: whether the model's
// writer call was answered by the harness (a request carried its
// result), why not, the file as read after close, and its size then and
// writerQuiet later.
type writerSeen struct {
	state         writerState
	whyNot        string // unless writerRan: why not
	content       string
	readErr       error
	atClose, then int64
	present       bool // the file was there at close
	// stopAt is when the stop came: the receipt's ended_at (timeout) or
	// the owner's close (cancel).
	stopAt time.Time
}

// writerChecks are scenario.writer_started, the positive control (the
// writer wrote its first line no later than the stop: it ran, so a stop
// that leaves it running would be seen), and scenario.writer_stopped (its
// file did not grow in writerQuiet after close). A harness whose model
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
	first, err := firstWriterLine(w.content)
	started := w.present && err == nil && w.readErr == nil && !first.After(w.stopAt.Truncate(time.Second))
	detail := fmt.Sprintf("%s: %d bytes at close", writerFile, w.atClose)
	switch {
	case !w.present:
		detail = writerFile + " not there after close: the writer never wrote"
	case w.readErr != nil:
		detail += "; read: " + w.readErr.Error()
	case err != nil:
		detail += "; " + err.Error()
	default:
		detail += fmt.Sprintf("; first line at %s, the stop at %s", first.UTC().Format(time.RFC3339), w.stopAt.UTC().Format(time.RFC3339Nano))
	}
	stopped := started && w.atClose == w.then
	return []reports.Check{
		scenarioCheck("scenario.writer_started", started, "%s", detail),
		scenarioCheck("scenario.writer_stopped", stopped, "%s: %d bytes at close, %d bytes %s later%s", writerFile, w.atClose, w.then, writerQuiet,
			pick(w.then > w.atClose, ": the detached writer survived the stop", "")),
	}
}

// firstWriterLine is the time the writer's first line carries ("0
// EPOCH").
func firstWriterLine(content string) (time.Time, error) {
	line, _, _ := strings.Cut(content, "\n")
	f := strings.Fields(line)
	if len(f) != 2 {
		return time.Time{}, fmt.Errorf("first line %q is not \"N EPOCH\"", truncate(line, 80))
	}
	secs, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("first line %q: %v", truncate(line, 80), err)
	}
	return time.Unix(secs, 0), nil
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

// faultSeen is what a model-fault case (model-429, model-400) ended with.
type faultSeen struct {
	fault     model.Fault
	answered  int // requests the fault answered
	rec       *reports.Receipt
	response  string // response_status
	delivered bool   // verify.deliverable's verdict, with the derived token
}

// modelFaultCheck is scenario.model_fault: the harness met the fault and
// finished the challenge (exit 0, the deliverable holding the token the
// model derived from the challenge, through the write call that came
// after it), or exited non-zero, which the receipt carries and the case
// files as a model error; never exit 0 without the deliverable, never a
// hang to the deadline, and the cleanup confirmed either way.
func modelFaultCheck(f faultSeen) (reports.Check, bool) {
	const id = "scenario.model_fault"
	rec := f.rec
	var ok, modelErr bool
	var why string
	switch {
	case f.answered == 0:
		why = fmt.Sprintf("the %s was never answered: the harness made too few requests", f.fault)
	case rec == nil:
		why = "no activation receipt"
	case rec.TimedOut:
		why = "the harness hung until the deadline"
	case !rec.CleanupConfirmed:
		why = "cleanup not confirmed"
	case rec.ReturnCode == nil:
		why = "no return code"
	case *rec.ReturnCode == 0 && f.delivered:
		// Its own result may still report the fault it got past (Pi's
		// events keep the 400's stopReason error before it compacted).
		ok, why = true, "the harness went on and finished the challenge"
	case *rec.ReturnCode == 0:
		why = fmt.Sprintf("exit 0 without finishing (deliverable %t, response_status %s): a made-up success", f.delivered, f.response)
	default:
		ok, modelErr = true, true
		why = fmt.Sprintf("the harness exited %d, filed as a model error", *rec.ReturnCode)
	}
	rc, cause := "null", ""
	if rec != nil {
		rc, cause = intText(rec.ReturnCode), rec.Cause
	}
	return scenarioCheck(id, ok, "%s answered %d request(s); receipt cause %q, return_code %s; deliverable %t, response_status %s: %s",
		f.fault, f.answered, cause, rc, f.delivered, f.response, why), modelErr
}

// borrowedSeen is what the owner found of its own service and state after
// close.
type borrowedSeen struct {
	service      string // "PID/STARTTIME comm" as started
	alive        bool
	stateBefore  string // sha256 of the task state as written
	stateAfter   string
	stateMissing bool
}

// borrowedCheck is scenario.borrowed_kept: the owner's task service,
// started before the launch outside the harness's tree, is alive after
// close, and the task state it wrote is there unchanged.
func borrowedCheck(b borrowedSeen) reports.Check {
	intact := !b.stateMissing && b.stateBefore != "" && b.stateAfter == b.stateBefore
	return scenarioCheck("scenario.borrowed_kept", b.alive && intact,
		"owner's service %s alive after close: %t; task state %s unchanged: %t (sha256 %s -> %s)",
		b.service, b.alive, borrowedState, intact, short(b.stateBefore), pick(b.stateMissing, "missing", short(b.stateAfter)))
}

func short(s string) string { return truncate(s, 12) }
