package certify

import (
	"github.com/sandproof/sandproof/runner/model"
	"github.com/sandproof/sandproof/runner/warden/receipt"
)

// ScenarioTimeout is timeout (contract §7.6 scenarios): the model has the
// harness start a detached writer, then stalls, and the launch's deadline
// stops the harness; the stop must end the writer too (the writer
// family's checks, scenario.stop with cause deadline, the partial
// transcript).
const ScenarioTimeout = "timeout"

// stopDeadline is the launch deadline of timeout: long enough for a
// harness to start, read the challenge and run the writer on a loaded
// machine (at 20 s, Pi, OpenCode and Kilo made no model call before it
// in a run of three cases at once on a shared two-core host), short
// enough to keep the matrix small.
const stopDeadline = 40

func init() {
	register(Scenario{Name: ScenarioTimeout, Order: 20, Script: model.Script{Flow: model.FlowWriterStall}, Writer: true,
		Deadline: stopDeadline, Cause: receipt.CauseDeadline, NoDeliverable: true,
		reads: writerReads, verify: verifyWriterStop})
}
