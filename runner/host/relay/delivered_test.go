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
	"time"

	"github.com/sandproof/sandproof/runner/host/relay"
)

// The relay records whether each answer reached the harness's connection
// whole (Call.Delivered, DeliveredAt), what scenario.model_fault reads to
// tell an answer the harness had from one it left before (contract §7.6
// scenarios). Delivered: a 429 read to its end. Not delivered: a stream
// whose client left after its first chunk (the upstream held the rest
// back until the relay gave up on it, the positive control that the
// client's leaving reached the relay), an answer the upstream cut short,
// and an answer the relay gave itself.
func TestRelayRecordsDelivery(t *testing.T) {
	t.Parallel() // its client-left case waits out the relay's upstream grace (2 s)
	const key = "k-canary-delivery"
	gone := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		switch req.URL.Query().Get("answer") {
		case "429":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"message":"Rate limit reached for requests.","code":"rate_limit_exceeded"}}`)
		case "left":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"do\"}}]}\n\n")
			w.(http.Flusher).Flush()
			<-req.Context().Done() // the relay cancelled: its client left
			close(gone)
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
	before := time.Now()
	resp := post("429", key)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	read := time.Now()
	if resp.StatusCode != 429 || err != nil || !strings.Contains(string(b), "rate_limit_exceeded") {
		t.Fatalf("429: %d %q %v", resp.StatusCode, b, err)
	}

	// A client that reads the stream's first chunk and leaves.
	readUntilAndLeave(t, r, "left", key, `"do"`)
	select {
	case <-gone:
	case <-time.After(30 * time.Second):
		t.Fatal("positive control: the upstream never saw the client leave")
	}

	resp = post("cut", key)
	io.ReadAll(resp.Body)
	resp.Body.Close()
	resp = post("429", "not-the-key")
	io.ReadAll(resp.Body)
	resp.Body.Close()
	r.Close()

	got := map[string]relay.Call{}
	for _, c := range r.Calls() {
		got[fmt.Sprint(c.Seq)] = c
	}
	for seq, want := range map[string]struct {
		name      string
		delivered bool
	}{"1": {"a 429 read whole", true}, "2": {"a stream its client left", false}, "3": {"an answer cut upstream", false}, "4": {"the relay's own 401", false}} {
		c := got[seq]
		if c.Delivered != want.delivered || c.DeliveredAt.IsZero() == want.delivered {
			t.Errorf("%s: delivered %t at %v (%+v), want %t", want.name, c.Delivered, c.DeliveredAt, c, want.delivered)
		}
	}
	if at := got["1"].DeliveredAt; at.Before(before) || at.After(read) {
		t.Errorf("the 429 delivered at %v, not between its request %v and its read %v", at, before, read)
	}
	// Positive controls: the stream's first chunk and the cut answer's
	// part went through.
	if got["2"].Bytes == 0 || got["3"].Bytes == 0 || got["3"].Error == "" {
		t.Errorf("the undelivered answers carried nothing: %+v, %+v", got["2"], got["3"])
	}
	// The transcript has it too.
	b, err = os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var line struct {
		Delivered   bool      `json:"delivered"`
		DeliveredAt time.Time `json:"delivered_at"`
	}
	first, _, _ := strings.Cut(string(b), "\n")
	if err := json.Unmarshal([]byte(first), &line); err != nil || !line.Delivered || !line.DeliveredAt.Equal(got["1"].DeliveredAt) {
		t.Errorf("transcript's first line %s: %+v %v", first, line, err)
	}
}

// An answer every byte of which was written while the harness was there is
// whole (WrittenAt) and delivered even when the harness left before the
// upstream's own end reached the relay: a harness may close once it has a
// stream's last event (the flake of a quick harness in a loaded CI run:
// its next request carried a call "whose answer never reached the harness
// whole"). Bytes the upstream sends after the harness left are never
// written, so that answer is neither. Each upstream ends only once the
// relay has seen its client leave (Options.OnLeft).
func TestRelayAnswerWrittenWholeBeforeTheHarnessLeft(t *testing.T) {
	const key = "k-canary-left"
	left := map[int]chan struct{}{1: make(chan struct{}), 2: make(chan struct{})}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"do\"}}]}\n\n")
		seq := 2
		if req.URL.Query().Get("answer") == "whole" {
			io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
			seq = 1
		}
		w.(http.Flusher).Flush()
		select {
		case <-left[seq]:
		case <-req.Context().Done():
			return
		}
		if seq == 2 {
			io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
		}
	}))
	defer up.Close()
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1", SandboxKey: key, LogPath: filepath.Join(t.TempDir(), "relay.jsonl"),
		OnLeft: func(seq int) { close(left[seq]) }})
	readUntilAndLeave(t, r, "whole", key, "[DONE]")
	readUntilAndLeave(t, r, "part", key, `"do"`)
	r.Close()
	got := map[int]relay.Call{}
	for _, c := range r.Calls() {
		got[c.Seq] = c
	}
	if c := got[1]; !c.Delivered || c.WrittenAt.IsZero() || c.Error != "" {
		t.Errorf("an answer written whole before its harness left: delivered %t, written at %v, error %q; want delivered, written", c.Delivered, c.WrittenAt, c.Error)
	}
	if c := got[2]; c.Delivered || !c.WrittenAt.IsZero() || !strings.Contains(c.Error, "left") || c.Bytes == 0 {
		t.Errorf("an answer whose end came after its harness left: delivered %t, written at %v, error %q, %d bytes; want neither, an error, and its first part relayed", c.Delivered, c.WrittenAt, c.Error, c.Bytes)
	}
}

// readUntilAndLeave posts a chat request over a connection of its own
// (?answer= picks the upstream's answer), reads the answer line by line
// until one holds until, and closes the connection: a client that leaves
// then.
func readUntilAndLeave(t *testing.T, r *relay.Relay, answer, key, until string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(r.URL(), "/v1"), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions?answer=%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 13\r\n\r\n{\"model\":\"m\"}", answer, key)
	br := bufio.NewReader(conn)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: %q never came: %v", answer, until, err)
		}
		if strings.Contains(line, until) {
			return
		}
	}
}
