package certify

import "github.com/sandproof/sandproof/runner/model"

// ScenarioModel429 is model-429 (contract §7.6 scenarios): the model
// answers the task's first request with a rate limit and a Retry-After;
// the harness must retry no sooner and finish, or exit on it as a model
// error (scenario.model_fault).
const ScenarioModel429 = "model-429"

func init() {
	register(Scenario{Name: ScenarioModel429, Order: 40, Script: model.Script{Fault: model.Fault429, On: model.TargetTask, Only: []int{1}},
		Fault: model.Fault429, NoDeliverable: true,
		verify: verifyModelFault})
}
