package certify

import (
	"github.com/sandproof/sandproof/runner/model"
	"github.com/sandproof/sandproof/runner/warden/receipt"
)

// ScenarioCancel is cancel (contract §7.6 scenarios): as timeout, but the
// owner closes the session as soon as the model stalls, as an environment
// server closes before verification (cause stopped).
const ScenarioCancel = "cancel"

func init() {
	register(Scenario{Name: ScenarioCancel, Order: 30, Script: model.Script{Flow: model.FlowWriterStall}, Writer: true,
		ClosesAtStall: true, Deadline: stallCeiling, Cause: receipt.CauseStopped, NoDeliverable: true,
		reads: writerReads, verify: verifyWriterStop})
}
