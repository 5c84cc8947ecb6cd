package relay_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/sandproof/sandproof/runner/host/relay"
	"github.com/sandproof/sandproof/runner/model"
)

// geminiRig is the scripted model behind a recorder of what reaches it
// (the key header and the query), behind the relay.
type geminiRig struct {
	srv  *model.Server
	r    *relay.Relay
	mu   sync.Mutex
	seen []string // "x-goog-api-key=K query=Q" per request upstream
}

func newGeminiRig(t *testing.T, canary, real string) *geminiRig {
	t.Helper()
	g := &geminiRig{}
	var err error
	if g.srv, err = model.Start(model.Options{APIKey: real}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.srv.Close() })
	target, _ := url.Parse("http://" + g.srv.Addr())
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		g.mu.Lock()
		g.seen = append(g.seen, fmt.Sprintf("x-goog-api-key=%s query=%s", req.Header.Get("X-Goog-Api-Key"), req.URL.RawQuery))
		g.mu.Unlock()
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(up.Close)
	g.r = startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: canary, UpstreamKey: real})
	return g
}

// post sends a Gemini request to the relay's origin (Gemini's clients put
// "/v1beta" in the path themselves), the key in the query or the header.
func (g *geminiRig) post(t *testing.T, verbAndQuery, headerKey string, contents []any) (int, string) {
	t.Helper()
	tools := []any{map[string]any{"functionDeclarations": []any{
		map[string]any{"name": "read_file", "parametersJsonSchema": map[string]any{"type": "object", "required": []any{"file_path"},
			"properties": map[string]any{"file_path": map[string]any{"type": "string"}}}},
		map[string]any{"name": "write_file", "parametersJsonSchema": map[string]any{"type": "object", "required": []any{"file_path", "content"},
			"properties": map[string]any{"file_path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}}}}}}
	b, _ := json.Marshal(map[string]any{"contents": contents, "tools": tools})
	req, _ := http.NewRequest(http.MethodPost, "http://"+hostOf(g.r)+"/v1beta/models/gemini-test:"+verbAndQuery, strings.NewReader(string(b)))
	if headerKey != "" {
		req.Header.Set("x-goog-api-key", headerKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// A Gemini round trip through the relay, streamed with the key in the
// query and plain with the key in the header: the model and the stream
// read from the path, the calls (no ids) and the functionResponse (with
// the id Gemini CLI gives it, and its text, not its JSON), the claimed
// call, the usage; the canary never upstream, the real key there in the
// place the canary came in, and in no record.
func TestRelayRecordsGeminiAndSwapsTheQueryKey(t *testing.T) {
	const canary, real = "AIza-sandproof-canary-0038", "AIza-real+key/9900"
	g := newGeminiRig(t, canary, real)
	prompt := []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": model.ChallengePrompt("/task/challenge.txt", "/task/deliverable.txt")}}}}
	if st, body := g.post(t, "streamGenerateContent?alt=sse&key="+canary, "", prompt); st != 200 {
		t.Fatalf("streamed, the canary in the query: %d %s", st, body)
	}
	ch := model.ChallengePrefix + strings.Repeat("e5", 16)
	const id = "read_file__read_file_1_0"
	history := append(prompt,
		map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"id": id, "name": "read_file",
			"args": map[string]any{"file_path": "/task/challenge.txt"}}}}},
		map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"id": id, "name": "read_file",
			"response": map[string]any{"output": "line \"1\"\n" + ch}}}}})
	if st, body := g.post(t, "generateContent", canary, history); st != 200 {
		t.Fatalf("plain, the canary in the header: %d %s", st, body)
	}
	g.r.Close()
	calls := g.r.Calls()
	if len(calls) != 2 {
		t.Fatalf("calls %+v; want 2", calls)
	}
	for i, c := range calls {
		if c.Auth != "canary" || c.Status != 200 || c.Stream != (i == 0) || c.Model != "gemini-test" || c.Usage == nil || c.Usage.Input <= 0 ||
			c.Usage.Output <= 0 || fmt.Sprint(c.Tools) != "[read_file write_file]" || c.Seq != i+1 {
			t.Fatalf("call %+v: want the canary, 200, streamed only first, gemini-test, usage, both tools", c)
		}
	}
	read := relay.ToolCall{Name: "read_file", Arguments: `{"file_path":"/task/challenge.txt"}`}
	if fmt.Sprint(calls[0].ToolCalls) != fmt.Sprint([]relay.ToolCall{read}) || calls[0].Chunks != 1 || len(calls[0].ToolResults) != 0 {
		t.Fatalf("call 1 %+v; want the read of the challenge, no id, in one chunk", calls[0])
	}
	claimed := relay.ToolCall{ID: id, Name: read.Name, Arguments: read.Arguments}
	if fmt.Sprint(calls[1].ToolResults) != fmt.Sprint([]string{"line \"1\"\n" + ch}) || fmt.Sprint(calls[1].ToolResultIDs) != "["+id+"]" ||
		fmt.Sprint(calls[1].ClaimedToolCalls) != fmt.Sprint([]relay.ToolCall{claimed}) {
		t.Fatalf("call 2 %+v; want the response's text with the client's id, and the call it claims", calls[1])
	}
	if len(calls[1].ToolCalls) != 1 || calls[1].ToolCalls[0].Name != "write_file" || !strings.Contains(calls[1].ToolCalls[0].Arguments, g.srv.Token(ch)) {
		t.Fatalf("call 2 %+v; want the write of the token", calls[1])
	}
	if k := kinds(calls[1].History); k != "uar" {
		t.Fatalf("call 2's history %v; want a user turn, the model's call, a result", calls[1].History)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	want := []string{"x-goog-api-key= query=alt=sse&key=" + url.QueryEscape(real), "x-goog-api-key=" + real + " query="}
	if fmt.Sprint(g.seen) != fmt.Sprint(want) {
		t.Fatalf("upstream saw %q; want %q", g.seen, want)
	}
	for _, c := range g.srv.Calls() {
		if c.Auth != "ok" {
			t.Fatalf("the model saw %+v without the real key", c)
		}
	}
	b, _ := json.Marshal(calls)
	if strings.Contains(string(b), real) || strings.Contains(string(b), url.QueryEscape(real)) || strings.Contains(string(b), canary) {
		t.Fatalf("the record holds a key: %s", b)
	}
}

// The query is the sandbox's too: a second key parameter is refused (the
// upstream would choose), the canary in another parameter is refused as a
// carried key, a wrong key in the query is refused; none reaches the
// upstream. Another parameter passes byte for byte.
func TestRelayReadsTheQueryAsTheSandboxes(t *testing.T) {
	const canary, real = "AIza-sandproof-canary-0039", "AIza-real-9901"
	g := newGeminiRig(t, canary, real)
	contents := []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "hi"}}}}
	for _, c := range []struct {
		query, header string
		want          int
	}{
		{"key=" + canary + "&key=" + canary, "", http.StatusUnauthorized},
		{"key=AIza-wrong", "", http.StatusUnauthorized},
		{"key=", "", http.StatusUnauthorized},
		{"alt=sse&note=" + url.QueryEscape(reverse(canary)), canary, http.StatusForbidden},
		{"k%65y=AIza-wrong", "", http.StatusUnauthorized},
	} {
		if st, body := g.post(t, "generateContent?"+c.query, c.header, contents); st != c.want {
			t.Errorf("query %q, header %q: %d %s; want %d", c.query, c.header, st, body, c.want)
		}
	}
	if st, body := g.post(t, "generateContent?x=%7e&key="+canary+"&y", "", contents); st != 200 {
		t.Fatalf("positive control: the canary in the query: %d %s", st, body)
	}
	// The key in the header, and a key parameter whose name is escaped:
	// the upstream would read it as its key, so it is taken out too.
	if st, body := g.post(t, "generateContent?k%65y=AIza-other&z=1", canary, contents); st != 200 {
		t.Fatalf("positive control: the canary in the header: %d %s", st, body)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	want := []string{"x-goog-api-key= query=x=%7e&y&key=" + real, "x-goog-api-key=" + real + " query=z=1"}
	if fmt.Sprint(g.seen) != fmt.Sprint(want) {
		t.Fatalf("upstream saw %q; want only the controls, %q", g.seen, want)
	}
	b := g.r.Bounds()
	if len(b.Canary) != 1 || !strings.HasPrefix(b.Canary[0], "URL, ") {
		t.Fatalf("canary findings %q; want the one in the URL", b.Canary)
	}
}

// An upstream that cannot be reached is recorded with its error, which
// names the URL: the keys in its query are redacted, escaped as they are
// there.
func TestRelayRedactsTheQueryKeyInErrors(t *testing.T) {
	const canary, real = "AIza-sandproof-canary-0040", "AIza-real+key/9902"
	up := httptest.NewServer(http.NotFoundHandler())
	up.Close()
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: canary, UpstreamKey: real})
	g := &geminiRig{r: r}
	if st, _ := g.post(t, "generateContent?key="+canary, "", []any{map[string]any{"role": "user"}}); st != http.StatusBadGateway {
		t.Fatalf("an upstream that is gone: %d; want 502", st)
	}
	r.Close()
	c := r.Calls()
	if len(c) != 1 || !strings.Contains(c[0].Error, "key=[upstream key]") || strings.Contains(c[0].Error, url.QueryEscape(real)) {
		t.Fatalf("calls %+v; want the error with the key redacted", c)
	}
}
