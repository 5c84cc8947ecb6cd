package certify

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/capture"
	"github.com/sandproof/sandproof/runner/host/relay"
	"github.com/sandproof/sandproof/runner/model"
)

// scenario.model_fault's rules (contract §7.6 scenarios) over the shapes
// the relay records of a fault case, without an engine. The relay's
// record is the witness of what the harness was answered and had
// delivered whole; the receipt of how it ended; its own result, stderr
// and stdout of what it said. Each of issue 35's crashing harnesses is a
// row that main's rule (any non-zero exit once the fault was answered)
// passed.

// faultEpoch is when the fault cases' records start.
var faultEpoch = time.Unix(1_800_000_000, 0)

// answered is one relay record: request seq answered with status,
// delivered whole at ms after the start (sent 1 ms before), or never
// (ms < 0).
func answered(seq, status, ms int) relay.Call {
	c := relay.Call{Seq: seq, Method: "POST", Path: "/v1/chat/completions", Status: status}
	if status == 429 || status == 400 {
		c.Fault = fmt.Sprint(status) // the scripted model's mark
	}
	if ms >= 0 {
		c.Delivered, c.DeliveredAt = true, faultEpoch.Add(time.Duration(ms)*time.Millisecond)
		c.WrittenAt = c.DeliveredAt
		c.Time = c.DeliveredAt.Add(-time.Millisecond)
	}
	c.ReceivedAt = c.Time.Add(time.Millisecond / 4)
	return c
}

// badRequest is a 400 the model gave a request it could not read: no
// fault's mark.
func badRequest(seq, ms int) relay.Call {
	c := answered(seq, 400, ms)
	c.Fault = ""
	return c
}

// with gives a record the conversation its request carried (turn
// digests: "u" a user turn, "a" the model's, "r" tool results).
func with(c relay.Call, turns ...string) relay.Call {
	c.History = turns
	return c
}

// receivedAt sets when a request's headers came and when it was whole,
// ms after the start.
func receivedAt(c relay.Call, headers, whole int) relay.Call {
	c.Time = faultEpoch.Add(time.Duration(headers) * time.Millisecond)
	c.ReceivedAt = faultEpoch.Add(time.Duration(whole) * time.Millisecond)
	return c
}

// sentAt sets when a request arrived, ms after the start.
func sentAt(c relay.Call, ms int) relay.Call {
	c.Time = faultEpoch.Add(time.Duration(ms) * time.Millisecond)
	c.ReceivedAt = c.Time.Add(time.Millisecond / 4)
	return c
}

// The turns of the fault cases' conversations: the prompt (and a
// harness's rewording of it), the model's read and the challenge it
// returned, the model's write and its result, a compaction's summary.
const (
	tPrompt  = "uPrompt"
	tStamped = "uPrompt-re-stamped"
	tContext = "uInternalContext"
	tRead    = "aRead"
	tChal    = "rChallenge"
	tWrite   = "aWrite"
	tWrote   = "rWrote"
	tSummary = "uSummary"
	tOther   = "uAnotherTask"
	tList    = "aList"
	tListed  = "rListed"
	// tResumed is a resumed conversation's user turn holding the model's
	// summary (Claude Code's "This session is being continued ...").
	tResumed = "uResumedFromTheSummary"
)

// summarised marks c the model's summary id; resumedFrom marks c a
// request that carried the summary id (model.SummaryHeader,
// ResumesHeader, as the relay records them).
func summarised(c relay.Call, id string) relay.Call {
	c.Summary = id
	return c
}

func resumedFrom(c relay.Call, id string) relay.Call {
	c.Resumes = id
	return c
}

// step is a 200 that asked for a step of the task (a tool call); side one
// that asked for none (a title, the model's text).
func step(seq, ms int) relay.Call {
	c := answered(seq, 200, ms)
	c.ToolCalls = []relay.ToolCall{{ID: "call_1", Name: "read", Arguments: `{"path":"/task/challenge.txt"}`}}
	return c
}

func side(seq, ms int) relay.Call {
	c := answered(seq, 200, ms)
	c.Text = "Create deliverable file"
	return c
}

func calls(cs ...relay.Call) []relay.Call { return cs }

func exited(rc int) *reports.Receipt {
	return &reports.Receipt{Cause: "exited", CleanupConfirmed: true, ReturnCode: &rc}
}

