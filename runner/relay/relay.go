// Package relay is the recording model relay of contract §7.2:
// a real HTTP server on the host's loopback that every model call of a case
// goes through, in front of the scripted model or a real one. The sandbox
// holds only the case's canary key; the relay checks it and swaps in the
// upstream key when it forwards, so the upstream key never enters a
// container. Each call is recorded (status, streaming, usage, the tool
// results the request carried and the ids of the calls they answer, the
// tool calls its history claims, the tool calls the answer made with
// their ids), sizes
// capped, no header logged; SSE answers are passed on chunk by chunk, never
// buffered.
package relay

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Options configure a Relay.
type Options struct {
	// Upstream is the model's base URL, "http://HOST:PORT/v1".
	Upstream string
	// SandboxKey is the key the sandbox must present as a bearer token
	// (the case's canary); "" accepts any.
	SandboxKey string
	// UpstreamKey replaces it on the way out; "" sends no key.
	UpstreamKey string
	// LogPath, when not empty, receives one JSON line per call.
	LogPath string
	// MaxBody caps the bytes of a request or an answer kept for parsing;
	// 0 means 4 MiB. What passes through is never capped.
	MaxBody int
	// MaxText caps each recorded text (a tool result, arguments, the
	// answer's text); 0 means 4 KiB.
	MaxText int
}

// ToolCall is one tool call an answer made (or, in ClaimedToolCalls, one a
// request says an answer made).
type ToolCall struct {
	// ID is the call's id (Chat Completions tool_calls[].id, Responses
	// call_id, Messages tool_use id); "" when the API gave none.
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Usage is an answer's token counts.
type Usage struct {
	Input  int `json:"input"`
	Output int `json:"output"`
}

// Call is one request relayed.
type Call struct {
	Seq    int       `json:"seq"` // 1-based, model requests only (POST, not count_tokens)
	Method string    `json:"method"`
	Path   string    `json:"path"`
	Time   time.Time `json:"time"`
	// Auth is what the sandbox presented: "canary", "wrong", "missing" or
	// "any" (no SandboxKey set).
	Auth   string `json:"auth"`
	Status int    `json:"status"`
	Stream bool   `json:"stream"`
	Model  string `json:"model,omitempty"`
	// Tools lists the tools the request declared.
	Tools []string `json:"tools,omitempty"`
	// ToolResults are the texts of the tool results the request carried,
	// in order, each capped.
	ToolResults []string `json:"tool_results,omitempty"`
	// ToolResultIDs holds, for each of ToolResults at the same index, the
	// id of the tool call it answers (tool_call_id, call_id, tool_use_id);
	// "" where the API gives none. nil in a transcript written before
	// ids were recorded.
	ToolResultIDs []string `json:"tool_result_ids,omitempty"`
	// ClaimedToolCalls are the assistant tool calls the request's own
	// history says the model made, in order, at most MaxClaimed: the
	// harness's copy, which the answers recorded in ToolCalls confirm or
	// not (contract §7.4).
	ClaimedToolCalls []ToolCall `json:"claimed_tool_calls,omitempty"`
	// ToolCalls are those the answer made; Text its text, capped.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Text      string     `json:"text,omitempty"`
	Usage     *Usage     `json:"usage,omitempty"`
	// Chunks counts the SSE data lines passed on.
	Chunks int `json:"chunks,omitempty"`
	// Bytes is the answer's size; Truncated says the parsed part was
	// capped.
	Bytes     int64   `json:"bytes"`
	Truncated bool    `json:"truncated,omitempty"`
	Seconds   float64 `json:"seconds"`
	Error     string  `json:"error,omitempty"`
}

// Relay is a running relay.
type Relay struct {
	opts     Options
	upstream *url.URL
	ln       net.Listener
	srv      *http.Server
	client   *http.Client
	serveErr chan error
	once     sync.Once

	mu    sync.Mutex
	seq   int
	calls []Call
	log   *os.File
}

// Start listens on a random loopback port and relays until Close.
func Start(o Options) (*Relay, error) {
	u, err := url.Parse(o.Upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("relay: bad upstream %q", o.Upstream)
	}
	if o.MaxBody == 0 {
		o.MaxBody = 4 << 20
	}
	if o.MaxText == 0 {
		o.MaxText = 4 << 10
	}
	r := &Relay{opts: o, upstream: u, serveErr: make(chan error, 1),
		// No timeout: a stream lasts as long as the model talks; the
		// client's leaving cancels the upstream request.
		client: &http.Client{Transport: &http.Transport{Proxy: nil, DisableCompression: true, MaxIdleConnsPerHost: 4}}}
	if o.LogPath != "" {
		if r.log, err = os.OpenFile(o.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
			return nil, fmt.Errorf("relay: open transcript: %w", err)
		}
	}
	if r.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		if r.log != nil {
			r.log.Close()
		}
		return nil, fmt.Errorf("relay: listen: %w", err)
	}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.handle), ReadHeaderTimeout: 10 * time.Second}
	go func() { r.serveErr <- r.srv.Serve(r.ln) }()
	return r, nil
}

