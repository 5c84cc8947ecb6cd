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
// buffered. What the sandbox can make it hold is bounded (Limits), only the
// model API's endpoints are forwarded, and a request that carries the
// canary (runner/host/canary's encodings) is refused: all answered by the
// relay itself, never passed on.
//
// The routes it forwards and the key headers it reads and swaps are the
// wire table's (runner/wire), which the scripted model serves too. The
// bodies are not: the relay is the witness of what the harness and the
// model said, so it reads them with decoders of its own, one file per
// format (transcript_<name>.go), never the model's structs, and it never
// re-encodes what it passes on. A shared decoder would read back the
// model's own mistakes as right, and nobody would see them.
package relay

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandproof/sandproof/runner/host/canary"
	"github.com/sandproof/sandproof/runner/model"
	"github.com/sandproof/sandproof/runner/wire"
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
	// Limits bound what the sandbox can make the relay hold (contract §8
	// captured files are data); zero fields mean DefaultLimits'.
	Limits Limits
	// OnLeft, when set, is called with a call's Seq when its harness has
	// left (closed its connection) while the upstream's answer was being
	// relayed: what a test waits on before it lets the upstream end.
	OnLeft func(seq int)
}

// Limits bound the relay against a hostile harness. A request over a
// per-request limit is answered by the relay itself (413, 408, 429, 503)
// and never forwarded; every time a limit is met it is counted in Bounds,
// which certify's close.relay_bounded fails on.
type Limits struct {
	// RequestBytes caps one request's body.
	RequestBytes int64
	// BodyTime is how long a request's body may take to arrive, from the
	// end of its headers; BodyIdle how long it may pause between reads.
	BodyTime, BodyIdle time.Duration
	// Concurrent caps the requests in the relay at once.
	Concurrent int
	// HeldBytes caps the request bytes held at once, over all requests;
	// 0 means the default or four RequestBytes, whichever is more.
	HeldBytes int64
	// RecordBytes is the budget of the transcript: the JSON bytes of the
	// calls kept in memory and written to LogPath. Past it a call is
	// counted, not kept.
	RecordBytes int64
}

// DefaultLimits: none of the shipped adapters comes near one
// (docs/performance.md, The model relay's limits and the canary scan).
var DefaultLimits = Limits{
	RequestBytes: 8 << 20,
	BodyTime:     2 * time.Minute,
	BodyIdle:     30 * time.Second,
	Concurrent:   16,
	HeldBytes:    32 << 20,
	RecordBytes:  32 << 20,
}

// withDefaults fills zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.RequestBytes > 0 {
		d.RequestBytes = l.RequestBytes
	}
	if l.BodyTime > 0 {
		d.BodyTime = l.BodyTime
	}
	if l.BodyIdle > 0 {
		d.BodyIdle = l.BodyIdle
	}
	if l.Concurrent > 0 {
		d.Concurrent = l.Concurrent
	}
	if l.HeldBytes > 0 {
		d.HeldBytes = l.HeldBytes
	} else {
		// A raised body cap raises the held bytes with it: four
		// whole requests at once.
		d.HeldBytes = max(d.HeldBytes, 4*d.RequestBytes)
	}
	if l.RecordBytes > 0 {
		d.RecordBytes = l.RecordBytes
	}
	return d
}

// Refusal reasons, a Call's Refused.
const (
	RefusedRoute       = "route"          // not a model API endpoint: 404
	RefusedTooLarge    = "body_too_large" // over RequestBytes: 413
	RefusedBodyTimeout = "body_timeout"   // the body stalled: 408
	RefusedBusy        = "concurrent"     // over Concurrent: 429
	RefusedHeld        = "held_bytes"     // over HeldBytes: 503
	RefusedCanary      = "canary"         // the request carries the key: 403
)

