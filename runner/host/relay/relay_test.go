package relay_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandproof/sandproof/fixtures/agent"
	"github.com/sandproof/sandproof/runner/host/relay"
	"github.com/sandproof/sandproof/runner/model"
)

func startRelay(t *testing.T, o relay.Options) *relay.Relay {
	t.Helper()
	r, err := relay.Start(o)
	if err != nil {
		t.Fatalf("start relay: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// The mini-agent, given only the canary, does the challenge flow through
// the relay: the upstream sees the real key, the transcript holds the tool
// round trip and neither key.
func TestRelayRecordsTheChallengeRoundTripAndSwapsTheKey(t *testing.T) {
	const canary, real = "sk-sandproof-canary-0011", "sk-real-upstream-7788"
	srv, err := model.Start(model.Options{APIKey: real})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := t.TempDir()
	log := filepath.Join(dir, "relay.jsonl")
	r := startRelay(t, relay.Options{Upstream: srv.URL(), SandboxKey: canary, UpstreamKey: real, LogPath: log})
	ch := model.ChallengePrefix + strings.Repeat("c3", 16)
	chPath, deliverable := filepath.Join(dir, "challenge.txt"), filepath.Join(dir, "deliverable.txt")
	if err := os.WriteFile(chPath, []byte(ch), 0o400); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := agent.Run(ctx, agent.Config{ModelURL: r.URL(), Model: "fake-model", APIKey: canary, Dir: dir, Shell: "/bin/sh",
		Prompt: model.ChallengePrompt(chPath, deliverable)})
	if err != nil || res.ModelErr != nil {
		t.Fatalf("agent: %v, %v", err, res.ModelErr)
	}
	// Close waits for the handlers: a client may stop reading at [DONE]
	// before the relay has recorded the call.
	r.Close()
	srv.Close()
	if got, want := r.ModelCalls(), srv.ModelCalls(); got != 3 || got != want {
		t.Fatalf("relay counted %d calls, the model %d; want 3 each", got, want)
	}
	for _, c := range srv.Calls() {
		if c.Auth != "ok" {
			t.Fatalf("the model saw call %+v without the real key", c)
		}
	}
	calls := r.Calls()
	for _, c := range calls {
		if c.Auth != "canary" || c.Status != 200 || !c.Stream || c.Usage == nil || c.Chunks < 3 {
			t.Fatalf("call %+v: want the canary, 200, streamed, usage, chunks", c)
		}
	}
	if len(calls[0].ToolCalls) != 1 || calls[0].ToolCalls[0].Name != "read" || len(calls[0].ToolResults) != 0 {
		t.Fatalf("call 1 = %+v; want a read and no tool result", calls[0])
	}
	tok := srv.Token(ch)
	if !strings.Contains(strings.Join(calls[1].ToolResults, ""), ch) || len(calls[1].ToolCalls) != 1 ||
		!strings.Contains(calls[1].ToolCalls[0].Arguments, tok) {
		t.Fatalf("call 2 = %+v; want the challenge back and the write of %s", calls[1], tok)
	}
	// The chain's ids: the read's id is what the next request's result
	// and its claimed call name.
	if id := calls[0].ToolCalls[0].ID; id == "" || fmt.Sprint(calls[1].ToolResultIDs) != "["+id+"]" ||
		len(calls[1].ClaimedToolCalls) != 1 || calls[1].ClaimedToolCalls[0] != calls[0].ToolCalls[0] {
		t.Fatalf("call 2 = %+v; want the result and the claimed call of call 1's %+v", calls[1], calls[0].ToolCalls[0])
	}
	if calls[2].Text != "done" {
		t.Fatalf("call 3 text = %q; want done", calls[2].Text)
	}
	if b, _ := os.ReadFile(deliverable); string(b) != tok {
		t.Fatalf("deliverable = %q; want %q", b, tok)
	}
	b, err := os.ReadFile(log)
	if err != nil || strings.Count(string(b), "\n") != 3 {
		t.Fatalf("transcript: %v, %q", err, b)
	}
	if strings.Contains(string(b), canary) || strings.Contains(string(b), real) {
		t.Fatalf("a key is in the transcript: %s", b)
	}
}

// A key that is not the canary is refused by the relay and never reaches
// the model.
func TestRelayRefusesAnotherKey(t *testing.T) {
	var hits int
	var mu sync.Mutex
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
	}))
	defer up.Close()
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: "sk-canary-1", UpstreamKey: "sk-real"})
	for key, want := range map[string]int{"sk-canary-1": 200, "sk-other": 401, "": 401} {
		req, _ := http.NewRequest(http.MethodPost, r.URL()+"/chat/completions", strings.NewReader(`{}`))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("key %q: status %d; want %d", key, resp.StatusCode, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if hits != 1 {
		t.Fatalf("upstream saw %d requests; want only the canary's 1", hits)
	}
}

// An SSE answer is passed on chunk by chunk: the upstream writes its second
// chunk only once the client has read the first through the relay.
func TestRelayDoesNotBufferSSE(t *testing.T) {
	gotFirst := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"do\"}}]}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-gotFirst:
		case <-req.Context().Done():
			return
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ne\"}}]}\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.URL()+"/chat/completions", strings.NewReader(`{"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, `"do"`) {
		t.Fatalf("first chunk: %q, %v (buffered by the relay?)", line, err)
	}
	close(gotFirst)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), `"ne"`) {
		t.Fatalf("rest = %q", rest)
	}
	r.Close()
	if c := r.Calls(); len(c) != 1 || c[0].Text != "done" || c[0].Chunks != 3 {
		t.Fatalf("calls = %+v; want one with text done and 3 chunks", c)
	}
}