// URL is the base URL the harness is given, "http://127.0.0.1:PORT/v1"
// (the upstream's path kept).
func (r *Relay) URL() string {
	return "http://" + r.ln.Addr().String() + strings.TrimRight(r.upstream.Path, "/")
}

// Calls returns a copy of the calls recorded so far, in the order they
// ended.
func (r *Relay) Calls() []Call {
	r.mu.Lock()
	calls := append([]Call(nil), r.calls...)
	r.mu.Unlock()
	// Recorded as they end; handed out in the order they came.
	slices.SortStableFunc(calls, func(a, b Call) int { return a.Seq - b.Seq })
	return calls
}

// ModelCalls counts the model requests (POSTs) relayed.
func (r *Relay) ModelCalls() int {
	n := 0
	for _, c := range r.Calls() {
		if c.Seq > 0 {
			n++
		}
	}
	return n
}

// Close stops the relay and closes the transcript.
func (r *Relay) Close() error {
	var err error
	r.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err = r.srv.Shutdown(ctx); err != nil {
			r.srv.Close()
		}
		if serr := <-r.serveErr; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
			err = serr
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.log != nil {
			if cerr := r.log.Close(); cerr != nil && err == nil {
				err = cerr
			}
			r.log = nil
		}
	})
	return err
}

func (r *Relay) record(c Call) {
	c.Seconds = time.Since(c.Time).Seconds()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
	if r.log != nil {
		b, _ := json.Marshal(c)
		r.log.Write(append(b, '\n'))
	}
}

// keyHeader names the header the sandbox sent its key in: the upstream key
// goes out in the same one ("Authorization: Bearer" for OpenAI clients,
// "x-api-key" for Anthropic's, "api-key" for Azure-style ones).
func keyHeader(h http.Header) string {
	for _, k := range []string{"Authorization", "X-Api-Key", "Api-Key"} {
		if h.Get(k) != "" {
			return k
		}
	}
	return "Authorization"
}

// auth reads the sandbox's key in constant time, from the header it came
// in.
func (r *Relay) auth(h http.Header) string {
	if r.opts.SandboxKey == "" {
		return "any"
	}
	got := h.Get(keyHeader(h))
	if keyHeader(h) == "Authorization" {
		got = strings.TrimPrefix(got, "Bearer ")
	}
	switch {
	case got == "":
		return "missing"
	case subtle.ConstantTimeCompare([]byte(got), []byte(r.opts.SandboxKey)) == 1:
		return "canary"
	}
	return "wrong"
}

// hopHeaders are not forwarded (RFC 9110 section 7.6.1), nor are the keys.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "Te", "Trailer",
	"Transfer-Encoding", "Upgrade", "Authorization", "Api-Key", "X-Api-Key", "Accept-Encoding", "Content-Length", "Host"}