// Bounds counts what the relay refused or did not keep.
type Bounds struct {
	// Refused counts the requests answered by the relay, by reason.
	Refused map[string]int
	// Unrecorded counts the calls past RecordBytes (counted, not kept);
	// RecordBytes the transcript's bytes.
	Unrecorded  int
	RecordBytes int64
	// Canary lists where a request carried the key ("header X-Note, hex"),
	// at most 20.
	Canary []string
	// Limits are the limits in force.
	Limits Limits
}

// Over says a limit of the relay was met: a request refused for its size,
// time, concurrency or held bytes, or a call not recorded. A route refused
// or a canary refused is not over a limit (the canary is
// secrets.canary's).
func (b Bounds) Over() bool {
	return b.Unrecorded > 0 || b.Refused[RefusedTooLarge]+b.Refused[RefusedBodyTimeout]+b.Refused[RefusedBusy]+b.Refused[RefusedHeld] > 0
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
	// History is the request's conversation, one digest a turn, in order,
	// at most MaxHistory (HistoryDropped counts the turns past it):
	// "u" a user turn with text, "a" an assistant turn (its text and tool
	// calls), "r" a turn of tool results only, then 16 hex digits of the
	// SHA-256 of what the turn says (Turn). A request sent again, or a
	// later step of the same conversation, repeats its digests; system
	// prompts, ids and cache markers are left out. scenario.model_fault
	// reads a retry and a compaction from them (certify's continues).
	History        []string `json:"history,omitempty"`
	HistoryDropped int      `json:"history_dropped,omitempty"`
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
	// Refused is why the relay answered the request itself, never
	// forwarding it (a Refused* reason); "" for a forwarded request.
	Refused string `json:"refused,omitempty"`
	// RequestBytes is the request body's size, as read.
	RequestBytes int64 `json:"request_bytes,omitempty"`
	// Delivered says the upstream's answer reached the harness's
	// connection whole: every byte the upstream sent (to its end) was
	// written and flushed, and the harness had not left before the last
	// one (a client that closes its connection ends the request's
	// context). false for an answer cut short, one the harness left
	// before, and one the relay gave itself (refused, upstream
	// unreachable). DeliveredAt is when the last byte was flushed. What
	// the harness did with bytes that reached its connection is not seen
	// from here (scenario.model_fault's rules do not rest on it alone).
	Delivered   bool      `json:"delivered,omitempty"`
	DeliveredAt time.Time `json:"delivered_at,omitzero"`
	// ReceivedAt is when the request's body had been read whole: what the
	// request carries was fixed by then. Zero for a request answered
	// before its body was read (refused: not an endpoint, not the case's
	// key, busy, over a limit). Seq is given at the headers, before the
	// body: a harness can hold one request's last byte while another goes
	// round, so Seq is no order of what a request could know.
	ReceivedAt time.Time `json:"received_at,omitzero"`
	// WrittenAt is when the relay began writing the answer's last bytes
	// to the harness's connection, set when every byte the upstream sent
	// was written (the answer whole): no harness held the whole answer
	// before it. The loop proof (contract §7.4) links a tool result only
	// to a call of an answer written before the result's request was
	// received whole; it does not use DeliveredAt, which is taken after
	// the upstream's end and a check of the connection, and so can come
	// after a quick harness's next request.
	WrittenAt time.Time `json:"written_at,omitzero"`
	// Fault is the scripted fault the answer was (the scripted model's
	// model.FaultHeader, taken off before the answer reaches the
	// harness); "" for any other answer, and for every answer of a real
	// model.
	Fault string `json:"fault,omitempty"`
	// Summary is the id of the scripted model's summary the answer was
	// (model.SummaryHeader: the answer to a summary request), Resumes the
	// id of the model's summary the request carried (model.ResumesHeader:
	// a conversation resumed from it); both taken off before the answer
	// reaches the harness, "" for any other answer and every answer of a
	// real model. scenario.model_fault ties a compaction by them.
	Summary string `json:"summary,omitempty"`
	Resumes string `json:"resumes,omitempty"`
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

	lim    Limits
	needle *canary.Matcher
	slots  chan struct{}

	mu     sync.Mutex
	seq    int
	calls  []Call
	log    *os.File
	held   int64
	bounds Bounds
	models int
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
	lim := o.Limits.withDefaults()
	if lim.HeldBytes < lim.RequestBytes {
		return nil, fmt.Errorf("relay: %d bytes held at once is less than one request's cap of %d", lim.HeldBytes, lim.RequestBytes)
	}
	r := &Relay{opts: o, upstream: u, serveErr: make(chan error, 1), lim: lim, needle: canary.New(o.SandboxKey),
		slots: make(chan struct{}, lim.Concurrent), bounds: Bounds{Refused: map[string]int{}, Limits: lim},
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
	// Headers are small and bounded (a connection holds at most
	// MaxHeaderBytes before the handler runs); idle keep-alive
	// connections are closed.
	r.srv = &http.Server{Handler: http.HandlerFunc(r.handle), ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes: 64 << 10, IdleTimeout: 2 * time.Minute}
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

// ModelCalls counts the model requests (POSTs) relayed, recorded or not.
func (r *Relay) ModelCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.models
}

// Held is the request bytes the relay holds now.
func (r *Relay) Held() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// Busy is how many requests hold a slot of Limits.Concurrent now.
func (r *Relay) Busy() int { return len(r.slots) }

// Bounds is what the relay refused or did not keep so far.
func (r *Relay) Bounds() Bounds {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.bounds
	b.Refused = maps.Clone(b.Refused)
	b.Canary = slices.Clone(b.Canary)
	return b
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

// record keeps the call in memory and in the transcript while both stay
// within RecordBytes; past it the call is only counted.
func (r *Relay) record(c Call) {
	c.Seconds = time.Since(c.Time).Seconds()
	b, _ := json.Marshal(c)
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.Seq > 0 && c.Refused == "" {
		r.models++
	}
	if c.Refused != "" {
		r.bounds.Refused[c.Refused]++
	}
	if r.bounds.RecordBytes+int64(len(b))+1 > r.lim.RecordBytes {
		r.bounds.Unrecorded++
		return
	}
	r.bounds.RecordBytes += int64(len(b)) + 1
	r.calls = append(r.calls, c)
	if r.log != nil {
		r.log.Write(append(b, '\n'))
	}
}

// keys are the key headers the relay reads, in order: the formats'
// (runner/wire: "Authorization: Bearer" for OpenAI clients, "x-api-key"
// for Anthropic's), then its own aliases ("api-key" for Azure-style
// ones).
var keys = append(wire.Keys(), wire.KeyAliases...)

// keyOf is where the sandbox sent its key: the first key header present,
// else a format's key query parameter present (inQuery; Gemini's
// "?key="). The upstream key goes out in the same place, with the same
// prefix; keys[0] when neither is there.
func keyOf(req *http.Request) (k wire.Key, inQuery bool) {
	for _, k := range keys {
		if req.Header.Get(k.Header) != "" {
			return k, false
		}
	}
	for _, k := range keys {
		if k.Query != "" && len(queryKeys(req.URL.RawQuery, k.Query)) > 0 {
			return k, true
		}
	}
	return keys[0], false
}

// auth reads the sandbox's key in constant time, from where it came
// (keyOf). A query key parameter given twice is wrong: the relay takes
// both out, and the upstream must not be left to choose.
func (r *Relay) auth(req *http.Request) string {
	if r.opts.SandboxKey == "" {
		return "any"
	}
	k, inQuery := keyOf(req)
	got := strings.TrimPrefix(req.Header.Get(k.Header), k.Prefix)
	if inQuery {
		vals := queryKeys(req.URL.RawQuery, k.Query)
		if len(vals) != 1 {
			return "wrong"
		}
		got = vals[0]
	}
	switch {
	case got == "":
		return "missing"
	case subtle.ConstantTimeCompare([]byte(got), []byte(r.opts.SandboxKey)) == 1:
		return "canary"
	}
	return "wrong"
}

// queryNames are the key query parameters of the formats (wire.Key.Query).
var queryNames = func() []string {
	var out []string
	for _, k := range keys {
		if k.Query != "" && !slices.Contains(out, k.Query) {
			out = append(out, k.Query)
		}
	}
	return out
}()

// queryParam splits a raw query's "name=value" piece, each unescaped
// (kept as sent where it does not unescape).
func queryParam(piece string) (name, value string) {
	n, v, _ := strings.Cut(piece, "=")
	if u, err := url.QueryUnescape(n); err == nil {
		n = u
	}
	if u, err := url.QueryUnescape(v); err == nil {
		v = u
	}
	return n, v
}

// queryKeys are the values of the raw query's parameter name, in order.
func queryKeys(raw, name string) []string {
	var out []string
	for _, piece := range strings.Split(raw, "&") {
		if n, v := queryParam(piece); piece != "" && n == name {
			out = append(out, v)
		}
	}
	return out
}

// forwardQuery is the raw query without the key parameters (queryNames),
// every other piece kept byte for byte as sent: the sandbox's key is
// never forwarded, and nothing else is re-encoded.
func forwardQuery(raw string) string {
	if raw == "" {
		return ""
	}
	var kept []string
	for _, piece := range strings.Split(raw, "&") {
		if n, _ := queryParam(piece); !slices.Contains(queryNames, n) {
			kept = append(kept, piece)
		}
	}
	return strings.Join(kept, "&")
}

// addQuery is query with name=value added, value escaped.
func addQuery(query, name, value string) string {
	p := url.QueryEscape(name) + "=" + url.QueryEscape(value)
	if query == "" {
		return p
	}
	return query + "&" + p
}

// hopHeaders are not forwarded: RFC 9110 section 7.6.1's, the framing
// ones the relay sets itself, and the keys (keys).
var hopHeaders = append([]string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authorization", "Te", "Trailer",
	"Transfer-Encoding", "Upgrade", "Accept-Encoding", "Content-Length", "Host"}, keyHeaders()...)

func keyHeaders() []string {
	var out []string
	for _, k := range keys {
		out = append(out, k.Header)
	}
	return out
}

// endpoints are the model API's calls the relay forwards, below the
// upstream's base path (runner/wire's table). Anything else is answered
// 404 by the relay (it would reach the upstream with the real key).
var endpoints = wire.Endpoints()

// route is the upstream path of a model API request and its endpoint, or
// "" when the request is not one. The path must be clean (no "..", ".",
// "//" or escapes) and below the upstream's base; the path sent on is
// rebuilt from the base and the endpoint, never copied from the request.
func (r *Relay) route(req *http.Request) (string, wire.Endpoint) {
	p := req.URL.Path
	if req.URL.RawPath != "" || req.URL.EscapedPath() != p || path.Clean(p) != p || req.URL.Opaque != "" {
		return "", wire.Endpoint{}
	}
	// An endpoint is below the upstream's base path, or, when it has a
	// root of its own (Gemini's "/v1beta"), below the origin: the path
	// sent on is then that same path on the upstream's origin.
	base := strings.TrimRight(r.upstream.Path, "/")
	for _, e := range endpoints {
		if _, ok := wire.Match(e.FullPath(base), p); ok && e.Method == req.Method {
			return p, e
		}
	}
	return "", wire.Endpoint{}
}

// dropBody makes sure what is left of a refused request's body is never
// read: net/http would drain up to 256 KiB of it after the handler,
// waiting on a stalled client with no deadline. A read deadline in the
// past fails that read at once, and the connection ends with the answer.
func dropBody(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	http.NewResponseController(w).SetReadDeadline(time.Now())
}

// refuse answers the request in the relay, never forwarding it.
func refuse(w http.ResponseWriter, c *Call, status int, reason, msg string) {
	c.Status, c.Refused = status, reason
	if c.Error == "" {
		c.Error = msg
	}
	w.Header().Set("Content-Type", "application/json")
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	dropBody(w)
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"message": "sandproof relay: " + msg, "type": "invalid_request_error", "code": reason}})
	w.Write(b)
}

