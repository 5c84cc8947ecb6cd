package relay_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/relay"
	"github.com/sandproof/sandproof/runner/wire"
)

// concrete is the path from the origin of an endpoint (below "/v1", or
// its own root): each name in braces filled, a verb after it kept.
func concrete(e wire.Endpoint) string {
	segs := strings.Split(e.FullPath("/v1"), "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") {
			_, verb, _ := strings.Cut(s, "}")
			segs[i] = "fake-model" + verb
		}
	}
	return strings.Join(segs, "/")
}

// nearMisses are paths no endpoint has: a near miss of each kind of
// segment, and Gemini's paths below the wrong root or with a bad name or
// verb.
var nearMisses = []string{"/v1/files", "/v1/models/a/b", "/v1/models/", "/v1/chat", "/v1/messages/count_tokens/x",
	"/v1beta/models/:generateContent", "/v1beta/models/fake-model:generate", "/v1beta/models/a:b:generateContent",
	"/v1beta/models/a/b:generateContent", "/v1beta/models/fake-model", "/v1/models/fake-model:streamGenerateContent/x"}

// probes are every method of interest on every table path (filled), and
// some near misses, each with whether the table holds it and, if so, its
// endpoint.
func probes() (out []struct {
	method, path string
	ep           wire.Endpoint
	ok           bool
}) {
	paths := slices.Clone(nearMisses)
	for _, e := range wire.Endpoints() {
		paths = append(paths, concrete(e))
	}
	for _, p := range paths {
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
			i := slices.IndexFunc(wire.Endpoints(), func(e wire.Endpoint) bool { return e.Method == m && concrete(e) == p })
			pr := struct {
				method, path string
				ep           wire.Endpoint
				ok           bool
			}{method: m, path: p, ok: i >= 0}
			if pr.ok {
				pr.ep = wire.Endpoints()[i]
			}
			out = append(out, pr)
		}
	}
	return out
}

// The relay forwards exactly the wire table's routes (runner/wire): each
// endpoint with its method reaches the upstream, any other method or path
// is refused in the relay; and a call is a model call (numbered, counted)
// exactly when its endpoint is a turn.
func TestRelayRoutesAreTheWireTable(t *testing.T) {
	up := newUpstream(t)
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: "sk-canary-1", UpstreamKey: "sk-real-up"})
	addr := hostOf(r)
	forwarded, calls := 0, 0
	for i, p := range probes() {
		st := raw(t, addr, p.method+" "+p.path+" HTTP/1.1\r\nHost: "+addr+"\r\nAuthorization: Bearer sk-canary-1\r\nContent-Length: 2\r\n\r\n{}")
		if p.ok {
			forwarded++
		}
		if p.ep.Turn {
			calls++
		}
		if got := len(up.requests()); got != forwarded || (st == http.StatusOK) != p.ok {
			t.Errorf("%s %s: status %d, %d forwarded so far; in the table: %v", p.method, p.path, st, got, p.ok)
		}
		// A call is recorded (and counted) as its handler ends, after
		// its answer went out.
		waitFor(t, "the call recorded", func() bool { return len(r.Calls()) == i+1 })
		if got := r.ModelCalls(); got != calls {
			t.Errorf("%s %s: %d model calls, want %d (a turn: %v)", p.method, p.path, got, calls, p.ep.Turn)
		}
	}
	// Positive control: every endpoint was probed and reached the upstream.
	if forwarded != len(wire.Endpoints()) || calls == 0 {
		t.Errorf("%d probes forwarded, %d counted; the table has %d endpoints", forwarded, calls, len(wire.Endpoints()))
	}
}

// Each key header of the table (and the relay's alias) is read, checked
// and swapped in place: the upstream key goes out in the header the
// canary came in, with its prefix, and the canary does not.
func TestRelaySwapsEveryWireKey(t *testing.T) {
	for _, k := range append(wire.Keys(), wire.KeyAliases...) {
		t.Run(k.Header, func(t *testing.T) {
			up := newUpstream(t)
			r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: "sk-canary-1", UpstreamKey: "sk-real-up"})
			addr := hostOf(r)
			send := func(key string) int {
				return raw(t, addr, "POST /v1/chat/completions HTTP/1.1\r\nHost: "+addr+"\r\n"+k.Header+": "+k.Prefix+key+"\r\nContent-Length: 2\r\n\r\n{}")
			}
			if st := send("sk-wrong"); st != http.StatusUnauthorized {
				t.Errorf("another key in %s: status %d, want 401", k.Header, st)
			}
			if st := send("sk-canary-1"); st != http.StatusOK {
				t.Fatalf("the canary in %s: status %d, want 200", k.Header, st)
			}
			seen := up.requests()
			if len(seen) != 1 || !strings.Contains(seen[0], k.Header+": "+k.Prefix+"sk-real-up\r\n") || strings.Contains(seen[0], "sk-canary-1") {
				t.Errorf("the upstream got %q; want the real key in %s and no canary", seen, k.Header)
			}
		})
	}
}