func (r *Relay) handle(w http.ResponseWriter, req *http.Request) {
	c := Call{Method: req.Method, Path: req.URL.Path, Time: time.Now(), Auth: r.auth(req.Header)}
	// A model request is a POST; Anthropic's count_tokens is a POST that
	// asks for no answer, so it is not counted (the scripted model does
	// not count it either).
	if req.Method == http.MethodPost && !strings.HasSuffix(req.URL.Path, "/count_tokens") {
		r.mu.Lock()
		r.seq++
		c.Seq = r.seq
		r.mu.Unlock()
	}
	defer func() { r.record(c) }()
	if c.Auth == "wrong" || c.Auth == "missing" {
		// The sandbox's key is the canary: anything else is refused
		// here, never passed on.
		c.Status = http.StatusUnauthorized
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(c.Status)
		io.WriteString(w, `{"error":{"message":"sandproof relay: the key is not this case's","type":"invalid_request_error","code":"invalid_api_key"}}`)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 64<<20))
	if err != nil {
		c.Error = fmt.Sprintf("read request: %v", err)
		http.Error(w, "read request", http.StatusBadRequest)
		c.Status = http.StatusBadRequest
		return
	}
	r.parseRequest(&c, body)

	// The upstream path: the relay's own path with the upstream's base in
	// place of the relay's (which is the same).
	target := *r.upstream
	target.Path = req.URL.Path
	target.RawQuery = req.URL.RawQuery
	out, err := http.NewRequestWithContext(req.Context(), req.Method, target.String(), bytes.NewReader(body))
	if err != nil {
		c.Error = fmt.Sprintf("build upstream request: %v", err)
		c.Status = http.StatusBadGateway
		http.Error(w, "sandproof relay: bad upstream request", c.Status)
		return
	}
	for k, vs := range req.Header {
		out.Header[k] = vs
	}
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	out.Header.Set("Accept-Encoding", "identity")
	if r.opts.UpstreamKey != "" {
		switch kh := keyHeader(req.Header); kh {
		case "Authorization":
			out.Header.Set(kh, "Bearer "+r.opts.UpstreamKey)
		default:
			out.Header.Set(kh, r.opts.UpstreamKey)
		}
	}
	resp, err := r.client.Do(out)
	if err != nil {
		c.Error = r.redact(fmt.Sprintf("upstream: %v", err))
		c.Status = http.StatusBadGateway
		http.Error(w, "sandproof relay: upstream unreachable", c.Status)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	for _, h := range []string{"Connection", "Keep-Alive", "Transfer-Encoding", "Trailer", "Upgrade", "Content-Length"} {
		w.Header().Del(h)
	}
	w.WriteHeader(resp.StatusCode)
	c.Status = resp.StatusCode
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	fl, _ := w.(http.Flusher)
	kept := &capped{max: r.opts.MaxBody}
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			c.Bytes += int64(n)
			kept.Write(buf[:n])
			if _, werr := w.Write(buf[:n]); werr != nil {
				c.Error = fmt.Sprintf("write to the harness: %v", werr)
				break
			}
			// Every chunk goes on at once: an SSE stream is never held
			// back.
			if fl != nil {
				fl.Flush()
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			c.Error = r.redact(fmt.Sprintf("read upstream: %v", rerr))
			break
		}
	}
	c.Truncated = kept.over
	if sse {
		r.parseSSE(&c, kept.b.Bytes())
	} else {
		r.parseJSON(&c, kept.b.Bytes())
	}
}

// redact keeps the upstream key out of recorded errors.
func (r *Relay) redact(s string) string {
	if r.opts.UpstreamKey != "" {
		s = strings.ReplaceAll(s, r.opts.UpstreamKey, "[upstream key]")
	}
	if r.opts.SandboxKey != "" {
		s = strings.ReplaceAll(s, r.opts.SandboxKey, "[canary]")
	}
	return s
}

// capped keeps the first max bytes written.
type capped struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) {
	room := c.max - c.b.Len()
	if room < len(p) {
		c.over = true
		if room > 0 {
			c.b.Write(p[:room])
		}
		return
	}
	c.b.Write(p)
}

func (r *Relay) text(s string) string {
	s = r.redact(s)
	if len(s) > r.opts.MaxText {
		return s[:r.opts.MaxText] + "…"
	}
	return s
}