// scanCanary says where the request carries the case's key: its URL as
// forwarded (the path and the query without its key parameters, which the
// relay takes out), a header the relay forwards, or its body; "" when
// nowhere.
func (r *Relay) scanCanary(req *http.Request, query string, fwd http.Header, body []byte) string {
	if r.needle.Empty() {
		return ""
	}
	u := *req.URL
	u.RawQuery = query
	if how, ok := r.needle.Find([]byte(u.RequestURI())); ok {
		return "URL, " + how
	}
	for k, vs := range fwd {
		for _, v := range vs {
			if how, ok := r.needle.Find([]byte(k + ": " + v)); ok {
				return "header " + k + ", " + how
			}
		}
	}
	// The body in windows, so that the decoders' copies stay small.
	st := r.needle.NewStream()
	st.Write(body)
	if how, ok := st.Found(); ok {
		return "body, " + how
	}
	return ""
}

// hold reserves n request bytes of the case's HeldBytes.
func (r *Relay) hold(n int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held+n > r.lim.HeldBytes {
		return false
	}
	r.held += n
	return true
}

func (r *Relay) release(n int64) {
	r.mu.Lock()
	r.held -= n
	r.mu.Unlock()
}

// errBodyTooLarge is a body past RequestBytes.
var errBodyTooLarge = errors.New("body too large")

