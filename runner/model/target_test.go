package model_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/model"
)

// A fault scripted on a target (model-429 on the task, model-400 on the
// challenge's tool result; contract §7.6 scenarios) lands on the request
// that carries it, decided from the request's content in each wire format
// the model speaks. Issue 35's D1 and D2: a harness sent one or two
// throw-away requests with no tools first and ignored their answers; the
// fault, scripted by request number, fell on them and the harness's own
// loop never met it.

// wire builds the requests of one API: a throw-away with no tools, one
// with tools but no task, the task's first turn, and the turn that
// carries the read's result (the challenge, or text without it).
type wire struct {
	name, path string
	warmUp     func() map[string]any
	task       func(prompt string, result string) map[string]any
}

const targetChallenge = model.ChallengePrefix + "0123456789abcdef0123456789abcdef"

var readArgs = `{"path":"/task/challenge.txt"}`

var wires = []wire{
	{"chat completions", "/chat/completions",
		func() map[string]any {
			return map[string]any{"model": "fake-model", "messages": []any{map[string]any{"role": "user", "content": "warm-up"}}}
		},
		func(prompt, result string) map[string]any {
			msgs := []any{map[string]any{"role": "system", "content": "You are a harness."},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": prompt}}}}
			if result != "" {
				msgs = append(msgs,
					map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
						"function": map[string]any{"name": "read", "arguments": readArgs}}}},
					map[string]any{"role": "tool", "tool_call_id": "call_1", "content": result})
			}
			return map[string]any{"model": "fake-model", "messages": msgs, "tools": readWriteTools}
		}},
	{"responses", "/responses",
		func() map[string]any { return map[string]any{"model": "fake-model", "input": "warm-up"} },
		func(prompt, result string) map[string]any {
			items := []any{map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": prompt}}}}
			if result != "" {
				items = append(items,
					map[string]any{"type": "function_call", "call_id": "call_1", "name": "read", "arguments": readArgs},
					map[string]any{"type": "function_call_output", "call_id": "call_1", "output": result})
			}
			return map[string]any{"model": "fake-model", "input": items, "tools": []any{
				map[string]any{"type": "function", "name": "read", "parameters": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}},
				map[string]any{"type": "function", "name": "write", "parameters": map[string]any{"type": "object", "properties": map[string]any{
					"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}}}}}
		}},
	{"messages", "/messages",
		func() map[string]any {
			return map[string]any{"model": "fake-model", "max_tokens": 1, "messages": []any{map[string]any{"role": "user", "content": "quota"}}}
		},
		func(prompt, result string) map[string]any {
			msgs := []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": prompt}}}}
			if result != "" {
				msgs = append(msgs,
					map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Read",
						"input": map[string]any{"file_path": "/task/challenge.txt"}}}},
					map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1",
						"content": []any{map[string]any{"type": "text", "text": result}}}}})
			}
			return map[string]any{"model": "fake-model", "max_tokens": 1024, "messages": msgs, "system": "You are a harness.", "tools": []any{
				map[string]any{"name": "Read", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"file_path": map[string]any{"type": "string"}}}},
				map[string]any{"name": "Write", "input_schema": map[string]any{"type": "object", "properties": map[string]any{
					"file_path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}}}}}
		}},
	{"gemini", "/v1beta/models/fake-model:streamGenerateContent?alt=sse",
		func() map[string]any {
			return map[string]any{"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "warm-up"}}}}}
		},
		func(prompt, result string) map[string]any {
			contents := []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": prompt}}}}
			if result != "" {
				contents = append(contents,
					map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": "read_file",
						"args": map[string]any{"file_path": "/task/challenge.txt"}}}}},
					map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"name": "read_file",
						"response": map[string]any{"output": result}}}}})
			}
			return map[string]any{"contents": contents, "tools": geminiCLITools}
		}},
}

// wireURL is a wire's URL at the model: below its base URL, or at its
// origin for Gemini's paths (their clients put "/v1beta" in themselves).
func wireURL(s *model.Server, path string) string {
	if strings.HasPrefix(path, "/v1beta/") {
		return "http://" + s.Addr() + path
	}
	return s.URL() + path
}

// withoutTools is req with no tools declared: OpenCode's and Kilo's
// title requests carry the user's prompt and none.
func withoutTools(req map[string]any) map[string]any {
	delete(req, "tools")
	return req
}

// step is one request of a flow and the status and what it carries the
// model must record for it.
type step struct {
	what    string
	req     map[string]any
	status  int
	carries model.Target
	counted int
}

