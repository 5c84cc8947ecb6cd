package certify

import (
	"github.com/sandproof/sandproof/runner/model"
	"github.com/sandproof/sandproof/runner/warden/receipt"
)

// ScenarioTimeout is timeout (contract §7.6 scenarios): the model has the
// harness start a detached writer, then stalls; once the owner's looks saw
// the writer write, the owner brings the launch's deadline forward to
// stallStopAfter from then (`warden renew --deadline`), and that deadline
// stops the harness; the stop must end the writer too (the writer
// family's checks, scenario.stop with cause deadline, the partial
// transcript).
const ScenarioTimeout = "timeout"

// stallCeiling is the launch deadline of timeout and cancel: a ceiling on
// reaching the stall, not the stop, which comes a fixed time after it. It
// is paid only by a harness that never reaches the stall, so it is
// generous: at load 60-80 on two cores OpenClaw made no model request
// within 90 s.
const stallCeiling = 180

func init() {
	register(Scenario{Name: ScenarioTimeout, Order: 20, Script: model.Script{Flow: model.FlowWriterStall}, Writer: true,
		Deadline: stallCeiling, Cause: receipt.CauseDeadline, NoDeliverable: true,
		reads: writerReads, verify: verifyWriterStop})
}