// bodyReader reads one request's body within the limits: RequestBytes,
// BodyTime overall and BodyIdle between reads. Its buffer's capacity is
// what it holds of HeldBytes, reserved before it is allocated: a declared
// Content-Length whole at the start (so sixteen stalled requests that
// each declare the cap cannot make the relay allocate sixteen caps), a
// chunked body as its buffer grows.
type bodyReader struct {
	r    *Relay
	buf  []byte
	held int64 // reserved of HeldBytes; the caller releases it
}

// grow makes room for n more bytes, reserving what the buffer gains.
func (b *bodyReader) grow(n int) (string, error) {
	need := len(b.buf) + n
	if int64(need) > b.r.lim.RequestBytes {
		return RefusedTooLarge, errBodyTooLarge
	}
	if need <= cap(b.buf) {
		return "", nil
	}
	size := min(max(2*cap(b.buf), need, 32<<10), int(b.r.lim.RequestBytes))
	if !b.r.hold(int64(size - cap(b.buf))) {
		return RefusedHeld, fmt.Errorf("the relay holds %d request bytes at once at most", b.r.lim.HeldBytes)
	}
	b.held += int64(size - cap(b.buf))
	nb := make([]byte, len(b.buf), size)
	copy(nb, b.buf)
	b.buf = nb
	return "", nil
}