func runSteps(t *testing.T, s *model.Server, w wire, steps []step) {
	t.Helper()
	for i, st := range steps {
		a := post(t, wireURL(s, w.path), st.req, nil)
		if a.status != st.status {
			t.Errorf("%s: request %d (%s) answered %d %.200s; want %d", w.name, i+1, st.what, a.status, a.body, st.status)
		}
		// The fault's answer, and it alone, carries its mark.
		if mark, want := a.header.Get(model.FaultHeader), map[bool]string{true: fmt.Sprint(st.status)}[st.status/100 != 2]; mark != want {
			t.Errorf("%s: request %d (%s) answered with %s %q; want %q", w.name, i+1, st.what, model.FaultHeader, mark, want)
		}
	}
	calls := s.Calls()
	if len(calls) != len(steps) {
		t.Fatalf("%s: %d calls recorded, want %d", w.name, len(calls), len(steps))
	}
	for i, c := range calls {
		if c.Seq != i+1 || c.Carries != steps[i].carries || c.Counted != steps[i].counted || (c.Fault != model.FaultNone) != (c.Status/100 != 2) {
			t.Errorf("%s: request %d (%s) recorded %+v; want carries %q, counted %d", w.name, i+1, steps[i].what, c, steps[i].carries, steps[i].counted)
		}
	}
}

func TestFaultOnTheTaskSkipsRequestsThatCarryNone(t *testing.T) {
	prompt := model.ChallengePrompt("/task/challenge.txt", "/task/deliverable.txt")
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			s := start(t, model.Options{Script: model.Script{Fault: model.Fault429, On: model.TargetTask, Only: []int{1}}})
			noTask := w.task("hello, what can you do?", "")
			runSteps(t, s, w, []step{
				{"a warm-up with no tools", w.warmUp(), 200, model.TargetAny, 0},
				{"a second warm-up", w.warmUp(), 200, model.TargetAny, 0},
				{"tools, but no challenge prompt", noTask, 200, model.TargetAny, 0},
				{"the prompt, but no tools (a title request)", withoutTools(w.task(prompt, "")), 200, model.TargetAny, 0},
				{"the task's first turn", w.task(prompt, ""), 429, model.TargetTask, 1},
				{"its retry", w.task(prompt, ""), 200, model.TargetTask, 2},
				{"the read's result", w.task(prompt, targetChallenge), 200, model.TargetResult, 3},
			})
		})
	}
}

func TestFaultOnTheResultSkipsTheTurnsBefore(t *testing.T) {
	prompt := model.ChallengePrompt("/task/challenge.txt", "/task/deliverable.txt")
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			s := start(t, model.Options{Script: model.Script{Fault: model.Fault400, On: model.TargetResult, Only: []int{1}}})
			runSteps(t, s, w, []step{
				{"a warm-up", w.warmUp(), 200, model.TargetAny, 0},
				{"the task's first turn", w.task(prompt, ""), 200, model.TargetTask, 0},
				{"a result without the challenge", w.task(prompt, "no such file"), 200, model.TargetTask, 0},
				{"a second warm-up", w.warmUp(), 200, model.TargetAny, 0},
				{"the read's result, the challenge in it", w.task(prompt, targetChallenge+"\n"), 400, model.TargetResult, 1},
				{"the same again", w.task(prompt, targetChallenge+"\n"), 200, model.TargetResult, 2},
			})
		})
	}
}

// A script by number keeps counting every request, as before targets.
func TestFaultByNumberCountsEveryRequest(t *testing.T) {
	w := wires[0]
	s := start(t, model.Options{Script: model.Script{Fault: model.Fault429, Only: []int{1}}})
	runSteps(t, s, w, []step{
		{"a warm-up", w.warmUp(), 429, model.TargetAny, 0},
		{"the task", w.task(model.ChallengePrompt("/task/challenge.txt", "/task/deliverable.txt"), ""), 200, model.TargetTask, 0},
	})
}

func TestParseScriptTargets(t *testing.T) {
	for in, want := range map[string]model.Script{
		"429@task":       {Fault: model.Fault429, On: model.TargetTask, Only: []int{1}},
		"400@result":     {Fault: model.Fault400, On: model.TargetResult, Only: []int{1}},
		"500@task:1,3":   {Fault: model.Fault500, On: model.TargetTask, Only: []int{1, 3}},
		"stall@result:2": {Fault: model.FaultStall, On: model.TargetResult, Only: []int{2}},
	} {
		s, err := model.ParseScript(in)
		if err != nil || s.String() != in || s.On != want.On || s.Fault != want.Fault || fmt.Sprint(s.Only) != fmt.Sprint(want.Only) {
			t.Errorf("ParseScript(%q) = %+v (%s), %v; want %+v", in, s, s, err, want)
		}
	}
	for _, bad := range []string{"429@task:", "429@task:0", "429@tasks", "429@result:x", "default@task"} {
		if s, err := model.ParseScript(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseScript(%q) = %+v, %v; want an error quoting it", bad, s, err)
		}
	}
}
