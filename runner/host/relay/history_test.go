package relay_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/relay"
	"github.com/sandproof/sandproof/runner/model"
)

// The relay records each request's conversation as one digest a turn
// (Call.History), what scenario.model_fault reads a retry and a
// compaction from (contract §7.6 scenarios). In each wire format: the
// same conversation sent again with other ids, cache markers, argument
// spacing and system prompt has the same digests; a later step begins
// with them; a reworded prompt changes its user turn only, another tool
// result its result turn only; past MaxHistory turns are counted, not
// kept.

// convo is a conversation to build in one wire format.
type convo struct {
	system, prompt string
	id             string // the tool call's id
	args           string // the read's arguments, a JSON text
	result         string
	marker         bool // cache markers on the blocks (Anthropic's cache_control)
	more           bool // a second step: the write call and its result
}

func (c convo) steps() [][3]string { // name, arguments, result
	s := [][3]string{{"read", c.args, c.result}}
	if c.more {
		s = append(s, [3]string{"write", `{"path":"/task/d.txt","content":"x"}`, "Wrote 1 byte"})
	}
	return s
}

var historyWires = []struct {
	name, path string
	build      func(c convo) any
}{
	{"chat completions", "/chat/completions", func(c convo) any {
		msgs := []any{map[string]any{"role": "system", "content": c.system}, map[string]any{"role": "user", "content": c.prompt}}
		for i, s := range c.steps() {
			id := fmt.Sprintf("%s_%d", c.id, i)
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": id, "type": "function",
					"function": map[string]any{"name": s[0], "arguments": s[1]}}}},
				map[string]any{"role": "tool", "tool_call_id": id, "content": s[2]})
		}
		return map[string]any{"model": "m", "messages": msgs}
	}},
	{"responses", "/responses", func(c convo) any {
		items := []any{map[string]any{"type": "message", "role": "developer", "content": c.system},
			map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": c.prompt}}}}
		for i, s := range c.steps() {
			id := fmt.Sprintf("%s_%d", c.id, i)
			items = append(items, map[string]any{"type": "reasoning", "id": "rs_" + id, "summary": []any{}},
				map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": id, "name": s[0], "arguments": s[1]},
				map[string]any{"type": "function_call_output", "call_id": id, "output": s[2]})
		}
		return map[string]any{"model": "m", "instructions": c.system, "input": items}
	}},
	{"anthropic messages", "/messages", func(c convo) any {
		block := func(b map[string]any) map[string]any {
			if c.marker {
				b["cache_control"] = map[string]any{"type": "ephemeral"}
			}
			return b
		}
		msgs := []any{map[string]any{"role": "user", "content": []any{block(map[string]any{"type": "text", "text": c.prompt})}}}
		for i, s := range c.steps() {
			id := fmt.Sprintf("%s_%d", c.id, i)
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": s[0], "input": json.RawMessage(s[1])}}},
				map[string]any{"role": "user", "content": []any{block(map[string]any{"type": "tool_result", "tool_use_id": id,
					"content": []any{map[string]any{"type": "text", "text": s[2]}}})}})
		}
		return map[string]any{"model": "m", "system": c.system, "messages": msgs}
	}},
	// Gemini's path is below the origin, its model in it; the ids are
	// the client's (Gemini CLI names its calls), a thought part of the
	// model's says nothing, and the args and response are objects.
	{"gemini", "/v1beta/models/m:generateContent", func(c convo) any {
		contents := []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": c.prompt}}}}
		for i, s := range c.steps() {
			id := fmt.Sprintf("%s_%d", c.id, i)
			contents = append(contents,
				map[string]any{"role": "model", "parts": []any{map[string]any{"text": "thinking " + id, "thought": true},
					map[string]any{"functionCall": map[string]any{"id": id, "name": s[0], "args": json.RawMessage(s[1])}}}},
				map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"id": id, "name": s[0],
					"response": map[string]any{"output": s[2]}}}}})
		}
		return map[string]any{"systemInstruction": map[string]any{"parts": []any{map[string]any{"text": c.system}}}, "contents": contents}
	}},
}

