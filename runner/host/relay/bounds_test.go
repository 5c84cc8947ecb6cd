package relay_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/host/relay"
)

// upstream is a loopback model API that records every request it gets
// (path, headers and body whole) and answers a small JSON.
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// The first 64 KiB of the body is enough to see a key in; the
		// rest is read and dropped (this process's RSS is measured).
		b, _ := io.ReadAll(io.LimitReader(req.Body, 64<<10))
		io.Copy(io.Discard, req.Body)
		var h strings.Builder
		req.Header.Write(&h)
		u.mu.Lock()
		u.seen = append(u.seen, req.Method+" "+req.URL.RequestURI()+"\n"+h.String()+"\n"+string(b))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"index":0,"message":{"content":"ok"}}]}`)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.seen...)
}

// raw sends a request's bytes as they are (no client cleans the path)
// and returns the status of the answer.
func raw(t *testing.T, addr, req string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read the answer to %q: %v", req, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func hostOf(r *relay.Relay) string {
	return strings.TrimPrefix(strings.TrimSuffix(r.URL(), "/v1"), "http://")
}

// Only the model API's endpoints below the upstream's base are passed on;
// any other method or path, traversal and escapes included, is answered
// 404 by the relay and never reaches the upstream with the real key. The
// positive control: the model endpoints do reach it, on their own paths.
func TestRelayForwardsOnlyTheModelAPI(t *testing.T) {
	up := newUpstream(t)
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: "sk-canary-1", UpstreamKey: "sk-real-up"})
	addr := hostOf(r)
	req := func(method, target string) string {
		return method + " " + target + " HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer sk-canary-1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
	}
	for _, c := range []struct {
		method, target string
	}{
		{"POST", "/v1/../admin"},
		{"GET", "/v1/../../etc/passwd"},
		{"POST", "/v1/chat/completions/../../admin"},
		{"POST", "/v1//chat/completions"},
		{"POST", "/v1/./chat/completions"},
		{"POST", "/v1/chat%2Fcompletions"},
		{"POST", "/v1/chat/%63ompletions"},
		{"POST", "/v1/files"},
		{"POST", "/v1/fine_tuning/jobs"},
		{"DELETE", "/v1/models/fake-model"},
		{"GET", "/v1/chat/completions"},
		{"PUT", "/v1/responses"},
		{"POST", "/v2/chat/completions"},
		{"POST", "/chat/completions"},
		{"GET", "/v1/models/a/b"},
		{"GET", "/"},
		{"POST", "http://" + addr + "/v1/files"},
	} {
		if got := raw(t, addr, req(c.method, c.target)); got != http.StatusNotFound {
			t.Errorf("%s %s: status %d, want 404 from the relay", c.method, c.target, got)
		}
	}
	// CONNECT, and a request smuggled behind a chunked body that also
	// says Content-Length (held before this work too: keep them held).
	if got := raw(t, addr, "CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\nAuthorization: Bearer sk-canary-1\r\n\r\n"); got != http.StatusNotFound {
		t.Errorf("CONNECT: status %d, want 404", got)
	}
	smuggled := "POST /v1/files HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-canary-1\r\nContent-Length: 2\r\n\r\n{}"
	if got := raw(t, addr, "POST /v1/../files HTTP/1.1\r\nHost: "+addr+"\r\nX-Forwarded-Host: 127.0.0.1:22\r\nAuthorization: Bearer sk-canary-1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"+smuggled); got != http.StatusNotFound && got != http.StatusBadRequest {
		t.Errorf("CL+TE: status %d, want 404 or 400", got)
	}
	if seen := up.requests(); len(seen) != 0 {
		t.Errorf("the upstream got %d requests that are not the model API's: %q", len(seen), seen)
	}
	for _, c := range []struct{ method, target string }{
		{"POST", "/v1/chat/completions"}, {"POST", "/v1/responses"}, {"POST", "/v1/messages?beta=true"},
		{"POST", "/v1/messages/count_tokens"}, {"GET", "/v1/models"}, {"GET", "/v1/models/fake-model"},
	} {
		if got := raw(t, addr, req(c.method, c.target)); got != http.StatusOK {
			t.Errorf("positive control: %s %s: status %d, want 200 from the upstream", c.method, c.target, got)
		}
	}
	seen := up.requests()
	if len(seen) != 6 || !strings.HasPrefix(seen[2], "POST /v1/messages?beta=true\n") || !strings.Contains(seen[0], "Authorization: Bearer sk-real-up") {
		t.Errorf("positive control: the upstream got %q; want the six model API requests with the real key", seen)
	}
}

// A request that carries the case's key anywhere the relay would pass on
// (the URL, a header other than the key's, the body), as is or in a
// simple encoding, is answered 403 by the relay and never reaches the
// upstream. The positive controls: the same request without the key
// reaches it, and the upstream's own record would have shown the key.
func TestRelayKeepsTheCanaryIn(t *testing.T) {
	const key = "sk-sandproof-canary-00112233445566778899aabbccddeeff"
	up := newUpstream(t)
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: key, UpstreamKey: "sk-real-up"})
	post := func(query string, hdr map[string]string, body string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, r.URL()+"/chat/completions"+query, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	msg := func(role, text string) string {
		b, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{map[string]string{"role": role, "content": text, "tool_call_id": "c1"}}})
		return string(b)
	}
	hexKey := hex.EncodeToString([]byte(key))
	cases := []struct {
		name, query string
		hdr         map[string]string
		body        string
	}{
		{"query string", "?k=" + key, nil, msg("user", "hi")},
		{"query, URL escapes", "?k=" + strings.ReplaceAll(key, "-", "%2D"), nil, msg("user", "hi")},
		{"a header", "", map[string]string{"X-Note": key}, msg("user", "hi")},
		{"a header, base64", "", map[string]string{"X-Note": base64.StdEncoding.EncodeToString([]byte("a" + key))}, msg("user", "hi")},
		{"a second key header", "", map[string]string{"OpenAI-Organization": key}, msg("user", "hi")},
		{"a user message", "", nil, msg("user", "my key is "+key)},
		{"a tool result, hex", "", nil, msg("tool", hexKey)},
		{"a tool result, hex upper", "", nil, msg("tool", strings.ToUpper(hexKey))},
		{"a tool result, reversed", "", nil, msg("tool", reverse(key))},
		{"a tool result, JSON escapes", "", nil, strings.ReplaceAll(msg("tool", key), "-", `\u002d`)},
		{"a tool result, base64", "", nil, msg("tool", base64.RawURLEncoding.EncodeToString([]byte("xy"+key)))},
	}
	for _, c := range cases {
		if got := post(c.query, c.hdr, c.body); got != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403 from the relay", c.name, got)
		}
	}
	if seen := up.requests(); len(seen) != 0 {
		t.Errorf("the upstream got %d requests carrying the key: %q", len(seen), seen)
	}
	// Positive control: a request without the key passes, and what the
	// upstream records is the request as sent (so a key would show).
	if got := post("?q=1", map[string]string{"X-Note": "clean"}, msg("tool", "clean "+hexKey[:20])); got != http.StatusOK {
		t.Fatalf("positive control: a clean request got %d", got)
	}
	if seen := up.requests(); len(seen) != 1 || !strings.Contains(seen[0], "X-Note: clean") || !strings.Contains(seen[0], hexKey[:20]) {
		t.Fatalf("positive control: the upstream saw %q", seen)
	}
	r.Close()
	b := r.Bounds()
	if b.Refused[relay.RefusedCanary] != len(cases) || len(b.Canary) != len(cases) || b.Over() {
		t.Errorf("bounds %+v; want %d canary refusals, no limit over", b, len(cases))
	}
	for _, c := range r.Calls() {
		if c.Status == http.StatusForbidden && (c.Refused != relay.RefusedCanary || strings.Contains(c.Error, key)) {
			t.Errorf("call %+v: want refused canary, the key not in the record", c)
		}
	}
	if r.ModelCalls() != 1 {
		t.Errorf("model calls %d; want only the forwarded 1", r.ModelCalls())
	}
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// vmHWM is this process's peak resident set size in bytes, from
// /proc/self/status.
func vmHWM(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// stall sends a request with a Content-Length of size+1, then size bytes
// of body, and holds the connection open; it returns the bytes it wrote
// and the status the relay answered (0 if none before the deadline). The
// answer is read while the body is written: a relay that answers early
// and closes would otherwise reset the connection before it is read.
func stall(addr, key string, size int, deadline time.Duration) (int64, int) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, -1
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(deadline))
	status := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, key, size+1)
	var sent int64
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	for sent < int64(size) {
		n, err := c.Write(chunk[:min(len(chunk), size-int(sent))])
		sent += int64(n)
		if err != nil {
			break
		}
	}
	return sent, <-status
}

// The stalled-bodies attack of issue 20: 16 requests, each 60 MiB of a
// body whose Content-Length is one byte more, held open. The relay holds
// none of it (413 at once, from the Content-Length), the process's peak
// RSS grows by far less than 300 MiB, and nothing reaches the upstream.
// Positive control: the relay saw every connection (16 refusals counted).
func TestRelayStalledBodiesHoldNoMemory(t *testing.T) {
	up := newUpstream(t)
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: "sk-canary-1"})
	before := vmHWM(t)
	var wg sync.WaitGroup
	var sent atomic.Int64
	statuses := make([]int, 16)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, st := stall(hostOf(r), "sk-canary-1", 60<<20, 20*time.Second)
			sent.Add(n)
			statuses[i] = st
		}()
	}
	wg.Wait()
	grew := vmHWM(t) - before
	t.Logf("peak RSS grew by %d MiB; the attack wrote %d MiB", grew>>20, sent.Load()>>20)
	if grew > 300<<20 && !raceDetector {
		t.Errorf("peak RSS grew by %d MiB, want < 300 MiB", grew>>20)
	}
	for i, st := range statuses {
		if st != http.StatusRequestEntityTooLarge {
			t.Errorf("request %d: status %d, want 413 from the relay", i, st)
		}
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("%d requests reached the upstream", n)
	}
	r.Close()
	if b := r.Bounds(); b.Refused[relay.RefusedTooLarge] != 16 || !b.Over() {
		t.Errorf("positive control: bounds %+v; want 16 refused too large", b)
	}
}

// A body under the size cap that stalls is cut at the idle deadline
// (408), one that trickles at the overall deadline, neither forwarded.
// Positive control: the relay read the bytes sent (request_bytes).
func TestRelayBodyDeadlines(t *testing.T) {
	up := newUpstream(t)
	lim := relay.Limits{BodyIdle: 300 * time.Millisecond, BodyTime: 2 * time.Second}
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: "k-canary-1234567", Limits: lim})
	addr := hostOf(r)
	start := time.Now()
	if _, st := stall(addr, "k-canary-1234567", 1<<20, 10*time.Second); st != http.StatusRequestTimeout {
		t.Errorf("stalled body: status %d, want 408", st)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the 408 took %s", d)
	}
	// A trickle: a byte every 100 ms never trips the idle deadline, but
	// the overall one.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k-canary-1234567\r\nContent-Length: 1000\r\n\r\n")
	done := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			done <- 0
			return
		}
		done <- resp.StatusCode
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	got := -1
	for i := 0; got < 0 && i < 200; i++ {
		select {
		case got = <-done:
		case <-tick.C:
			c.Write([]byte("a"))
		}
	}
	if got != http.StatusRequestTimeout {
		t.Errorf("trickled body: status %d, want 408", got)
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("%d requests reached the upstream", n)
	}
	// A refused body is never drained: no connection is left waiting
	// on its client, so Close (which waits for every connection) is
	// prompt.
	closing := time.Now()
	r.Close()
	if d := time.Since(closing); d > time.Second {
		t.Errorf("Close took %s: a refused body's connection was left draining it", d)
	}
	b := r.Bounds()
	if b.Refused[relay.RefusedBodyTimeout] != 2 || !b.Over() {
		t.Errorf("bounds %+v; want 2 timeouts", b)
	}
	var read []int64
	for _, c := range r.Calls() {
		read = append(read, c.RequestBytes)
	}
	if len(read) != 2 || read[0] != 1<<20 || read[1] < 10 {
		t.Errorf("positive control: bytes read %v, want the 1 MiB stalled and the trickle's", read)
	}
}

// hold opens a request with a Content-Length of size+1, sends size bytes
// and leaves the connection open until the test ends.
func hold(t *testing.T, addr, key string, size int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", key, size+1)
	if _, err := c.Write(bytes.Repeat([]byte("h"), size)); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls the relay's own counter until ok or 10 s.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !ok(); {
		if time.Now().After(end) {
			t.Fatalf("positive control: %s never happened", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The request bytes held at once over all requests are bounded (503), and
// so are the requests at once (429); neither is forwarded. The positive
// controls: the relay holds the bytes declared (its own count), and once
// they are gone a whole request passes.
func TestRelayHeldBytesAndConcurrency(t *testing.T) {
	const key = "k-canary-1234567"
	up := newUpstream(t)
	lim := relay.Limits{RequestBytes: 5 << 20, HeldBytes: 7 << 20, Concurrent: 3}
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: key, Limits: lim})
	addr := hostOf(r)
	// Each holds its declared Content-Length (3 MiB + 1) from the start.
	a, b := hold(t, addr, key, 3<<20), hold(t, addr, key, 3<<20)
	waitFor(t, "two bodies of 3 MiB held", func() bool { return r.Held() == 2*(3<<20+1) })
	if _, st := stall(addr, key, 1<<20, 10*time.Second); st != http.StatusServiceUnavailable {
		t.Errorf("over the held bytes: status %d, want 503", st)
	}
	// A third request that sends no byte of its body takes the last slot.
	c := hold(t, addr, key, 0)
	waitFor(t, "three requests in the relay", func() bool { return r.Busy() == 3 })
	req, _ := http.NewRequest(http.MethodPost, r.URL()+"/chat/completions", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("over the concurrent requests: %v %v, want 429", resp, err)
	}
	if err == nil {
		resp.Body.Close()
	}
	a.Close()
	b.Close()
	c.Close()
	waitFor(t, "the held requests gone", func() bool { return r.Held() == 0 && r.Busy() == 0 })
	if n := len(up.requests()); n != 0 {
		t.Errorf("%d requests reached the upstream", n)
	}
	req, _ = http.NewRequest(http.MethodPost, r.URL()+"/chat/completions", bytes.NewReader(bytes.Repeat([]byte("b"), 5<<20)))
	req.Header.Set("Authorization", "Bearer "+key)
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("positive control: a 5 MiB request: %v %v", resp, err)
	}
	resp.Body.Close()
	r.Close()
	if bo := r.Bounds(); bo.Refused[relay.RefusedHeld] != 1 || bo.Refused[relay.RefusedBusy] != 1 || !bo.Over() {
		t.Errorf("bounds %+v; want 1 held, 1 busy", bo)
	}
}

// The flood of issue 20: complete requests, each with 4,000 tool results
// of 4 KiB. Each is over the default body cap (413, not read, not
// recorded whole); the transcript and the call list stay within their
// budget, past which calls are counted, not kept. The positive controls:
// the relay saw all 40, and a flood within the body cap fills the budget.
func TestRelayFloodIsBounded(t *testing.T) {
	up := newUpstream(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "model_relay.jsonl")
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", LogPath: log})
	results := func(n int) []byte {
		msgs := []any{map[string]string{"role": "user", "content": "go"}}
		for i := 0; i < n; i++ {
			msgs = append(msgs, map[string]string{"role": "tool", "tool_call_id": fmt.Sprint(i), "content": strings.Repeat(fmt.Sprintf("%04d", i%10000), 1<<10)})
		}
		b, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs})
		return b
	}
	before := vmHWM(t)
	big := results(4000)
	statuses := map[int]int{}
	for i := 0; i < 40; i++ {
		resp, err := http.Post(r.URL()+"/chat/completions", "application/json", bytes.NewReader(big))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses[resp.StatusCode]++
	}
	if statuses[http.StatusRequestEntityTooLarge] != 40 {
		t.Errorf("statuses %v; want 40 413s", statuses)
	}
	// Within the body cap: 1,500 tool results of 4 KiB (6 MiB), 40 times.
	small := results(1500)
	for i := 0; i < 40; i++ {
		resp, err := http.Post(r.URL()+"/chat/completions", "application/json", bytes.NewReader(small))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	grew := vmHWM(t) - before
	r.Close()
	st, err := os.Stat(log)
	if err != nil {
		t.Fatal(err)
	}
	b := r.Bounds()
	t.Logf("transcript %d MiB, %d calls kept, %d not; peak RSS grew by %d MiB", st.Size()>>20, len(r.Calls()), b.Unrecorded, grew>>20)
	if st.Size() > relay.DefaultLimits.RecordBytes || b.RecordBytes > relay.DefaultLimits.RecordBytes {
		t.Errorf("transcript %d bytes, counted %d; want within %d", st.Size(), b.RecordBytes, relay.DefaultLimits.RecordBytes)
	}
	if grew > 300<<20 && !raceDetector {
		t.Errorf("peak RSS grew by %d MiB", grew>>20)
	}
	if b.Refused[relay.RefusedTooLarge] != 40 || b.Unrecorded == 0 || !b.Over() || len(r.Calls())+b.Unrecorded != 80 {
		t.Errorf("positive control: bounds %+v, %d calls kept; want 40 too large, some unrecorded, 80 in all", b, len(r.Calls()))
	}
	if n := len(up.requests()); n != 40 {
		t.Errorf("the upstream got %d requests; want the 40 within the cap", n)
	}
	if r.ModelCalls() != 40 {
		t.Errorf("model calls %d; want the 40 forwarded, recorded or not", r.ModelCalls())
	}
}

// Held bytes below one request's cap would refuse an honest request: the
// relay does not start so; a raised cap raises the default held bytes.
func TestRelayLimitsAgree(t *testing.T) {
	if _, err := relay.Start(relay.Options{Upstream: "http://127.0.0.1:1/v1", Limits: relay.Limits{RequestBytes: 8 << 20, HeldBytes: 4 << 20}}); err == nil {
		t.Fatal("a relay holding less than one request started")
	}
	r := startRelay(t, relay.Options{Upstream: "http://127.0.0.1:1/v1", Limits: relay.Limits{RequestBytes: 64 << 20}})
	if l := r.Bounds().Limits; l.HeldBytes != 256<<20 || l.RecordBytes != relay.DefaultLimits.RecordBytes {
		t.Fatalf("limits %+v; want 4 x 64 MiB held, the default record budget", l)
	}
}

// A request that declares a body at the cap and sends one byte holds the
// whole declared length: sixteen of them cannot make the relay allocate
// sixteen caps. With the defaults four are held (their declared 32 MiB),
// the other twelve are answered 503 at once; none is forwarded.
func TestRelayDeclaredLengthsAreHeld(t *testing.T) {
	const key = "k-canary-1234567"
	up := newUpstream(t)
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: key})
	addr := hostOf(r)
	cl := relay.DefaultLimits.RequestBytes - 1
	statuses := make(chan int, 16)
	for i := 0; i < 16; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n{", key, cl)
		go func() {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				statuses <- 0
				return
			}
			statuses <- resp.StatusCode
		}()
	}
	for i := 0; i < 12; i++ {
		if st := <-statuses; st != http.StatusServiceUnavailable {
			t.Errorf("status %d, want 503 for all but the four held", st)
		}
	}
	// Positive control: the four that got in hold their declared length.
	waitFor(t, "four declared bodies held", func() bool { return r.Held() == 4*cl })
	if h := r.Held(); h > relay.DefaultLimits.HeldBytes {
		t.Errorf("held %d bytes, over %d", h, relay.DefaultLimits.HeldBytes)
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("%d requests reached the upstream", n)
	}
}