// What harnesses say: OpenAI SDKs' 429 ("429 Rate limit reached for
// requests"), the mini-agent's stderr, OpenClaw's stored errorMessage of
// the 400, and a crash that names nothing.
var (
	rateLimited   = []said{{"result", ""}, {"stderr", "miniagent: model answered HTTP 429: {\"error\":{\"message\":\"Rate limit reached for requests.\"}}\n"}}
	contextLimit  = []said{{"result", "400 This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."}, {"stderr", ""}}
	crashedSaying = []said{{"result", ""}, {"stderr", "miniagent: crashed after model request 2\n"}, {"events", `{"type":"turn_start"}` + "\n"}}
)

type faultCase struct {
	name     string
	f        faultSeen
	want     reports.Status
	modelErr bool
	// why is a part of the detail that says which rule decided.
	why string
}

// faultCases are the rules' table: the shapes that pass first (the
// positive controls), then each attack and each broken condition.
func faultCases() []faultCase {
	f429 := func(rc int, said []said, cs ...relay.Call) faultSeen {
		return faultSeen{fault: model.Fault429, answered: 1, calls: cs, rec: exited(rc), response: capture.ResponseFailed, said: said,
			retryAfter: time.Second}
	}
	f400 := func(rc int, said []said, cs ...relay.Call) faultSeen {
		f := f429(rc, said, cs...)
		f.fault = model.Fault400
		return f
	}
	// finished: exit 0 with the deliverable, written as the answer to
	// request write asked.
	finished := func(write int, f faultSeen) faultSeen {
		f.deliverable, f.response, f.writeCall = true, capture.ResponseCompleted, write
		return f
	}
	// The honest flows: the 429 on the task's first turn, the retry
	// after its Retry-After, the read, the write, done; the 400 on the
	// turn that carries the challenge.
	retried := []relay.Call{with(answered(1, 429, 10), tPrompt), with(step(2, 1020), tPrompt), with(step(3, 1030), tPrompt, tRead, tChal),
		with(side(4, 1040), tPrompt, tRead, tChal, tWrite, tWrote)}
	// Kilo's title request (relay record of alpine-class/kilo/model-429,
	// 2026-12-05): the prompt repeated, whole 2.3 ms after the 429's
	// request and before the 429's answer was written (at 10 ms).
	titleBeside429 := with(side(2, 12), tPrompt, tContext)
	titleBeside429.Time, titleBeside429.ReceivedAt = faultEpoch.Add(9250*time.Microsecond), faultEpoch.Add(9500*time.Microsecond)
	faulted400 := []relay.Call{with(step(1, 10), tPrompt), with(answered(2, 400, 20), tPrompt, tRead, tChal)}
	return []faultCase{
		// Passing shapes.
		{"429, a retry, then finished", finished(3, f429(0, nil, retried...)),
			reports.StatusPassed, false, "retried the 429's request (request 2, 1.009s after the 429 reached it, Retry-After 1s) and finished"},
		{"429, Kilo's title request beside it (the prompt repeated, whole before the 429 reached the harness), then the retry", finished(4, f429(0, nil,
			with(answered(1, 429, 10), tPrompt), titleBeside429, with(step(3, 1060), tPrompt), with(step(4, 1070), tPrompt, tRead, tChal))),
			reports.StatusPassed, false, "retried the 429's request (request 3"},
		{"429, OpenClaw's retry: the prompt re-stamped and wrapped", finished(3, f429(0, nil, with(answered(1, 429, 10), tPrompt, tContext),
			with(step(2, 2210), tStamped, tContext), with(step(3, 2300), tStamped, tContext, tRead, tChal))),
			reports.StatusPassed, false, "retried the 429's request (request 2"},
		{"400, Pi's compaction: a summary before the turns it kept, then finished", finished(4, f400(0, nil, append(faulted400,
			with(side(3, 30), tSummary), with(step(4, 40), tSummary, tPrompt, tRead, tChal), with(side(5, 50), tSummary, tPrompt, tRead, tChal, tWrite, tWrote))...)),
			reports.StatusPassed, false, "compacted (request 4: 4 turn(s), the 400's 3) and finished the challenge through it (the write asked in request 4)"},
		{"400, compacted to the prompt, the challenge read again, then finished", finished(4, f400(0, nil, append(faulted400,
			with(step(3, 30), tPrompt), with(step(4, 40), tPrompt, tRead, tChal))...)),
			reports.StatusPassed, false, "compacted (request 3: 1 turn(s), the 400's 3) and finished the challenge through it (the write asked in request 4)"},
		// Claude Code's and OpenCode's compaction (issue 38): the summary
		// request keeps at most the model's read, the resumed
		// conversation none of the 400's turns; the model's marks tie
		// them (relay.Call.Summary, Resumes).
		{"400, compacted into the model's summary, the write in the conversation resumed from it", finished(4, f400(0, nil, append(faulted400,
			summarised(with(side(3, 30), tContext, tRead, tSummary), "s3"), resumedFrom(with(step(4, 40), tSummary, tResumed), "s3"))...)),
			reports.StatusPassed, false, "compacted the 400's conversation into the model's summary (request 3) and finished the challenge through the conversation resumed from it (request 4; the write asked in request 4)"},
		{"400, compacted into the model's summary, the challenge read again in the resumed conversation, then the write", finished(5, f400(0, nil, append(faulted400,
			summarised(with(side(3, 30), tSummary), "s3"), resumedFrom(with(step(4, 40), tResumed), "s3"), resumedFrom(with(step(5, 50), tResumed, tRead, tChal), "s3"))...)),
			reports.StatusPassed, false, "resumed from it (request 4; the write asked in request 5)"},
		{"429 then an exit with an error naming the rate limit", f429(1, rateLimited, answered(1, 429, 10)),
			reports.StatusPassed, true, `"rate limit" in its stderr`},
		{"exit right after reading the 400, reporting it in its result", f400(1, contextLimit, step(1, 10), answered(2, 400, 20)),
			reports.StatusPassed, true, `"maximum context" in its result`},
		{"a title request answered before the fault's answer", f400(1, contextLimit, side(1, 5), step(2, 10), answered(3, 400, 20)),
			reports.StatusPassed, true, "filed as a model error"},
		// OpenCode on model-400: a title, the 400 (its events name the
		// ContextOverflowError), a compaction's title and a continuation
		// the model found no task in, then exit 1.
		{"side answers after the 400 (a title, the model finding no task)", f400(1, []said{{"events", `{"type":"error","error":{"name":"ContextOverflowError"}}`}},
			side(1, 10), answered(2, 400, 20), side(3, 30), side(4, 40)), reports.StatusPassed, true, `"contextoverflow" in its events`},
		{"a retry answered 500, left unread: the model's errors ended it", f429(1, rateLimited, answered(1, 429, 10), answered(2, 500, -1)),
			reports.StatusPassed, true, "filed as a model error"},
		{"a request the relay refused after the fault (no answer of the model's)", f429(1, rateLimited, answered(1, 429, 10), relay.Call{Seq: 2, Status: 403, Refused: relay.RefusedCanary}),
			reports.StatusPassed, true, "filed as a model error"},

		// Issue 35's attacks.
		{"exit 1 after a 200 (a retry answered normally, then the crash)", f429(1, crashedSaying, answered(1, 429, 10), step(2, 1020)),
			reports.StatusFailed, false, "was answered normally"},
		{"exit 1 after a 200, even naming the rate limit", f429(1, rateLimited, answered(1, 429, 10), step(2, 1020)),
			reports.StatusFailed, false, "was answered normally"},
		{"exit without reading the answer (the client left first)", f429(1, crashedSaying, answered(1, 429, -1)),
			reports.StatusFailed, false, "the last answer delivered to it whole being none"},
		{"crash-always: exit 1 right after reading the 400, saying nothing of it", f400(1, crashedSaying, step(1, 10), answered(2, 400, 20)),
			reports.StatusFailed, false, "said nothing of the context limit"},

		// Each condition alone.
		{"the retry answered normally but never read (crashed before)", f429(1, rateLimited, answered(1, 429, 10), step(2, -1)),
			reports.StatusFailed, false, "was answered normally"},
		{"the 429 never delivered, the harness naming it blindly", f429(1, rateLimited, answered(1, 429, -1)),
			reports.StatusFailed, false, "being none"},
		{"a later answer delivered after the fault's (a 500)", f429(1, rateLimited, answered(1, 429, 10), answered(2, 500, 1020)),
			reports.StatusFailed, false, "being request 2's"},
		{"an earlier request's answer delivered after the fault's", f400(1, contextLimit, sentAt(step(1, 30), 5), answered(2, 400, 20)),
			reports.StatusFailed, false, "being request 1's"},
		// Red team rt2 F2: numbered before the fault's (at its headers),
		// received whole after the fault's answer was written, answered
		// with a step: the harness went on past the fault.
		{"a request numbered before the fault's, whole after it, given a step", f429(1, rateLimited, receivedAt(step(1, -1), 5, 40), answered(2, 429, 20)),
			reports.StatusFailed, false, "after request 1, later than the 429's (request 2), was answered normally"},
		{"429 then exit 1 saying nothing of the rate limit", f429(1, crashedSaying, answered(1, 429, 10)),
			reports.StatusFailed, false, "said nothing of the rate limit"},
		{"429 then exit 1 naming the context limit instead", f429(1, contextLimit, answered(1, 429, 10)),
			reports.StatusFailed, false, "said nothing of the rate limit"},
		{"400 then exit 1 naming the rate limit instead", f400(1, rateLimited, step(1, 10), answered(2, 400, 20)),
			reports.StatusFailed, false, "said nothing of the context limit"},
		{"exit 1 with no fault answer in the relay's record", f429(1, rateLimited, step(1, 10)),
			reports.StatusFailed, false, "recorded no 429 answer"},
		{"finished with no request after the 429", finished(1, f429(0, nil, with(answered(1, 429, 10), tPrompt))),
			reports.StatusFailed, false, "passes only with a retry"},

		// A finish through the conversation the fault answered (issue 35,
		// class D, round 4): main passed each of these.
		{"429: retried 20 ms after the 429 reached it (D1's throw-away, then the real loop at once)", finished(3, f429(0, nil,
			with(answered(1, 429, 10), tPrompt), sentAt(with(step(2, 31), tPrompt), 30), with(step(3, 40), tPrompt, tRead, tChal))),
			reports.StatusFailed, false, "retried in request 2 20ms after the 429 reached it, before its Retry-After (1s)"},
		{"429: a copy sent before the 429 reached it", finished(3, f429(0, nil,
			sentAt(with(answered(1, 429, 1000), tPrompt), 400), sentAt(with(step(2, 1020), tPrompt), 500), with(step(3, 2030), tPrompt, tRead, tChal))),
			reports.StatusFailed, false, "request 2, the 429's sent again, came 500ms before the 429 reached the harness"},
		{"429 on a later turn, retried, the task finished in another conversation", finished(4, f429(0, nil, with(step(1, 10), tPrompt),
			with(answered(2, 429, 20), tPrompt, tRead, tChal), with(side(3, 1100), tPrompt, tRead, tChal), with(step(4, 1200), tOther, tList, tListed))),
			reports.StatusFailed, false, "does not continue the conversation the 429 answered (request 2): a rate limit passes only with a retry"},
		{"400: the same request sent again as it was", finished(3, f400(0, nil, append(faulted400,
			with(step(3, 30), tPrompt, tRead, tChal), with(side(4, 40), tPrompt, tRead, tChal, tWrite, tWrote))...)),
			reports.StatusFailed, false, "did not come through the 400's conversation made shorter or compacted"},
		{"400: sent again, the prompt re-stamped", finished(3, f400(0, nil, append(faulted400,
			with(step(3, 30), tStamped, tRead, tChal))...)),
			reports.StatusFailed, false, "did not come through the 400's conversation made shorter or compacted"},
		{"400: the task done in a conversation that keeps nothing of the 400's (D2's fresh loop)", finished(4, f400(0, nil, append(faulted400,
			with(step(3, 30), tOther), with(step(4, 40), tOther, tList, tListed))...)),
			reports.StatusFailed, false, "did not come through the 400's conversation"},
		{"400: compacted before the 400 reached it", finished(3, f400(0, nil, append(faulted400,
			sentAt(with(step(3, 30), tSummary, tPrompt, tRead, tChal), 15))...)),
			reports.StatusFailed, false, "did not come through the 400's conversation"},
		{"400: compacted, the write in another conversation after it", finished(4, f400(0, nil, append(faulted400,
			with(side(3, 30), tSummary, tPrompt), with(step(4, 40), tOther, tList, tListed))...)),
			reports.StatusFailed, false, "did not come through the 400's conversation"},
		{"400: a summary asked before the 400 reached the harness, the write resumed from it", finished(4, f400(0, nil, append(faulted400,
			summarised(sentAt(with(side(3, 30), tSummary), 15), "s3"), resumedFrom(with(step(4, 40), tResumed), "s3"))...)),
			reports.StatusFailed, false, "did not come through the 400's conversation"},
		{"400: the 400's conversation sent again with the model's summary in it", finished(4, f400(0, nil, append(faulted400,
			summarised(with(side(3, 30), tSummary), "s3"), resumedFrom(with(step(4, 40), tPrompt, tRead, tChal, tResumed), "s3"))...)),
			reports.StatusFailed, false, "did not come through the 400's conversation"},
		{"400: the write resumed from another summary than the one asked after the 400", finished(4, f400(0, nil, append(faulted400,
			summarised(with(side(3, 30), tSummary), "s3"), resumedFrom(with(step(4, 40), tResumed), "s1"))...)),
			reports.StatusFailed, false, "did not come through the 400's conversation"},
		{"400: the resumed request whole before the summary was written", finished(4, f400(0, nil, append(faulted400,
			summarised(with(side(3, 30), tSummary), "s3"), resumedFrom(sentAt(with(step(4, 40), tResumed), 25), "s3"))...)),
			reports.StatusFailed, false, "did not come through the 400's conversation"},
		{"400: a bad request padded with the conversation answered 400 first, then the 400's request sent again", finished(4, f400(0, nil, with(step(1, 10), tPrompt),
			with(badRequest(2, 15), tPrompt, tRead, tChal, tSummary), with(answered(3, 400, 20), tPrompt, tRead, tChal), with(step(4, 30), tPrompt, tRead, tChal))),
			reports.StatusFailed, false, "the 400 on request 3"},
		// The challenge's chain (contract §7.4) holds in a fault case
		// too: fake-forged sends one request whose history holds a read
		// it made up and that read's result.
		{"400 on a made-up read's result, the harness exiting naming it", func() faultSeen {
			f := f400(1, contextLimit, with(answered(1, 400, 10), tPrompt, tRead, tChal))
			f.chain = "call 1 carries the challenge in the result of a read the model never asked for"
			return f
		}(), reports.StatusFailed, false, "the 400 answered a turn whose challenge came back in no tool call the model asked for"},
		{"429, a retry, then finished through a made-up read", func() faultSeen {
			f := finished(3, f429(0, nil, retried...))
			f.chain = "call 2 carries the challenge in the result of a read the model never asked for"
			return f
		}(), reports.StatusFailed, false, "yet the challenge did not come back through a tool call the model asked for"},
		{"429 on a made-up read's result, the harness exiting naming it (no tool call is asked before the 429)", func() faultSeen {
			f := f429(1, rateLimited, with(answered(1, 429, 10), tPrompt, tRead, tChal))
			f.chain = "no request carried the challenge back in the result of a tool call the model asked for"
			return f
		}(), reports.StatusPassed, true, "filed as a model error"},
		{"exit 0 with the deliverable, no answer recorded asking for its write", finished(0, f429(0, nil, retried...)),
			reports.StatusFailed, false, "no answer the relay recorded asked for its write"},
		{"exit 0 without the deliverable", f429(0, nil, answered(1, 429, 10), step(2, 1020)),
			reports.StatusFailed, false, "a made-up success"},
		{"exit 0, the deliverable, its own result reporting the fault it got past", func() faultSeen {
			f := finished(3, f400(0, contextLimit, append(faulted400, with(step(3, 30), tSummary, tPrompt, tRead, tChal))...))
			f.response = capture.ResponseFailed
			return f
		}(), reports.StatusPassed, false, "went on with the 400's conversation compacted"},
		{"hung to the deadline", func() faultSeen {
			f := f429(143, rateLimited, answered(1, 429, 10))
			f.rec.TimedOut, f.rec.Cause = true, "deadline"
			return f
		}(), reports.StatusFailed, false, "hung until the deadline"},
		{"cleanup not confirmed", func() faultSeen {
			f := f429(1, rateLimited, answered(1, 429, 10))
			f.rec.CleanupConfirmed = false
			return f
		}(), reports.StatusFailed, false, "cleanup not confirmed"},
		{"no return code", func() faultSeen {
			f := f429(1, rateLimited, answered(1, 429, 10))
			f.rec.ReturnCode = nil
			return f
		}(), reports.StatusFailed, false, "no return code"},
		{"the fault never answered", func() faultSeen {
			f := f429(1, rateLimited, answered(1, 429, 10))
			f.answered = 0
			return f
		}(), reports.StatusFailed, false, "never answered"},
		{"no receipt", func() faultSeen {
			f := f429(1, rateLimited, answered(1, 429, 10))
			f.rec = nil
			return f
		}(), reports.StatusFailed, false, "no activation receipt"},
	}
}

