package certify

import (
	"fmt"
	"slices"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/model"
)

// checkToolsUnderstood is the check that says the scripted model found no
// declared tool it can call (model.Call.Limit): its limit, not the
// harness's fault.
const checkToolsUnderstood = "model.tools_understood"

// modelDriven are the checks whose pass needs the scripted model to have
// driven the harness's tools through the task: the chain (§7.4) and the
// scenario checks that follow the model's flow. The owner's own checks
// (processes, files, markers, the canary, the borrowed service) judge the
// harness whatever the model did, and are not among them.
var modelDriven = []string{
	"verify.challenge_asked", "verify.challenge_round_trip", "verify.write_after_challenge", "verify.deliverable",
	"scenario.stop", "scenario.writer_started", "scenario.writer_stopped", "scenario.partial_transcript", "scenario.model_fault",
}

// modelLimit is the first limit the scripted model recorded (its own
// record, never the harness's): "" when it could call a tool at every
// step, or when the model is a real one (no record).
func modelLimit(calls []model.Call) (seq int, limit string) {
	for _, c := range calls {
		if c.Limit != "" {
			return c.Seq, c.Limit
		}
	}
	return 0, ""
}

// limitChecks files a case the scripted model could not drive as the
// model's limit (contract §7.2; docs/contract.md, Decisions: a case the
// scripted model cannot drive is unknown): when the model recorded one
// in calls (modelLimit) and a check it had to drive failed, those checks become unknown, their
// detail saying why, and model.tools_understood, unknown, comes first
// among them so the report's headline names the limit. A case whose
// checks all passed despite a limit (a side request with fewer tools)
// is left as it is, and so is every check the owner judges alone: judge
// fails the case on any of them.
func limitChecks(checks []reports.Check, calls []model.Call) []reports.Check {
	seq, limit := modelLimit(calls)
	if limit == "" {
		return checks
	}
	first := -1
	for i, c := range checks {
		if c.Status == reports.StatusFailed && slices.Contains(modelDriven, c.ID) {
			if first < 0 {
				first = i
			}
			checks[i].Status = reports.StatusUnknown
			checks[i].Detail = c.Detail + " (not judged: the scripted model could not drive the harness's tools, " + checkToolsUnderstood + ")"
		}
	}
	if first < 0 {
		return checks
	}
	limitCheck := reports.Check{ID: checkToolsUnderstood, Status: reports.StatusUnknown, Clause: clauseSeed,
		Detail: fmt.Sprintf("model call %d: %s; the scripted model's limit, not the harness's fault: nothing of the task was proven either way", seq, limit)}
	return slices.Insert(checks, first, limitCheck)
}

// modelLimited says judge found the scripted model's limit among the
// checks (limitChecks).
func modelLimited(checks []reports.Check) bool {
	return slices.ContainsFunc(checks, func(c reports.Check) bool {
		return c.ID == checkToolsUnderstood && c.Status == reports.StatusUnknown
	})
}
