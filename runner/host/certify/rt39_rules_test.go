package certify

import (
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/capture"
	"github.com/sandproof/sandproof/runner/model"
)

// Red team rt39 (issue 39's surfaces), scenario.model_fault after a 429:
// the harness sends the task again at once, the relay's digest of it not
// beginning with the 429's conversation (a turn put before the prompt:
// the model still reads the task in it and answers with its read), runs
// that read, and sends the read's result in the 429's conversation only
// once the Retry-After has passed. The model gave it work 2 ms after the
// 429 reached it: the rate limit was not honoured, whatever the
// conversation's first turn.
func TestRT39RetryBeforeRetryAfterInAnotherShape(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   int // when request 2 was sent, ms from the start (the 429 written at 10)
		why  string
	}{
		{"sent again 2 ms after the 429 reached it", 12, "request 2, given work by the model 2ms after the 429 reached the harness, came before its Retry-After"},
		// Sent beside the task's first request, before its 429 came:
		// the harness never waited on the 429 for the work it used.
		{"sent beside the 429's request, before its answer", 9, "request 2, given work by the model, came 1ms before the 429 reached the harness"},
	} {
		cs := calls(
			sentAt(with(answered(1, 429, 10), tPrompt), 8),
			// The task sent again behind a made-up turn of the model's:
			// answered with the read (a step of the task).
			sentAt(with(step(2, tc.at+1), "aPreamble", tPrompt), tc.at),
			// The read's result in the 429's conversation, after the wait.
			with(step(3, 1100), tPrompt, tRead, tChal),
			with(side(4, 1110), tPrompt, tRead, tChal, tWrite, tWrote))
		f := faultSeen{fault: model.Fault429, answered: 1, calls: cs, rec: exited(0), response: capture.ResponseCompleted,
			deliverable: true, writeCall: 3, retryAfter: time.Second}
		c, _ := modelFaultCheck(f)
		if c.Status != reports.StatusFailed || !strings.Contains(c.Detail, tc.why) {
			t.Errorf("%s: %s (%s); want failed, saying %q", tc.name, c.Status, c.Detail, tc.why)
		}
	}
	// Positive control: the same shapes with request 2 sent after the
	// Retry-After pass (the rule is about when, not the shape).
	cs := calls(with(answered(1, 429, 10), tPrompt), sentAt(with(step(2, 1051), "aPreamble", tPrompt), 1050),
		with(step(3, 1100), tPrompt, tRead, tChal), with(side(4, 1110), tPrompt, tRead, tChal, tWrite, tWrote))
	if c, _ := modelFaultCheck(faultSeen{fault: model.Fault429, answered: 1, calls: cs, rec: exited(0), response: capture.ResponseCompleted,
		deliverable: true, writeCall: 3, retryAfter: time.Second}); c.Status != reports.StatusPassed {
		t.Errorf("positive control: request 2 after the Retry-After: %s (%s); want passed", c.Status, c.Detail)
	}
}
