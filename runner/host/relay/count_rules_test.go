package relay_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sandproof/sandproof/runner/host/relay"
)

// What counts as a model call (verify.model_called rests on it): a POST
// that asks for an answer. A GET (GET /v1/models) or Anthropic's
// count_tokens is never one, whether or not the relay passes it on; a
// request without the case's key is refused before the upstream.
func TestModelCallCountingRule(t *testing.T) {
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[]}`)
	}))
	defer up.Close()
	const canary = "sk-sandproof-canary-0042"
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: canary})
	send := func(method, path, key string) int {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		}
		req, err := http.NewRequest(method, strings.TrimSuffix(r.URL(), "/v1")+path, body)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}

	send(http.MethodGet, "/v1/models", canary)
	send(http.MethodPost, "/v1/messages/count_tokens", canary)
	if n := r.ModelCalls(); n != 0 {
		t.Fatalf("a GET /v1/models and a count_tokens counted as %d model call(s), want 0", n)
	}
	for _, c := range r.Calls() {
		if c.Seq != 0 {
			t.Fatalf("%s %s got seq %d; only a model request is numbered", c.Method, c.Path, c.Seq)
		}
	}
	// Positive control: one POST for an answer is one model call.
	if st := send(http.MethodPost, "/v1/chat/completions", canary); st != http.StatusOK {
		t.Fatalf("POST with the canary: status %d, want 200", st)
	}
	if n := r.ModelCalls(); n != 1 {
		t.Fatalf("one POST /v1/chat/completions counted as %d model call(s), want 1", n)
	}

	before := hits.Load()
	if st := send(http.MethodPost, "/v1/chat/completions", ""); st != http.StatusUnauthorized {
		t.Fatalf("POST without a key: status %d, want 401", st)
	}
	if st := send(http.MethodPost, "/v1/chat/completions", "sk-other"); st != http.StatusUnauthorized {
		t.Fatalf("POST with another key: status %d, want 401", st)
	}
	if got := hits.Load(); got != before {
		t.Fatalf("the upstream saw %d request(s) without the case's key", got-before)
	}
}
