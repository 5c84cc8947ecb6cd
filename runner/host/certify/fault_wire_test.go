package certify

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/host/relay"
	"github.com/sandproof/sandproof/runner/model"
)

// scenario.model_fault's continuation rules (continues, compacts) over
// what the relay records of real requests, in each wire format the
// scripted model speaks, with the scenarios' own scripts: the fault
// lands on the task (model-429) or the challenge's tool result
// (model-400) after a warm-up that carries none, a retry with other ids
// and cache markers continues the faulted conversation, a reworded
// prompt too, a compaction (Pi's summary before the turns it kept, a cut
// to the prompt) compacts it, and the same request sent again, or a
// conversation that keeps nothing of it, does not.

// wireTurns is a conversation to build: the prompt (and a summary
// before it), and the tool rounds after it.
type wireTurns struct {
	summary, prompt string
	rounds          [][3]string // tool, arguments, result
	id              string      // the tool calls' id prefix
	marker          bool        // Anthropic cache markers on the blocks
}

var faultWires = []struct {
	name, path string
	build      func(w wireTurns) any
}{
	{"chat completions", "/chat/completions", func(w wireTurns) any {
		msgs := []any{map[string]any{"role": "system", "content": "You are a harness."}}
		for _, u := range []string{w.summary, w.prompt} {
			if u != "" {
				msgs = append(msgs, map[string]any{"role": "user", "content": u})
			}
		}
		for i, r := range w.rounds {
			id := fmt.Sprintf("%s%d", w.id, i)
			msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": r[0], "arguments": r[1]}}}},
				map[string]any{"role": "tool", "tool_call_id": id, "content": r[2]})
		}
		return map[string]any{"model": "fake-model", "messages": msgs, "tools": []any{
			map[string]any{"type": "function", "function": map[string]any{"name": "read", "parameters": readSchema}},
			map[string]any{"type": "function", "function": map[string]any{"name": "write", "parameters": writeSchema}}}}
	}},
	{"responses", "/responses", func(w wireTurns) any {
		var items []any
		for _, u := range []string{w.summary, w.prompt} {
			if u != "" {
				items = append(items, map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": u}}})
			}
		}
		for i, r := range w.rounds {
			id := fmt.Sprintf("%s%d", w.id, i)
			items = append(items, map[string]any{"type": "function_call", "call_id": id, "name": r[0], "arguments": r[1]},
				map[string]any{"type": "function_call_output", "call_id": id, "output": r[2]})
		}
		return map[string]any{"model": "fake-model", "instructions": "You are a harness.", "input": items, "tools": []any{
			map[string]any{"type": "function", "name": "read", "parameters": readSchema},
			map[string]any{"type": "function", "name": "write", "parameters": writeSchema}}}
	}},
	{"anthropic messages", "/messages", func(w wireTurns) any {
		block := func(b map[string]any) map[string]any {
			if w.marker {
				b["cache_control"] = map[string]any{"type": "ephemeral"}
			}
			return b
		}
		var msgs []any
		for _, u := range []string{w.summary, w.prompt} {
			if u != "" {
				msgs = append(msgs, map[string]any{"role": "user", "content": []any{block(map[string]any{"type": "text", "text": u})}})
			}
		}
		for i, r := range w.rounds {
			id := fmt.Sprintf("%s%d", w.id, i)
			msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": r[0], "input": json.RawMessage(r[1])}}},
				map[string]any{"role": "user", "content": []any{block(map[string]any{"type": "tool_result", "tool_use_id": id,
					"content": []any{map[string]any{"type": "text", "text": r[2]}}})}})
		}
		return map[string]any{"model": "fake-model", "max_tokens": 1000, "system": "You are a harness.", "messages": msgs, "tools": []any{
			map[string]any{"name": "read", "input_schema": readSchema},
			map[string]any{"name": "write", "input_schema": writeSchema}}}
	}},
	// Gemini's calls have no ids; Gemini CLI names them itself.
	{"gemini", geminiPath, func(w wireTurns) any {
		var contents []any
		for _, u := range []string{w.summary, w.prompt} {
			if u != "" {
				contents = append(contents, map[string]any{"role": "user", "parts": []any{map[string]any{"text": u}}})
			}
		}
		for i, r := range w.rounds {
			id := fmt.Sprintf("%s__%s%d", r[0], w.id, i)
			contents = append(contents, map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{
				"id": id, "name": r[0], "args": json.RawMessage(r[1])}}}},
				map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"id": id, "name": r[0],
					"response": map[string]any{"output": r[2]}}}}})
		}
		return map[string]any{"systemInstruction": map[string]any{"parts": []any{map[string]any{"text": "You are a harness."}}},
			"contents": contents, "tools": []any{map[string]any{"functionDeclarations": []any{
				map[string]any{"name": "read", "parametersJsonSchema": readSchema},
				map[string]any{"name": "write", "parametersJsonSchema": writeSchema}}}}}
	}},
}