// historyOf sends each body through a relay and returns the recorded
// calls in order.
func historyOf(t *testing.T, path string, bodies ...any) []relay.Call {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{}`)
	}))
	defer up.Close()
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1"})
	for _, b := range bodies {
		raw, _ := json.Marshal(b)
		u := r.URL() + path
		if strings.HasPrefix(path, "/v1beta/") {
			u = "http://" + hostOf(r) + path // below the origin
		}
		resp, err := http.Post(u, "application/json", strings.NewReader(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	calls := r.Calls()
	if len(calls) != len(bodies) {
		t.Fatalf("%d calls recorded, want %d", len(calls), len(bodies))
	}
	return calls
}

func kinds(h []string) string {
	var b strings.Builder
	for _, d := range h {
		b.WriteString(d[:1])
	}
	return b.String()
}

func TestRelayRecordsTheConversationTurnByTurn(t *testing.T) {
	base := convo{system: "You are a harness. It is 00:42.", prompt: "Read /task/challenge.txt, then write /task/d.txt.", id: "call",
		args: `{"path":"/task/challenge.txt","limit":10}`, result: "sandproof-challenge-0011"}
	again := base
	again.system, again.id, again.args, again.marker = "You are a harness. It is 00:43.", "toolu_other", `{ "limit": 10,  "path": "/task/challenge.txt" }`, true
	later := base
	later.more = true
	reworded := base
	reworded.prompt = "[00:43] " + base.prompt
	otherResult := base
	otherResult.result = "No such file"
	for _, w := range historyWires {
		t.Run(w.name, func(t *testing.T) {
			cs := historyOf(t, w.path, w.build(base), w.build(again), w.build(later), w.build(reworded), w.build(otherResult))
			b := cs[0].History
			if kinds(b) != "uar" || len(b[0]) != 17 {
				t.Fatalf("the conversation's turns %q; want a user turn, the assistant's call, its result, each a kind and 16 hex digits", b)
			}
			if fmt.Sprint(cs[1].History) != fmt.Sprint(b) {
				t.Errorf("sent again with other ids, markers, spacing and system prompt: %q; want %q", cs[1].History, b)
			}
			if kinds(cs[2].History) != "uarar" || fmt.Sprint(cs[2].History[:3]) != fmt.Sprint(b) {
				t.Errorf("a later step: %q; want it to begin with %q", cs[2].History, b)
			}
			if h := cs[3].History; kinds(h) != "uar" || h[0] == b[0] || h[1] != b[1] || h[2] != b[2] {
				t.Errorf("the prompt reworded: %q; want only the user turn changed from %q", h, b)
			}
			if h := cs[4].History; kinds(h) != "uar" || h[0] != b[0] || h[1] != b[1] || h[2] == b[2] {
				t.Errorf("another tool result: %q; want only the result turn changed from %q", h, b)
			}
		})
	}
}

// A Responses input that is one string is one user turn; turns past
// MaxHistory are counted in HistoryDropped, not kept.
func TestRelayHistoryIsBounded(t *testing.T) {
	var msgs []any
	for i := 0; i < relay.MaxHistory+6; i++ {
		msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprintf("turn %d", i)})
	}
	cs := historyOf(t, "/chat/completions", map[string]any{"model": "m", "messages": msgs})
	if len(cs[0].History) != relay.MaxHistory || cs[0].HistoryDropped != 6 {
		t.Errorf("%d turns sent: %d kept, %d dropped; want %d, 6", relay.MaxHistory+6, len(cs[0].History), cs[0].HistoryDropped, relay.MaxHistory)
	}
	one := historyOf(t, "/responses", map[string]any{"model": "m", "input": "hello"})
	if kinds(one[0].History) != "u" {
		t.Errorf("a Responses input string: %q; want one user turn", one[0].History)
	}
}

// The scripted model marks a fault's answer (model.FaultHeader): the
// relay records the mark (Call.Fault) and takes it off the answer the
// harness gets; a 400 without it (a request the model could not read) is
// no fault.
func TestRelayRecordsTheScriptedFaultsMark(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		if req.URL.Query().Get("fault") == "1" {
			w.Header().Set(model.FaultHeader, "400")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"no"}}`)
	}))
	defer up.Close()
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1"})
	for _, q := range []string{"?fault=1", ""} {
		resp, err := http.Post(r.URL()+"/chat/completions"+q, "application/json", strings.NewReader(`{"model":"m"}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || resp.Header.Get(model.FaultHeader) != "" {
			t.Errorf("%q: answered %d with %s %q; want 400 without the mark", q, resp.StatusCode, model.FaultHeader, resp.Header.Get(model.FaultHeader))
		}
	}
	cs := r.Calls()
	if len(cs) != 2 || cs[0].Fault != "400" || cs[1].Fault != "" {
		t.Errorf("recorded %+v; want the first marked 400, the second not", cs)
	}
}

// The scripted model marks its summary's answer and the answer to a
// request resumed from it (model.SummaryHeader, ResumesHeader): the relay
// records both (Call.Summary, Resumes) and takes them off the answer the
// harness gets.
func TestRelayRecordsTheSummaryMarks(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		switch req.URL.Query().Get("mark") {
		case "summary":
			w.Header().Set(model.SummaryHeader, "s2")
		case "resumes":
			w.Header().Set(model.ResumesHeader, "s2")
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"message":{"role":"assistant","content":"ok"}}]}`)
	}))
	defer up.Close()
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1"})
	for _, q := range []string{"?mark=summary", "?mark=resumes", ""} {
		resp, err := http.Post(r.URL()+"/chat/completions"+q, "application/json", strings.NewReader(`{"model":"m"}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get(model.SummaryHeader) != "" || resp.Header.Get(model.ResumesHeader) != "" {
			t.Errorf("%q: answered %d with the marks %q %q; want 200 without them", q, resp.StatusCode,
				resp.Header.Get(model.SummaryHeader), resp.Header.Get(model.ResumesHeader))
		}
	}
	cs := r.Calls()
	if len(cs) != 3 || cs[0].Summary != "s2" || cs[0].Resumes != "" || cs[1].Resumes != "s2" || cs[1].Summary != "" || cs[2].Summary+cs[2].Resumes != "" {
		t.Errorf("recorded %+v; want the summary's id on the first, the resumed one's on the second, none on the third", cs)
	}
}
