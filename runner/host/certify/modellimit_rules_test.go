package certify

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/model"
)

// The scripted model's limit, as it recorded it for Cline 3.0.65 before
// issue 38 (its tools' shapes; the model answered in text).
const clineLimit = "the scripted model found no read or shell tool it can call among: read_files{files:[{path}]}, run_commands{commands:[string]}, editor{path,new_text}"

// limitCase is a case the model did not drive: its chain's checks failed
// as they do when the model never asked for a tool call, plus owner.
func limitCase(owner reports.Status) *reports.Evidence {
	ev := &reports.Evidence{Status: reports.StatusUnknown}
	for _, c := range []struct {
		id     string
		status reports.Status
	}{
		{"setup", reports.StatusPassed}, {"activation.result", reports.StatusPassed}, {"verify.model_called", reports.StatusPassed},
		{"verify.challenge_asked", reports.StatusFailed}, {"verify.challenge_round_trip", reports.StatusFailed},
		{"verify.write_after_challenge", reports.StatusFailed}, {"verify.deliverable", reports.StatusFailed},
		{"verify.no_new_processes", owner}, {"secrets.canary", reports.StatusPassed},
	} {
		ev.Checks = append(ev.Checks, reports.Check{ID: c.id, Status: c.status, Clause: clauseVerify, Detail: "detail of " + c.id})
	}
	return ev
}

// A case the scripted model could not drive is the model's limit, not
// the harness's fault: unknown (never passed), error_type model_limit,
// its headline the model's own reason with the tools' shapes, and each
// check of the chain unknown, keeping its own detail and saying why.
// What the owner judges alone still fails it; a limit the case did not
// need (every check passed) changes nothing; and without a limit the
// chain's failures fail the case as before.
func TestModelLimitIsFiledAsTheModelsNotTheHarnesss(t *testing.T) {
	calls := []model.Call{{Seq: 1, Reply: "title"}, {Seq: 2, Reply: "no_task", Limit: clineLimit}}
	seq, limit := modelLimit(calls)
	if seq != 2 || limit != clineLimit {
		t.Fatalf("modelLimit = %d %q, want call 2's limit", seq, limit)
	}

	ev := limitCase(reports.StatusPassed)
	ev.Checks = limitChecks(ev.Checks, calls)
	judge(ev, "")
	if ev.Status != reports.StatusUnknown || ev.Passed || ev.ErrorType == nil || *ev.ErrorType != "model_limit" {
		t.Fatalf("status %s, passed %t, error_type %v; want unknown, model_limit", ev.Status, ev.Passed, ev.ErrorType)
	}
	head := reports.CauseHeadline(&reports.Case{Evidence: ev})
	if !strings.HasPrefix(head, checkToolsUnderstood+" unknown: model call 2: "+clineLimit) || !strings.Contains(head, "not the harness's fault") {
		t.Errorf("headline %q does not give the model's limit first", head)
	}
	for _, c := range ev.Checks {
		if slices.Contains(modelDriven, c.ID) && (c.Status != reports.StatusUnknown || !strings.HasPrefix(c.Detail, "detail of "+c.ID) || !strings.Contains(c.Detail, checkToolsUnderstood)) {
			t.Errorf("%s: %s %q; want unknown, its detail kept and naming %s", c.ID, c.Status, c.Detail, checkToolsUnderstood)
		}
	}
	if got, _ := reports.Judge(ev); got != reports.StatusUnknown {
		t.Errorf("reports.Judge = %s, want unknown", got)
	}

	ev = limitCase(reports.StatusFailed)
	ev.Checks = limitChecks(ev.Checks, calls)
	judge(ev, "")
	if ev.Status != reports.StatusFailed || !slices.Equal(failedChecks(ev), []string{"verify.no_new_processes"}) {
		t.Errorf("with a new process left: status %s, failed %q; want failed on verify.no_new_processes alone", ev.Status, failedChecks(ev))
	}

	ev = &reports.Evidence{Checks: []reports.Check{{ID: "verify.challenge_asked", Status: reports.StatusPassed}, {ID: "verify.deliverable", Status: reports.StatusPassed}}}
	ev.Checks = limitChecks(ev.Checks, calls)
	judge(ev, "")
	if ev.Status != reports.StatusPassed || len(ev.Checks) != 2 {
		t.Errorf("a limit the case did not need: status %s, %d checks; want passed, unchanged", ev.Status, len(ev.Checks))
	}

	ev = limitCase(reports.StatusPassed)
	ev.Checks = limitChecks(ev.Checks, nil)
	judge(ev, "")
	if ev.Status != reports.StatusFailed || len(failedChecks(ev)) != 4 {
		t.Errorf("no limit: status %s, failed %q; want the chain's four failures", ev.Status, failedChecks(ev))
	}
}

// Through the scripted model and the relay, in each API shape: a harness
// that declares only a tool the model cannot call (a path alone says
// nothing of reading) gets a text answer, and the case's checks give the
// model's own recorded limit, with the tool's shape, not the harness's
// fault: model.tools_understood heads the chain's checks, all unknown.
func TestModelLimitReachesTheChecksThroughTheRelay(t *testing.T) {
	image := map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []any{"path"}}
	tools := map[string][]any{
		"chat completions":   {map[string]any{"type": "function", "function": map[string]any{"name": "view_image", "description": "View a local image.", "parameters": image}}},
		"responses":          {map[string]any{"type": "function", "name": "view_image", "description": "View a local image.", "parameters": image}},
		"anthropic messages": {map[string]any{"name": "view_image", "description": "View a local image.", "input_schema": image}},
	}
	for _, shape := range apiShapes {
		t.Run(shape.name, func(t *testing.T) {
			c := newConv(t, shape)
			req := shape.build(c.prompt, nil).(map[string]any)
			req["tools"] = tools[shape.name]
			b, _ := json.Marshal(req)
			resp, err := http.Post(c.rel.URL()+shape.path, "application/json", strings.NewReader(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			c.rel.Close()
			ev := &reports.Evidence{}
			cr := &caseRun{ev: ev}
			cr.loopChecks(analyse(c.rel.Calls(), c.challenge, c.token, "scripted"), c.token)
			ev.Checks = append(ev.Checks, reports.Check{ID: "verify.deliverable", Status: reports.StatusFailed, Clause: clauseVerify, Detail: "no deliverable"})
			ev.Checks = limitChecks(ev.Checks, c.srv.Calls())
			judge(ev, "")
			want := "model call 1: the scripted model found no read or shell tool it can call among: view_image{path}"
			head := reports.CauseHeadline(&reports.Case{Evidence: ev})
			if ev.Status != reports.StatusUnknown || !strings.HasPrefix(head, checkToolsUnderstood+" unknown: "+want) {
				t.Fatalf("status %s, headline %q; want unknown, headed by %q", ev.Status, head, want)
			}
			if failed := failedChecks(ev); len(failed) > 0 {
				t.Errorf("failed checks %q: the harness is blamed for the model's limit", failed)
			}
		})
	}
}