func (b *bodyReader) read(w http.ResponseWriter, req *http.Request) (string, error) {
	r := b.r
	rc := http.NewResponseController(w)
	end := time.Now().Add(r.lim.BodyTime)
	if req.ContentLength > 0 {
		if reason, err := b.grow(int(req.ContentLength)); err != nil {
			return reason, err
		}
	}
	chunk := make([]byte, 32<<10)
	for {
		dl := time.Now().Add(r.lim.BodyIdle)
		if dl.After(end) {
			dl = end
		}
		if err := rc.SetReadDeadline(dl); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return "", fmt.Errorf("set the body's read deadline: %w", err)
		}
		n, err := req.Body.Read(chunk)
		if n > 0 {
			if reason, err := b.grow(n); err != nil {
				return reason, err
			}
			b.buf = append(b.buf, chunk[:n]...)
		}
		if err == io.EOF {
			// The deadline is cleared after the whole body: the
			// server's background read (which notices a client
			// that left, and cancels the upstream request) must
			// not time out.
			return "", rc.SetReadDeadline(time.Time{})
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return RefusedBodyTimeout, fmt.Errorf("the body did not arrive in time (%s overall, %s idle)", r.lim.BodyTime, r.lim.BodyIdle)
		}
		if err != nil {
			return "", fmt.Errorf("read request: %w", err)
		}
	}
}

