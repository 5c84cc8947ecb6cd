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
	cs := calls(
		with(answered(1, 429, 10), tPrompt),
		// The task sent again at once behind a made-up turn of the
		// model's: answered with the read (a step of the task).
		sentAt(with(step(2, 13), "aPreamble", tPrompt), 12),
		// The read's result in the 429's conversation, after the wait.
		with(step(3, 1100), tPrompt, tRead, tChal),
		with(side(4, 1110), tPrompt, tRead, tChal, tWrite, tWrote))
	f := faultSeen{fault: model.Fault429, answered: 1, calls: cs, rec: exited(0), response: capture.ResponseCompleted,
		deliverable: true, writeCall: 3, retryAfter: time.Second}
	c, _ := modelFaultCheck(f)
	if c.Status != reports.StatusFailed || !strings.Contains(c.Detail, "request 2") {
		t.Errorf("the task sent again 2 ms after the 429, answered with a step: %s (%s); want failed, naming request 2", c.Status, c.Detail)
	}
}