// geminiPath is Gemini's turn, below the origin: its clients put the
// version in the path themselves (wire.Endpoint.Root).
const geminiPath = "/v1beta/models/fake-model:generateContent"

// wireURL is path's URL at base (the relay's "http://HOST:PORT/v1"), or
// at its origin for a path of Gemini's.
func wireURL(base, path string) string {
	if strings.HasPrefix(path, "/v1beta/") {
		return strings.TrimSuffix(base, "/v1") + path
	}
	return base + path
}

// wireFlow sends each conversation through a relay in front of the
// scripted model with script, in order, and returns the relay's record
// and the statuses answered.
func wireFlow(t *testing.T, script model.Script, path string, bodies []any) ([]relay.Call, []int) {
	t.Helper()
	srv, err := model.Start(model.Options{Script: script})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	rel, err := relay.Start(relay.Options{Upstream: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer rel.Close()
	var status []int
	for _, b := range bodies {
		raw, _ := json.Marshal(b)
		resp, err := http.Post(wireURL(rel.URL(), path), "application/json", strings.NewReader(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		status = append(status, resp.StatusCode)
	}
	calls := rel.Calls()
	if len(calls) != len(bodies) {
		t.Fatalf("relay recorded %d calls, want %d", len(calls), len(bodies))
	}
	return calls, status
}

func TestFaultContinuationInEveryWireFormat(t *testing.T) {
	prompt := model.ChallengePrompt(ChallengeFile, Deliverable)
	ch := model.ChallengePrefix + strings.Repeat("7c", 16)
	read := [3]string{"read", `{"path":"` + ChallengeFile + `"}`, ch + "\n"}
	spaced := [3]string{"read", `{ "path" : "` + ChallengeFile + `" }`, ch + "\n"}
	list := [3]string{"read", `{"path":"/task"}`, "challenge.txt\n"}
	warmUp := map[string]any{"model": "fake-model", "messages": []any{map[string]any{"role": "user", "content": "warm-up"}}}
	for _, w := range faultWires {
		t.Run(w.name, func(t *testing.T) {
			warm := warmUp
			if w.path == "/responses" {
				warm = map[string]any{"model": "fake-model", "input": "warm-up"}
			}
			if w.path == geminiPath {
				warm = map[string]any{"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "warm-up"}}}}}
			}
			// model-429 (the scenario's own script): the warm-up is
			// answered, the task's first turn takes the 429 (request 2).
			sc429, _ := ScenarioByName(ScenarioModel429)
			sc400, _ := ScenarioByName(ScenarioModel400)
			calls, status := wireFlow(t, sc429.Script, w.path, []any{
				warm,
				w.build(wireTurns{prompt: prompt, id: "a"}),
				w.build(wireTurns{prompt: prompt, id: "b", marker: true}),
				w.build(wireTurns{prompt: prompt, id: "c", rounds: [][3]string{spaced}}),
				w.build(wireTurns{prompt: "[Sat 00:43] [Queued user message] " + prompt, id: "d"}),
			})
			if fmt.Sprint(status) != "[200 429 200 200 200]" {
				t.Fatalf("model-429's script answered %v; want the warm-up 200, the task's first turn 429, the rest 200", status)
			}
			f := calls[1]
			if marked := faultMarks(calls); marked != "[ 429   ]" {
				t.Errorf("429: the relay recorded the faults' marks %s; want the 429's alone", marked)
			}
			for i, want := range []bool{false, false, true, true, true} {
				if got := continues(f, calls[i]); got != want {
					t.Errorf("429: request %d (history %q) continues the 429's (%q): %t, want %t", i+1, calls[i].History, f.History, got, want)
				}
			}
			// model-400: the warm-up and the task's first turn are
			// answered, the turn that carries the challenge takes the 400
			// (request 3).
			calls, status = wireFlow(t, sc400.Script, w.path, []any{
				warm,
				w.build(wireTurns{prompt: prompt, id: "a"}),
				w.build(wireTurns{prompt: prompt, id: "a", rounds: [][3]string{read}}),
				w.build(wireTurns{prompt: prompt, id: "b", marker: true, rounds: [][3]string{spaced}}),
				w.build(wireTurns{summary: "Summary: the challenge was read.", prompt: prompt, id: "c", rounds: [][3]string{read}}),
				w.build(wireTurns{prompt: prompt, id: "d"}),
				w.build(wireTurns{prompt: "Another task entirely: list /task.", id: "e", rounds: [][3]string{list}}),
			})
			if fmt.Sprint(status) != "[200 200 400 200 200 200 200]" {
				t.Fatalf("model-400's script answered %v; want the 400 on the turn that carries the challenge only", status)
			}
			f = calls[2]
			if marked := faultMarks(calls); marked != "[  400    ]" {
				t.Errorf("400: the relay recorded the faults' marks %s; want the 400's alone", marked)
			}
			for i, want := range []bool{false, false, false, false, true, true, false} {
				if got := compacts(f, calls[i]); got != want {
					t.Errorf("400: request %d (history %q) compacts the 400's (%q): %t, want %t", i+1, calls[i].History, f.History, got, want)
				}
			}
			if !continues(f, calls[3]) {
				t.Errorf("400: the same request sent again (%q) does not continue the 400's (%q): the replay is not read as one", calls[3].History, f.History)
			}
		})
	}
}

// faultMarks lists the relay's record of each call's fault mark.
func faultMarks(calls []relay.Call) string {
	var m []string
	for _, c := range calls {
		m = append(m, c.Fault)
	}
	return fmt.Sprint(m)
}

// The one definition of a retry and of a compaction over turn digests.
func TestContinuesAndCompacts(t *testing.T) {
	at := func(seq, sentMs, deliveredMs int, turns ...string) relay.Call {
		c := sentAt(with(answered(seq, 200, deliveredMs), turns...), sentMs)
		return c
	}
	f := at(1, 0, 10, tPrompt, tRead, tChal)
	for _, tc := range []struct {
		name                string
		l                   relay.Call
		continues, compacts bool
	}{
		{"sent again", at(2, 20, 30, tPrompt, tRead, tChal), true, false},
		{"a later step", at(2, 20, 30, tPrompt, tRead, tChal, tWrite, tWrote), true, false},
		{"the prompt reworded", at(2, 20, 30, tStamped, tRead, tChal), true, false},
		{"sent before the answer reached the harness", at(2, 5, 30, tPrompt, tRead, tChal), false, false},
		{"the model's turn not the same", at(2, 20, 30, tPrompt, tList, tChal), false, true},
		{"a summary before the turns kept", at(2, 20, 30, tSummary, tPrompt, tRead, tChal), false, true},
		{"cut to the prompt", at(2, 20, 30, tPrompt), false, true},
		{"cut to the prompt re-stamped", at(2, 20, 30, tStamped), false, false},
		{"nothing of it kept", at(2, 20, 30, tOther, tList, tListed), false, false},
		{"the same request", at(1, 20, 30, tPrompt, tRead, tChal), false, false},
		{"no history recorded", at(2, 20, 30), false, false},
	} {
		if got := continues(f, tc.l); got != tc.continues {
			t.Errorf("%s: continues %t, want %t", tc.name, got, tc.continues)
		}
		if got := compacts(f, tc.l); got != tc.compacts {
			t.Errorf("%s: compacts %t, want %t", tc.name, got, tc.compacts)
		}
	}
	undelivered := f
	undelivered.Delivered = false
	if continues(undelivered, at(2, 20, 30, tPrompt, tRead, tChal)) || compacts(undelivered, at(2, 20, 30, tPrompt)) {
		t.Error("an answer the harness never had whole is continued or compacted")
	}
	capped := f
	capped.HistoryDropped = 1
	if continues(capped, at(2, 20, 30, tPrompt, tRead, tChal, tWrite)) {
		t.Error("a history past the record's cap is continued: its turns past the cap are unknown")
	}
	if continues(relay.Call{Seq: 1, Delivered: true}, at(2, 20, 30, tPrompt)) {
		t.Error("a request with no history is continued by any")
	}
	// The order is causal: the answer written whole before the request
	// was received whole. The relay stamps DeliveredAt after the
	// upstream's end and a look at the connection, so a quick harness's
	// compaction (its headers in before that stamp, its body after the
	// write) is an answer to the 400 all the same; a request whole before
	// the answer was written is not, whatever its headers' time.
	quick := f
	quick.WrittenAt, quick.DeliveredAt = faultEpoch.Add(10*time.Millisecond), faultEpoch.Add(15*time.Millisecond)
	l := at(2, 11, 30, tPrompt)
	l.ReceivedAt = faultEpoch.Add(12 * time.Millisecond)
	if !compacts(quick, l) {
		t.Error("a compaction received whole after the 400 was written, its headers before the delivery stamp, is not one")
	}
	early := at(2, 11, 30, tPrompt)
	early.ReceivedAt = faultEpoch.Add(9 * time.Millisecond)
	if compacts(quick, early) {
		t.Error("a request received whole before the 400 was written compacts it")
	}
}