// handle answers one request of the sandbox: refused in the relay (not an
// endpoint, not the case's key, over a limit, carrying the canary) or
// forwarded upstream, and recorded either way.
//
// It is not an httputil.ReverseProxy on purpose: a ReverseProxy passes an
// Upgrade (and a 101 answer's raw tunnel) and 1xx answers on, forwards
// trailers, sends no User-Agent where the client sent none, drops query
// parameters it cannot parse, and aborts the connection (ErrAbortHandler)
// when the upstream fails mid-answer, where the relay ends the answer and
// records why. Each of those would change what the harness sees.
func (r *Relay) handle(w http.ResponseWriter, req *http.Request) {
	c := Call{Method: req.Method, Path: req.URL.Path, Time: time.Now(), Auth: r.auth(req)}
	defer func() { r.record(c) }()
	upPath, ep := r.route(req)
	if upPath == "" {
		refuse(w, &c, http.StatusNotFound, RefusedRoute, "not a model API endpoint of this relay")
		return
	}
	r.sequence(&c, ep)
	if c.Auth == "wrong" || c.Auth == "missing" {
		// The sandbox's key is the canary: anything else is refused
		// here, never passed on.
		refuseKey(w, &c)
		return
	}
	select {
	case r.slots <- struct{}{}:
		defer func() { <-r.slots }()
	default:
		refuse(w, &c, http.StatusTooManyRequests, RefusedBusy, fmt.Sprintf("more than %d requests at once", r.lim.Concurrent))
		return
	}
	br := &bodyReader{r: r}
	defer func() { r.release(br.held) }()
	body, ok := r.readBody(w, req, &c, br)
	if !ok {
		return
	}
	fwd, query := forwardHeaders(req.Header), forwardQuery(req.URL.RawQuery)
	if where := r.scanCanary(req, query, fwd, body); where != "" {
		r.mu.Lock()
		if len(r.bounds.Canary) < 20 {
			r.bounds.Canary = append(r.bounds.Canary, where)
		}
		r.mu.Unlock()
		refuse(w, &c, http.StatusForbidden, RefusedCanary, "the request carries the case's key ("+where+"); not forwarded")
		return
	}
	r.parseRequest(&c, ep, body)
	r.forward(w, req, &c, upPath, query, fwd, body)
}

// sequence numbers a model request: a call of a turn endpoint
// (wire.Endpoint.Turn). A GET (the model list) is none, nor is
// Anthropic's count_tokens, a POST that asks for no answer; the scripted
// model counts the same ones.
func (r *Relay) sequence(c *Call, ep wire.Endpoint) {
	if ep.Turn {
		r.mu.Lock()
		r.seq++
		c.Seq = r.seq
		r.mu.Unlock()
	}
}

// refuseKey answers a request without the case's key as the model API
// would (401, invalid_api_key).
func refuseKey(w http.ResponseWriter, c *Call) {
	c.Status = http.StatusUnauthorized
	dropBody(w)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(c.Status)
	io.WriteString(w, `{"error":{"message":"sandproof relay: the key is not this case's","type":"invalid_request_error","code":"invalid_api_key"}}`)
}

