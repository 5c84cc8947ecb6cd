package conformance_test

// The grace belongs to the harness (contract §2 stop rules): once the
// harness has exited, what it left behind is held and KILLed at once, and a
// harness that works through its grace still gets all of it. The bounds
// below are on what warden reports (the receipt's stop_seconds), never a
// timed sleep of the spec's own.

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sandproof/sandproof/conformance/framework"
	"github.com/sandproof/sandproof/conformance/witness"
)

const (
	// graceLong is the grace of these specs, graceLeft the stop they allow
	// once the harness has exited: far below the grace, far above a stop's
	// few rounds on a loaded 2-core host.
	graceLong = 2 * time.Second
	graceLeft = time.Second
	// checkpointWork is how long the term-checkpoint harness works on TERM
	// (the adversary's checkpointFor).
	checkpointWork = time.Second
)

var _ = Describe("warden supervise, stopping a harness that leaves a TERM-ignoring tool,", framework.Local, func() {
	for _, tier := range hostTiers {
		framework.ConformanceIt("2 stop rules", fmt.Sprintf("should hold and KILL a tool that ignores TERM and respawns itself with setsid as soon as the harness has exited, far within the grace, in tier %s", tier), tierLabel(tier), func(ctx SpecContext) {
			l := newLaunch()
			flags := append([]string{"--deadline", "60", "--grace", fmt.Sprint(graceLong.Seconds())}, tierFlags(tier)...)
			l.detach(ctx, flags, "term-respawner")
			rec := l.ready(ctx)
			h, tool := harness(rec), one(rec, "respawner")
			Expect(tool.SID).NotTo(Equal(h.SID), "positive control: the tool left the harness's session")

			r := l.stopWait(ctx)
			// The harness dies of the TERM (no handler); the tool lives on
			// through it, respawning, until the hold.
			expectOutcome(r, "stopped", 143, "TERM", true)
			expectTier(r, tier)
			expectReached(r, tool)
			expectGone("process", h, tool)
			rec, err := witness.ReadRecord(l.record)
			Expect(err).NotTo(HaveOccurred())
			for _, p := range rec.Role("respawner") {
				expectGone("respawned tool", p)
			}
			Expect(rec.Exits).NotTo(HaveKey(tool.PID), "nothing but the stop ended the tool")
			AddReportEntry("respawner stop", fmt.Sprintf("tier %s: stop_seconds %.3f, %d reached, grace %v", r.Tier, r.StopSeconds, len(r.Reached), graceLong))
			Expect(r.StopSeconds).To(BeNumerically("<", graceLeft.Seconds()),
				"the stop waited for the grace (%v) although the harness had exited: the tool that ignores TERM held it", graceLong)
		})
	}

	framework.ConformanceIt("2 stop rules", "should give a harness that checkpoints on TERM its grace, and hold and KILL its TERM-ignoring tool once it has exited, not before and not after the grace", func(ctx SpecContext) {
		l := newLaunch()
		done := filepath.Join(l.dir, "checkpoint")
		// A grace well beyond the checkpoint's work, so a stop that waits
		// for the whole grace after the harness has gone is told apart.
		const grace = 3 * time.Second
		l.detach(ctx, []string{"--deadline", "60", "--grace", fmt.Sprint(grace.Seconds())}, "--term-exit", "0", "term-respawner", "term-checkpoint", done)
		rec := l.ready(ctx)
		h, tool := harness(rec), one(rec, "respawner")
		Expect(done).NotTo(BeAnExistingFile(), "positive control: no checkpoint before the stop")

		r := l.stopWait(ctx)
		// Exit status 0: the harness finished its checkpoint and exited,
		// no KILL cut it short.
		expectOutcome(r, "stopped", 0, nil, true)
		Expect(done).To(BeAnExistingFile(), "the harness was not given the time to checkpoint")
		data, err := os.ReadFile(done)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(data)).To(Equal("checkpoint\n"))
		expectReached(r, tool)
		expectGone("process", h, tool)
		AddReportEntry("checkpoint stop", fmt.Sprintf("stop_seconds %.3f, grace %v, checkpoint %v", r.StopSeconds, grace, checkpointWork))
		Expect(r.StopSeconds).To(BeNumerically(">=", checkpointWork.Seconds()-0.01), "the stop ended before the harness's checkpoint")
		Expect(r.StopSeconds).To(BeNumerically("<", (grace-time.Second).Seconds()),
			"the stop waited for the grace after the harness had exited")
	})
})
