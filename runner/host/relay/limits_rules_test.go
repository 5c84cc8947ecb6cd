package relay_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/host/relay"
)

// The relay's bounds that no other test reached on their own (the
// host-path mutants, docs/mutation.md): a chunked body's cap and held
// bytes, the idle deadline alone, what is over a limit, a dot segment,
// the canary past a body's first MiB.

// postChunked sends body with no Content-Length (chunked), as a client
// streaming its request does, and returns the status.
func postChunked(t *testing.T, r *relay.Relay, key string, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.URL()+"/chat/completions", io.MultiReader(bytes.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if req.ContentLength != 0 {
		t.Fatalf("positive control: the request declares %d bytes, want none (chunked)", req.ContentLength)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// settles polls the relay's own count of held bytes until it is zero or
// 10 s pass: a request's hold is released after its answer is sent.
func settles(r *relay.Relay) bool {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if r.Held() == 0 {
			return true
		}
	}
	return false
}

// A chunked body over the cap is refused (413) and never forwarded,
// however small the reads it arrives in; its buffer's growths (32 KiB to
// the cap) are all released. The positive control: a chunked body at the
// cap is forwarded, and releases what it held.
func TestRelayChunkedBodyCap(t *testing.T) {
	const key, capBytes = "k-canary-1234567", 256 << 10
	up := newUpstream(t)
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: key, Limits: relay.Limits{RequestBytes: capBytes}})
	if st := postChunked(t, r, key, bytes.Repeat([]byte("a"), capBytes)); st != http.StatusOK || len(up.requests()) != 1 {
		t.Fatalf("positive control: a chunked body at the cap: status %d, %d forwarded", st, len(up.requests()))
	}
	if !settles(r) {
		t.Errorf("a chunked body at the cap left %d bytes held", r.Held())
	}
	if st := postChunked(t, r, key, bytes.Repeat([]byte("a"), capBytes+1)); st != http.StatusRequestEntityTooLarge {
		t.Errorf("a chunked body one byte over the cap: status %d, want 413", st)
	}
	if n := len(up.requests()); n != 1 {
		t.Errorf("%d requests reached the upstream, want the one within the cap", n)
	}
	if !settles(r) {
		t.Errorf("a refused chunked body left %d bytes held", r.Held())
	}
	r.Close()
	if b := r.Bounds(); b.Refused[relay.RefusedTooLarge] != 1 {
		t.Errorf("bounds %+v, want one refused too large", b)
	}
}

// The idle deadline cuts a stalled body on its own (408), long before an
// overall deadline of an hour. The positive control: the relay read the
// bytes sent before the stall.
func TestRelayIdleDeadlineAlone(t *testing.T) {
	const key = "k-canary-1234567"
	up := newUpstream(t)
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: key,
		Limits: relay.Limits{BodyIdle: 200 * time.Millisecond, BodyTime: time.Hour}})
	if _, st := stall(hostOf(r), key, 64<<10, 10*time.Second); st != http.StatusRequestTimeout {
		t.Errorf("a stalled body: status %d, want 408 at the idle deadline", st)
	}
	r.Close()
	calls := r.Calls()
	if len(calls) != 1 || calls[0].RequestBytes != 64<<10 || calls[0].Refused != relay.RefusedBodyTimeout {
		t.Errorf("positive control: calls %+v, want the 64 KiB read, refused for its deadline", calls)
	}
	if len(up.requests()) != 0 {
		t.Errorf("the stalled request reached the upstream")
	}
}

// Each limit met alone is over (close.relay_bounded fails): a body too
// large, a body cut at its deadline, too many requests, too many bytes
// held, one call left out of the transcript. A route or a canary refusal
// alone is not (the canary is secrets.canary's), nor are no bounds.
func TestBoundsOverEachLimitAlone(t *testing.T) {
	for _, reason := range []string{relay.RefusedTooLarge, relay.RefusedBodyTimeout, relay.RefusedBusy, relay.RefusedHeld} {
		if b := (relay.Bounds{Refused: map[string]int{reason: 1}}); !b.Over() {
			t.Errorf("one refused %s: not over", reason)
		}
	}
	if b := (relay.Bounds{Refused: map[string]int{}, Unrecorded: 1}); !b.Over() {
		t.Error("one call not recorded: not over")
	}
	for _, b := range []relay.Bounds{{Refused: map[string]int{}}, {Refused: map[string]int{relay.RefusedRoute: 3, relay.RefusedCanary: 2}}} {
		if b.Over() {
			t.Errorf("bounds %+v: over", b)
		}
	}
}

// A path with a dot segment after a model endpoint's prefix (GET
// /v1/models/.., GET /v1/models/.) is refused, never passed on: the
// upstream would resolve it to another path. The positive control: GET
// /v1/models/m reaches it.
func TestRelayRefusesDotSegments(t *testing.T) {
	up := newUpstream(t)
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: "sk-canary-1"})
	addr := hostOf(r)
	get := func(target string) string {
		return "GET " + target + " HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer sk-canary-1\r\n\r\n"
	}
	for _, target := range []string{"/v1/models/..", "/v1/models/.", "/v1/models/../../admin"} {
		if st := raw(t, addr, get(target)); st != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404 from the relay", target, st)
		}
	}
	if seen := up.requests(); len(seen) != 0 {
		t.Errorf("the upstream got %q", seen)
	}
	if st := raw(t, addr, get("/v1/models/m")); st != http.StatusOK || len(up.requests()) != 1 {
		t.Errorf("positive control: GET /v1/models/m: status %d, %d forwarded", st, len(up.requests()))
	}
}

// The canary is searched in the whole request body: a key after 2 MiB
// of a tool result is refused (403). The positive control: the same body
// without the key is forwarded.
func TestRelayFindsTheCanaryDeepInABody(t *testing.T) {
	const key = "sk-sandproof-canary-00112233445566778899aabbccddeeff"
	up := newUpstream(t)
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: key})
	body := func(tail string) []byte {
		b, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{
			map[string]string{"role": "tool", "tool_call_id": "c1", "content": strings.Repeat("x", 2<<20) + tail}}})
		return b
	}
	post := func(b []byte) int {
		req, _ := http.NewRequest(http.MethodPost, r.URL()+"/chat/completions", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := post(body(" clean")); st != http.StatusOK {
		t.Fatalf("positive control: a clean 2 MiB body: status %d", st)
	}
	if st := post(body(" " + key)); st != http.StatusForbidden {
		t.Errorf("the key after 2 MiB: status %d, want 403", st)
	}
	if n := len(up.requests()); n != 1 {
		t.Errorf("%d requests reached the upstream, want the clean one", n)
	}
}