// readBody reads the request's body within the limits through br (whose
// hold the caller releases); a body over one is answered here and ok is
// false.
func (r *Relay) readBody(w http.ResponseWriter, req *http.Request, c *Call, br *bodyReader) (body []byte, ok bool) {
	if req.ContentLength > r.lim.RequestBytes {
		c.RequestBytes = req.ContentLength
		refuse(w, c, http.StatusRequestEntityTooLarge, RefusedTooLarge, fmt.Sprintf("a request body is at most %d bytes; this one says %d", r.lim.RequestBytes, req.ContentLength))
		return nil, false
	}
	reason, err := br.read(w, req)
	body = br.buf
	c.RequestBytes = int64(len(body))
	if reason == "" && err == nil {
		c.ReceivedAt = time.Now()
	}
	switch {
	case reason == RefusedTooLarge:
		refuse(w, c, http.StatusRequestEntityTooLarge, reason, fmt.Sprintf("a request body is at most %d bytes", r.lim.RequestBytes))
		return nil, false
	case reason == RefusedHeld:
		refuse(w, c, http.StatusServiceUnavailable, reason, err.Error())
		return nil, false
	case reason == RefusedBodyTimeout:
		refuse(w, c, http.StatusRequestTimeout, reason, err.Error())
		return nil, false
	case err != nil:
		c.Error = err.Error()
		dropBody(w)
		http.Error(w, "read request", http.StatusBadRequest)
		c.Status = http.StatusBadRequest
		return nil, false
	}
	return body, true
}

// forwardHeaders are the request's headers without the hop-by-hop ones
// and the keys.
func forwardHeaders(h http.Header) http.Header {
	fwd := http.Header{}
	for k, vs := range h {
		fwd[k] = vs
	}
	for _, h := range hopHeaders {
		fwd.Del(h)
	}
	return fwd
}

// upstreamGrace is how long the relay reads an upstream's answer on after
// the harness left (forward).
const upstreamGrace = 2 * time.Second

// forward sends the request upstream with the upstream key where the
// sandbox's came in (a header, or the query parameter), the query
// without the sandbox's key parameters (query), and passes the answer on
// as it arrives.
func (r *Relay) forward(w http.ResponseWriter, req *http.Request, c *Call, upPath, query string, fwd http.Header, body []byte) {
	// The upstream path: the relay's own path with the upstream's base in
	// place of the relay's (which is the same).
	target := *r.upstream
	target.Path, target.RawPath = upPath, ""
	k, inQuery := keyOf(req)
	target.RawQuery = query
	if inQuery && r.opts.UpstreamKey != "" {
		target.RawQuery = addQuery(query, k.Query, r.opts.UpstreamKey)
	}
	// The upstream is read on for upstreamGrace after the harness leaves:
	// a harness that closes once it has an answer's last event can leave
	// before the upstream's own end reaches the relay, and that answer was
	// written to it whole all the same (relayAnswer writes nothing once
	// the harness has gone). A stalled upstream is dropped after it.
	upCtx, cancel := context.WithCancel(context.WithoutCancel(req.Context()))
	defer cancel()
	stopGrace := context.AfterFunc(req.Context(), func() {
		time.AfterFunc(upstreamGrace, cancel)
		if r.opts.OnLeft != nil {
			r.opts.OnLeft(c.Seq)
		}
	})
	defer stopGrace()
	out, err := http.NewRequestWithContext(upCtx, req.Method, target.String(), bytes.NewReader(body))
	if err != nil {
		c.Error = fmt.Sprintf("build upstream request: %v", err)
		c.Status = http.StatusBadGateway
		http.Error(w, "sandproof relay: bad upstream request", c.Status)
		return
	}
	out.Header = fwd
	out.Header.Set("Accept-Encoding", "identity")
	if r.opts.UpstreamKey != "" && !inQuery {
		out.Header.Set(k.Header, k.Prefix+r.opts.UpstreamKey)
	}
	resp, err := r.client.Do(out)
	if err != nil {
		c.Error = r.redact(fmt.Sprintf("upstream: %v", err))
		c.Status = http.StatusBadGateway
		http.Error(w, "sandproof relay: upstream unreachable", c.Status)
		return
	}
	defer resp.Body.Close()
	r.relayAnswer(req.Context(), w, resp, c)
}