// A streamed Responses API answer is read too, and recorded texts are
// capped.
func TestRelayReadsResponsesAndCapsTexts(t *testing.T) {
	srv, err := model.Start(model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r := startRelay(t, relay.Options{Upstream: srv.URL(), MaxText: 40})
	long := model.ChallengePrefix + strings.Repeat("ab", 16) + strings.Repeat(" padding", 20)
	body := fmt.Sprintf(`{"model":"fake-model","stream":true,"input":[
		{"role":"user","content":%q},
		{"type":"function_call","call_id":"c1","name":"read","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":%q}],
		"tools":[{"type":"function","name":"write","parameters":{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}}]}`,
		model.ChallengePrompt("/task/challenge.txt", "/task/deliverable.txt"), long)
	resp, err := http.Post(r.URL()+"/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	r.Close()
	c := r.Calls()
	if len(c) != 1 || len(c[0].ToolResults) != 1 || len(c[0].ToolCalls) != 1 || c[0].ToolCalls[0].Name != "write" || c[0].Usage == nil {
		t.Fatalf("calls = %+v; want one tool result in, one write out, usage", c)
	}
	if got := c[0].ToolResults[0]; got != long[:40]+"…" {
		t.Fatalf("tool result kept as %q; want the first 40 bytes and an ellipsis", got)
	}
}

// anthropicPost sends one Messages API request through the relay with the
// key in x-api-key, as Claude Code does, and returns the answer's body.
func anthropicPost(t *testing.T, r *relay.Relay, key string, messages []any) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"model": "fake-model", "max_tokens": 1000, "stream": true, "messages": messages,
		"tools": []any{
			map[string]any{"name": "Read", "input_schema": map[string]any{"type": "object", "required": []any{"file_path"},
				"properties": map[string]any{"file_path": map[string]any{"type": "string"}}}},
			map[string]any{"name": "Write", "input_schema": map[string]any{"type": "object", "required": []any{"file_path", "content"},
				"properties": map[string]any{"file_path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}}},
		}})
	req, _ := http.NewRequest(http.MethodPost, r.URL()+"/messages?beta=true", bytes.NewReader(b))
	req.Header.Set("x-api-key", key)
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	return string(body)
}

// toolUse returns the id of the tool_use block a streamed answer starts.
func toolUse(t *testing.T, body string) string {
	t.Helper()
	for _, line := range strings.Split(body, "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type  string `json:"type"`
			Block struct {
				Type string `json:"type"`
				ID   string `json:"id"`
			} `json:"content_block"`
		}
		if json.Unmarshal([]byte(d), &ev) == nil && ev.Type == "content_block_start" && ev.Block.Type == "tool_use" {
			return ev.Block.ID
		}
	}
	t.Fatalf("no tool_use in %q", body)
	return ""
}

// Claude Code's round trip through the relay: the key comes in x-api-key
// and goes out in x-api-key (the real one), tool_result blocks are read as
// tool results, tool_use blocks and their input_json_delta pieces as tool
// calls, usage from message_start and message_delta.
func TestRelayRecordsAnthropicMessagesAndSwapsXAPIKey(t *testing.T) {
	const canary, real = "sk-sandproof-canary-0022", "sk-ant-real-9900"
	srv, err := model.Start(model.Options{APIKey: real})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	// Between the relay and the model, a recorder of the key headers.
	var mu sync.Mutex
	var seen []string
	target, _ := url.Parse(strings.TrimSuffix(srv.URL(), "/v1"))
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("x-api-key=%s authorization=%s", req.Header.Get("X-Api-Key"), req.Header.Get("Authorization")))
		mu.Unlock()
		proxy.ServeHTTP(w, req)
	}))
	defer up.Close()
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: canary, UpstreamKey: real})
	ch := model.ChallengePrefix + strings.Repeat("e5", 16)
	prompt := model.ChallengePrompt("/task/challenge.txt", "/task/deliverable.txt")
	msgs := []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": prompt}}}}
	id := toolUse(t, anthropicPost(t, r, canary, msgs))
	msgs = append(msgs,
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Read",
			"input": map[string]any{"file_path": "/task/challenge.txt"}}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id,
			"content": []any{map[string]any{"type": "text", "text": "1\t" + ch}}}}})
	anthropicPost(t, r, canary, msgs)
	r.Close()
	srv.Close()
	calls := r.Calls()
	if len(calls) != 2 {
		t.Fatalf("calls = %+v; want 2", calls)
	}
	for _, c := range calls {
		if c.Auth != "canary" || c.Status != 200 || !c.Stream || c.Usage == nil || c.Usage.Input <= 0 || c.Usage.Output <= 0 ||
			fmt.Sprint(c.Tools) != "[Read Write]" {
			t.Fatalf("call %+v: want the canary, 200, streamed, both usages, tools Read and Write", c)
		}
	}
	if len(calls[0].ToolCalls) != 1 || calls[0].ToolCalls[0].Name != "Read" ||
		calls[0].ToolCalls[0].Arguments != `{"file_path":"/task/challenge.txt"}` || len(calls[0].ToolResults) != 0 {
		t.Fatalf("call 1 = %+v; want the Read of the challenge and no tool result", calls[0])
	}
	if calls[0].ToolCalls[0].ID != id || fmt.Sprint(calls[1].ToolResultIDs) != "["+id+"]" ||
		fmt.Sprint(calls[1].ClaimedToolCalls) != fmt.Sprint([]relay.ToolCall{calls[0].ToolCalls[0]}) {
		t.Fatalf("call 2 = %+v; want the result and the claimed call of call 1's tool_use %s", calls[1], id)
	}
	tok := srv.Token(ch)
	if fmt.Sprint(calls[1].ToolResults) != "[1\t"+ch+"]" || len(calls[1].ToolCalls) != 1 || calls[1].ToolCalls[0].Name != "Write" ||
		!strings.Contains(calls[1].ToolCalls[0].Arguments, `"content":"`+tok+`"`) {
		t.Fatalf("call 2 = %+v; want the challenge back and the Write of %s", calls[1], tok)
	}
	for _, c := range srv.Calls() {
		if c.Auth != "ok" {
			t.Fatalf("the model saw %+v without the real key", c)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if s != "x-api-key="+real+" authorization=" {
			t.Fatalf("upstream saw %q; want the real key in x-api-key alone", s)
		}
	}
	if len(seen) != 2 {
		t.Fatalf("upstream saw %d requests; want 2", len(seen))
	}
}

// count_tokens is passed on and recorded but is not a model call, as the
// scripted model counts it; the model call beside it is.
func TestRelayDoesNotCountCountTokens(t *testing.T) {
	srv, err := model.Start(model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r := startRelay(t, relay.Options{Upstream: srv.URL()})
	body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`
	for _, path := range []string{"/messages/count_tokens", "/messages"} {
		resp, err := http.Post(r.URL()+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
	}
	r.Close()
	srv.Close()
	calls := r.Calls()
	if len(calls) != 2 || r.ModelCalls() != 1 || srv.ModelCalls() != 1 {
		t.Fatalf("relay calls %+v, relay counted %d, model %d; want 2 recorded, 1 counted by each", calls, r.ModelCalls(), srv.ModelCalls())
	}
}
