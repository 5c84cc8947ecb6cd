package relay_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/relay"
)

// The relay records when each request was received whole (ReceivedAt) and
// when the last bytes of its answer began to go to the harness
// (WrittenAt), the order the loop proof reads (contract §7.4): not the
// requests' numbers, which are given at the headers. Every step waits on
// the relay's bytes, no sleep:
//   - A is sent with "Expect: 100-continue"; once the relay asks for its
//     body (it has numbered A: 1), all of it but the last byte;
//   - S, a stream, is read to its [DONE]; its upstream then holds the
//     stream open until it sees B;
//   - B is sent whole and read whole; then A's last byte.
//
// A is numbered first and received whole last; S's last write began
// before B was whole, and its delivery was confirmed only after (so the
// chain cannot order by DeliveredAt). An answer cut upstream has no
// WrittenAt; a refused request neither time.
func TestRelayRecordsWhenRequestsAreWholeAndAnswersWritten(t *testing.T) {
	const key = "k-canary-order"
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		switch req.URL.Query().Get("answer") {
		case "plain":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"choices":[{"index":0,"message":{"content":"ok"}}]}`)
		case "b":
			close(release)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"choices":[{"index":0,"message":{"content":"b"}}]}`)
		case "held":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_s\",\"function\":{\"name\":\"read\",\"arguments\":\"{}\"}}]}}]}\n\ndata: [DONE]\n\n")
			w.(http.Flusher).Flush()
			<-release
		case "cut":
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, `{"choices":`)
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		}
	}))
	defer up.Close()
	log := filepath.Join(t.TempDir(), "relay.jsonl")
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: key, LogPath: log})
	post := func(answer, k string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, r.URL()+"/chat/completions?answer="+answer, strings.NewReader(`{"model":"m"}`))
		req.Header.Set("Authorization", "Bearer "+k)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", answer, err)
		}
		return resp
	}

	const bodyA = `{"model":"a"}`
	a, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(r.URL(), "/v1"), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	fmt.Fprintf(a, "POST /v1/chat/completions?answer=plain HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nExpect: 100-continue\r\nConnection: close\r\nContent-Length: %d\r\n\r\n", key, len(bodyA))
	ar := bufio.NewReader(a)
	if line, err := ar.ReadString('\n'); err != nil || !strings.Contains(line, " 100 ") {
		t.Fatalf("A: the relay did not ask for the body: %q %v", line, err)
	}
	ar.ReadString('\n')
	io.WriteString(a, bodyA[:len(bodyA)-1])

	s := post("held", key)
	sr := bufio.NewReader(s.Body)
	for {
		line, err := sr.ReadString('\n')
		if err != nil {
			t.Fatalf("S: no [DONE]: %v", err)
		}
		if strings.Contains(line, "[DONE]") {
			break
		}
	}
	b := post("b", key)
	if body, _ := io.ReadAll(b.Body); !strings.Contains(string(body), `"b"`) {
		t.Fatalf("B: %s", body)
	}
	b.Body.Close()
	io.Copy(io.Discard, s.Body)
	s.Body.Close()
	io.WriteString(a, bodyA[len(bodyA)-1:])
	if answer, _ := io.ReadAll(ar); !strings.Contains(string(answer), `"ok"`) {
		t.Fatalf("A: %s", answer)
	}
	resp := post("cut", key)
	io.ReadAll(resp.Body)
	resp.Body.Close()
	resp = post("plain", "not-the-key")
	io.ReadAll(resp.Body)
	resp.Body.Close()
	r.Close()

	calls := r.Calls()
	if len(calls) != 5 {
		t.Fatalf("calls %+v; want 5", calls)
	}
	A, S, B, cut, refused := calls[0], calls[1], calls[2], calls[3], calls[4]
	if A.Seq != 1 || S.Seq != 2 || B.Seq != 3 || A.Status != 200 || B.Status != 200 || S.Status != 200 {
		t.Fatalf("calls %+v; want A, S, B numbered 1, 2, 3 as their headers came, answered", calls)
	}
	for _, c := range []relay.Call{A, S, B} {
		if c.ReceivedAt.IsZero() || c.WrittenAt.IsZero() || !c.ReceivedAt.After(c.Time) || !c.WrittenAt.After(c.ReceivedAt) {
			t.Errorf("call %d: headers %v, received whole %v, written %v; want them in that order", c.Seq, c.Time, c.ReceivedAt, c.WrittenAt)
		}
	}
	if !B.ReceivedAt.Before(A.ReceivedAt) || !B.WrittenAt.Before(A.ReceivedAt) {
		t.Errorf("A received whole %v, B received %v and written %v; want B round before A was whole", A.ReceivedAt, B.ReceivedAt, B.WrittenAt)
	}
	if !S.WrittenAt.Before(B.ReceivedAt) || !S.Delivered || !S.DeliveredAt.After(B.ReceivedAt) {
		t.Errorf("S written %v, delivered %t at %v; B received whole %v: want S's last write before B was whole, its delivery confirmed after",
			S.WrittenAt, S.Delivered, S.DeliveredAt, B.ReceivedAt)
	}
	if cut.ReceivedAt.IsZero() || !cut.WrittenAt.IsZero() || cut.Bytes == 0 {
		t.Errorf("the cut answer: received %v, written %v, %d bytes; want received, part of it passed on, never written whole", cut.ReceivedAt, cut.WrittenAt, cut.Bytes)
	}
	if refused.Status != 401 || !refused.ReceivedAt.IsZero() || !refused.WrittenAt.IsZero() {
		t.Errorf("the refused request: %+v; want 401, no times", refused)
	}
	// The transcript has them too.
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var line relay.Call
		if json.Unmarshal([]byte(l), &line) == nil && line.Seq == B.Seq && line.ReceivedAt.Equal(B.ReceivedAt) && line.WrittenAt.Equal(B.WrittenAt) &&
			strings.Contains(l, `"received_at"`) && strings.Contains(l, `"written_at"`) {
			found++
		}
	}
	if found != 1 {
		t.Errorf("transcript %s: want B's line with received_at and written_at", raw)
	}
}