// relayAnswer passes the upstream's answer on chunk by chunk, keeping up
// to MaxBody of it to parse into the call once it ends, and records
// whether it was delivered whole before the harness left (ctx is the
// harness's request's).
func (r *Relay) relayAnswer(ctx context.Context, w http.ResponseWriter, resp *http.Response, c *Call) {
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	for _, h := range []string{"Connection", "Keep-Alive", "Transfer-Encoding", "Trailer", "Upgrade", "Content-Length", model.FaultHeader} {
		w.Header().Del(h)
	}
	w.Header().Del(model.SummaryHeader)
	w.Header().Del(model.ResumesHeader)
	w.WriteHeader(resp.StatusCode)
	c.Status, c.Fault = resp.StatusCode, r.text(resp.Header.Get(model.FaultHeader))
	c.Summary, c.Resumes = r.text(resp.Header.Get(model.SummaryHeader)), r.text(resp.Header.Get(model.ResumesHeader))
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	kept := &capped{max: r.opts.MaxBody}
	buf := make([]byte, 32<<10)
	rc := http.NewResponseController(w)
	whole, sent := false, true
	var lastWrite time.Time // when the last write to the harness began
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			c.Bytes += int64(n)
			kept.Write(buf[:n])
			// Nothing is written once the harness has left: a write to a
			// closed connection can still land in a buffer, and the bytes
			// would count as the harness's.
			if ctx.Err() != nil {
				c.Error = "the harness left before the answer's end"
				sent = false
				break
			}
			at := time.Now()
			if _, werr := w.Write(buf[:n]); werr != nil {
				c.Error = fmt.Sprintf("write to the harness: %v", werr)
				sent = false
				break
			}
			lastWrite = at
			// Every chunk goes on at once: an SSE stream is never held
			// back.
			if ferr := rc.Flush(); ferr != nil {
				c.Error = fmt.Sprintf("flush to the harness: %v", ferr)
				sent = false
				break
			}
		}
		if rerr == io.EOF {
			whole = true
			break
		}
		if rerr != nil {
			c.Error = r.redact(fmt.Sprintf("read upstream: %v", rerr))
			break
		}
	}
	if whole && sent {
		c.Delivered, c.DeliveredAt = delivered(ctx, w, lastWrite)
		c.WrittenAt = lastWrite
	}
	c.Truncated = kept.over
	if sse {
		r.parseSSE(c, kept.b.Bytes())
	} else {
		r.parseJSON(c, kept.b.Bytes())
	}
}

// delivered flushes what is left of a whole answer to the harness's
// connection and says whether it got there before the harness left: the
// flush succeeded, and either every chunk had been written and flushed
// while the harness was there (lastWrite, the last one's start; a harness
// may close once it has the answer's last event, before the upstream's
// end reached the relay) or, for an empty answer, the request's context,
// which the server ends when the client closes its connection, is still
// live after the flush.
func delivered(ctx context.Context, w http.ResponseWriter, lastWrite time.Time) (bool, time.Time) {
	if err := http.NewResponseController(w).Flush(); err != nil || (lastWrite.IsZero() && ctx.Err() != nil) {
		return false, time.Time{}
	}
	return true, time.Now()
}

// redact keeps the keys out of recorded errors, as they are and as a
// query carries them (an upstream error names the URL, "?key=" and all).
func (r *Relay) redact(s string) string {
	for _, k := range []struct{ key, name string }{{r.opts.UpstreamKey, "[upstream key]"}, {r.opts.SandboxKey, "[canary]"}} {
		if k.key != "" {
			s = strings.ReplaceAll(s, k.key, k.name)
			s = strings.ReplaceAll(s, url.QueryEscape(k.key), k.name)
		}
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
