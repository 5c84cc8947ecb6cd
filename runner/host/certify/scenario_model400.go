package certify

import "github.com/sandproof/sandproof/runner/model"

// ScenarioModel400 is model-400 (contract §7.6 scenarios): the model
// answers the first request that carries a tool's result with a
// context-length error; the harness must compact and finish, or exit on
// it as a model error (scenario.model_fault).
const ScenarioModel400 = "model-400"

func init() {
	register(Scenario{Name: ScenarioModel400, Order: 50, Script: model.Script{Fault: model.Fault400, On: model.TargetResult, Only: []int{1}},
		Fault: model.Fault400, NoDeliverable: true,
		verify: verifyModelFault})
}