func TestModelFaultRules(t *testing.T) {
	for _, tc := range faultCases() {
		c, modelErr := modelFaultCheck(tc.f)
		if c.ID != "scenario.model_fault" || c.Status != tc.want || modelErr != tc.modelErr || !strings.Contains(c.Detail, tc.why) {
			t.Errorf("%s: %s %s, model error %t (%s); want %s, %t, saying %q", tc.name, c.ID, c.Status, modelErr, c.Detail, tc.want, tc.modelErr, tc.why)
		}
	}
}

// The relay's record is read in request order whatever order the calls
// ended in, and the answer delivered last is found by when.
func TestFaultTrail(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cs    []relay.Call
		fault model.Fault
		want  faultTrail
	}{
		{"429, retry, finish", calls(answered(1, 429, 10), step(2, 20), step(3, 30), side(4, 40)), model.Fault429, faultTrail{seq: 1, last: 3, later: 3, normal: 2}},
		{"side answers are neither last nor normal", calls(side(1, 10), answered(2, 400, 20), side(3, 30)), model.Fault400, faultTrail{seq: 2, last: 2, later: 1}},
		{"a 400 the model gave a request it could not read is not the fault's", calls(badRequest(1, 10), answered(2, 400, 20)), model.Fault400, faultTrail{seq: 2, last: 2}},
		{"the model list and a refusal are neither answers nor retries", calls(relay.Call{Seq: 0, Status: 200, Delivered: true, DeliveredAt: time.Unix(1_900_000_000, 0)},
			answered(1, 429, 10), relay.Call{Seq: 2, Status: 413, Refused: relay.RefusedTooLarge}), model.Fault429, faultTrail{seq: 1, last: 1}},
		{"nothing delivered", calls(answered(1, 429, -1), step(2, -1)), model.Fault429, faultTrail{seq: 1, later: 1, normal: 2}},
		{"no fault", calls(step(1, 10)), model.Fault429, faultTrail{last: 1}},
	} {
		if got := trailOf(tc.fault, tc.cs); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// What counts as the harness naming each fault, and what does not.
func TestFaultNamed(t *testing.T) {
	for _, tc := range []struct {
		fault model.Fault
		text  string
		want  string
	}{
		{model.Fault429, "Error: 429 Too Many Requests", "too many requests"},
		{model.Fault429, `{"code":"rate_limit_exceeded"}`, "rate_limit"},
		{model.Fault429, "RateLimitError: slow down", "ratelimit"},
		{model.Fault429, "request 429 failed", ""},
		{model.Fault400, "context_length_exceeded", "context_length"},
		{model.Fault400, "Codex ran out of room in the model's context window.", "context window"},
		{model.Fault400, "prompt is too long: 9000 tokens > 8192 maximum", "prompt is too long"},
		{model.Fault400, `{"name":"ContextOverflowError"}`, "contextoverflow"},
		{model.Fault400, `{"code":400,"message":"The input token count (9000) exceeds the maximum number of tokens allowed (8192).","status":"INVALID_ARGUMENT"}`, "exceeds the maximum number of tokens"},
		{model.Fault400, `{"code":400,"status":"INVALID_ARGUMENT"}`, ""},
		{model.Fault400, "HTTP 400 Bad Request", ""},
		{model.FaultStall, "rate limit", ""},
	} {
		where, term := faultNamed(tc.fault, []said{{"stderr", "nothing here\n"}, {"events", tc.text}})
		if term != tc.want || (tc.want != "") != (where == "events") {
			t.Errorf("%s in %q: %q in %q, want %q", tc.fault, tc.text, term, where, tc.want)
		}
	}
	if where, _ := faultNamed(model.Fault429, nil); where != "" {
		t.Errorf("nothing said: found in %q", where)
	}
}

// Red team rt2 F4: a harness that opened two requests (headers sent,
// bodies held) before its task request got the 429, then at once
// finished the held bodies (the read, then the challenge's result,
// answered with the write: no wait at all) and sent a throw-away 1.1 s
// later. By header time the throw-away was "the retry" and the case
// passed; by when each request was whole the first retry came 10 ms
// after the 429, before its Retry-After.
func TestRetryIsTheFirstRequestWholeAfterThe429(t *testing.T) {
	l := with(receivedAt(answered(1, 200, 32), 0, 30), tPrompt)
	l.ToolCalls = []relay.ToolCall{{ID: "call_1", Name: "read", Arguments: `{"path":"/task/challenge.txt"}`}}
	w := with(receivedAt(answered(2, 200, 42), 1, 40), tPrompt, tRead, tChal)
	w.ToolCalls = []relay.ToolCall{{ID: "call_2", Name: "write", Arguments: `{"path":"/task/deliverable.txt","content":"tok"}`}}
	fc := with(receivedAt(answered(3, 429, 20), 5, 6), tPrompt)
	d := with(receivedAt(side(4, 1125), 1120, 1121), tPrompt)
	f := faultSeen{fault: model.Fault429, answered: 1, calls: calls(l, w, fc, d), rec: exited(0), deliverable: true, writeCall: 2,
		response: "completed", retryAfter: time.Second}
	c, _ := modelFaultCheck(f)
	if c.Status != reports.StatusFailed || !strings.Contains(c.Detail, "retried in request 1 10ms after the 429") {
		t.Fatalf("held requests finished at once after the 429: %s: %s; want failed, retried in request 1 10ms after it", c.Status, c.Detail)
	}
}

// Red team rt2 F5: after the 400, the 400's request sent again as it
// was, answered with the write, then a throw-away holding the 400's
// conversation without its last turn (a "compaction" sent after the
// write): the write did not come through a compacted conversation.
func TestWriteMustFollowTheCompaction(t *testing.T) {
	read := with(step(1, 10), tPrompt)
	fc := with(sentAt(answered(2, 400, 30), 20), tPrompt, tRead, tChal)
	fc.Delivered, fc.DeliveredAt, fc.WrittenAt = true, faultEpoch.Add(30e6), faultEpoch.Add(30e6)
	again := with(sentAt(answered(3, 200, 50), 40), tPrompt, tRead, tChal)
	again.ToolCalls = []relay.ToolCall{{ID: "call_2", Name: "write", Arguments: `{"path":"/task/deliverable.txt","content":"tok"}`}}
	dummy := with(sentAt(side(4, 210), 200), tPrompt, tRead)
	f := faultSeen{fault: model.Fault400, answered: 1, calls: calls(read, fc, again, dummy), rec: exited(0), deliverable: true, writeCall: 3, response: "completed"}
	if c, _ := modelFaultCheck(f); c.Status != reports.StatusFailed || !strings.Contains(c.Detail, "did not come through the 400's conversation") {
		t.Fatalf("a write before its 'compaction': %s: %s; want failed", c.Status, c.Detail)
	}
	// The positive control: the same throw-away sent before the write's
	// request, which begins with its turns, and answered before it: passed.
	dummy = with(sentAt(side(3, 45), 40), tPrompt, tRead)
	again = with(sentAt(answered(4, 200, 60), 50), tPrompt, tRead, tSummary)
	again.ToolCalls = []relay.ToolCall{{ID: "call_2", Name: "write", Arguments: `{"path":"/task/deliverable.txt","content":"tok"}`}}
	f = faultSeen{fault: model.Fault400, answered: 1, calls: calls(read, fc, dummy, again), rec: exited(0), deliverable: true, writeCall: 4, response: "completed"}
	if c, _ := modelFaultCheck(f); c.Status != reports.StatusPassed {
		t.Fatalf("a write after the compaction's answer: %s: %s; want passed", c.Status, c.Detail)
	}
}
