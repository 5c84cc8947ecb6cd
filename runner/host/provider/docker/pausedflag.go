package docker

import (
	"context"
	"strings"
	"time"
)

// The engine's paused flag can run behind its runtime. Docker 20.10 sets a
// container's Paused flag when a pause or unpause call returns, and sets it
// again when containerd's event for that change reaches it, which can be
// after the next call: a late "resumed" clears the flag of a container the
// next pause froze (the unpause then answers "is not paused" and leaves it
// frozen), a late "paused" sets it on one the unpause thawed (the next
// pause answers "is already paused", an exec "is paused"). Each late event
// is followed by its successor's, which puts the flag right within
// milliseconds. sandproof is the only one that pauses its sandboxes, and
// only under Sandbox.gate, so an answer that contradicts what the gate's
// holder did is a stale flag: the call is asked again, bounded by
// staleFlagBound, rather than taken as the engine's refusal. A flag that
// stays wrong past the bound is the engine's answer (an error; no diff is
// read unfrozen on its word).

// The engine's words for each contradiction (moby's daemon/pause.go,
// unpause.go and exec.go, the same from 20.10 to 27).
const (
	saysAlreadyPaused = "is already paused"
	saysNotPaused     = "is not paused"
	saysExecPaused    = "is paused, unpause the container before exec"
)

// staleFlagBound is how long a call the engine refused on a stale paused
// flag is asked again (a var so a test of the refusal need not wait it).
var staleFlagBound = 5 * time.Second

// staleFlagRetryMax is the longest wait between two asks.
const staleFlagRetryMax = 100 * time.Millisecond

// askPastStaleFlag runs call until it succeeds, fails for another reason,
// ctx ends or staleFlagBound passes, asking again only when the engine's
// error says the contradiction says. The last error is returned.
func askPastStaleFlag(ctx context.Context, says string, call func() error) error {
	deadline := time.Now().Add(staleFlagBound)
	wait := time.Millisecond
	for {
		err := call()
		if err == nil || !strings.Contains(err.Error(), says) || !time.Now().Before(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, staleFlagRetryMax)
	}
}
