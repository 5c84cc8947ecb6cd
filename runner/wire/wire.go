// Package wire is the one home of the model API wire formats' routing and
// key facts: each format's endpoints (method, path below the API's base
// URL, whether a call is a model turn), where the key is carried, and the
// endpoints every format shares (GET /models, /models/{id}). The scripted
// model (runner/model) registers its routes from this table; the recording
// relay (runner/host/relay) forwards exactly its routes, counts its turns
// and reads, and swaps, the keys it names. A new format is an entry here
// and one file in each of those packages (docs/add-wire-format.md).
//
// Only routing and key facts are shared, never the bodies' shapes. The
// relay is the witness of what the harness and the model said to each
// other: if it decoded bodies with the model's structs, one mistake would
// be written by the model and read back the same way by the relay, and
// nothing would show it. So each side keeps its own decoders (the
// model's wire_<format>.go, the relay's transcript_<format>.go), and the
// relay never re-encodes what it passes on. This package imports the
// standard library only, so both can import it without importing each
// other.
package wire

import (
	"net/http"
	"strings"
)

// Endpoint is one call of a model API.
type Endpoint struct {
	Method string
	// Path is below the API's base URL (".../v1"), or below Root when
	// Root is set. A segment in braces, "{id}", stands for one non-empty
	// segment, as in net/http's ServeMux patterns; a segment "{name}:verb"
	// for a non-empty name without ":" followed by ":verb", Gemini's
	// "/models/{model}:generateContent", which a ServeMux pattern cannot
	// say (Match reads both; MuxPattern is what a ServeMux can take).
	Path string
	// Root, when not "", is the path the format's clients put before Path
	// themselves, below the origin they were given, whatever base path
	// the other formats use: Gemini's clients are given an origin
	// (GOOGLE_GEMINI_BASE_URL, an adapter's {model_origin}) and send
	// "/v1beta/models/...". The model serves such an endpoint at
	// Root+Path on its origin; the relay accepts it there and forwards it
	// to the upstream's origin at the same path (the upstream URL's own
	// path is not used for it). "" means below the base URL.
	Root string
	// Stream says every call of the endpoint streams, whatever its body
	// says (Gemini's streamGenerateContent: the verb, not a body field,
	// asks for a stream).
	Stream bool
	// Turn says a call asks the model for an answer: a model call, which
	// the model and the relay number (their Call.Seq) and the evidence
	// counts. A token count or a model list is not one.
	Turn bool
}

// Key is where a format's client carries its API key.
type Key struct {
	// Header is the header's canonical name.
	Header string
	// Prefix comes before the key in the header's value ("Bearer "); ""
	// means the value is the key.
	Prefix string
	// Query, when not "", is a query parameter that may carry the key
	// instead of the header (Gemini's "?key="). The relay takes every
	// such parameter out of the query it forwards (and puts the upstream
	// key there when the sandbox's key came in it), so the canary never
	// goes upstream; the model reads it too.
	Query string
}

// Format is one wire format: its name, its endpoints and its key.
type Format struct {
	Name      string
	Endpoints []Endpoint
	Key       Key
}

// bearer is OpenAI's key: "Authorization: Bearer KEY".
var bearer = Key{Header: "Authorization", Prefix: "Bearer "}

// The endpoints a package names one by one (the model answers each with
// its own handler).
var (
	// CountTokens is Anthropic's token count: asks for no answer.
	CountTokens = Endpoint{Method: http.MethodPost, Path: "/messages/count_tokens"}
	// ModelList and ModelGet are the model list and one model of it.
	ModelList = Endpoint{Method: http.MethodGet, Path: "/models"}
	ModelGet  = Endpoint{Method: http.MethodGet, Path: "/models/{id}"}
)

var (
	// Chat is OpenAI's Chat Completions.
	Chat = Format{Name: "chat", Key: bearer, Endpoints: []Endpoint{
		{Method: http.MethodPost, Path: "/chat/completions", Turn: true}}}
	// Responses is OpenAI's Responses API.
	Responses = Format{Name: "responses", Key: bearer, Endpoints: []Endpoint{
		{Method: http.MethodPost, Path: "/responses", Turn: true}}}
	// Messages is Anthropic's Messages API.
	Messages = Format{Name: "messages", Key: Key{Header: "X-Api-Key"}, Endpoints: []Endpoint{
		{Method: http.MethodPost, Path: "/messages", Turn: true}, CountTokens}}
	// Gemini is Google's Gemini API (generateContent), what Gemini CLI
	// speaks: the model is a path segment, the verb after it says
	// whether the answer streams, the key is in x-goog-api-key or
	// "?key=", and the clients put the version, "/v1beta", in the path
	// themselves (Endpoint.Root).
	Gemini = Format{Name: "gemini", Key: Key{Header: "X-Goog-Api-Key", Query: "key"}, Endpoints: []Endpoint{
		GeminiGenerate, GeminiStream, GeminiCountTokens}}
)

// Gemini's endpoints, each named because the model answers countTokens
// with its own handler and tests name the others.
var (
	GeminiGenerate    = Endpoint{Method: http.MethodPost, Root: geminiRoot, Path: "/models/{model}:generateContent", Turn: true}
	GeminiStream      = Endpoint{Method: http.MethodPost, Root: geminiRoot, Path: "/models/{model}:streamGenerateContent", Turn: true, Stream: true}
	GeminiCountTokens = Endpoint{Method: http.MethodPost, Root: geminiRoot, Path: "/models/{model}:countTokens"}
)

// geminiRoot is the version Gemini's clients put in the path.
const geminiRoot = "/v1beta"

// Formats are the wire formats, in the order the model reads a key
// (Keys).
var Formats = []Format{Chat, Responses, Messages, Gemini}

// Common are the endpoints of every format, with the key of any.
var Common = []Endpoint{ModelList, ModelGet}

// KeyAliases are the key headers the relay accepts besides the formats'
// (Azure-style clients send "api-key"); the scripted model never accepted
// them, so they are the relay's only.
var KeyAliases = []Key{{Header: "Api-Key"}}

// Endpoints are every format's endpoints, then Common's.
func Endpoints() []Endpoint {
	var out []Endpoint
	for _, f := range Formats {
		out = append(out, f.Endpoints...)
	}
	return append(out, Common...)
}

// Keys are the formats' keys, each once, in Formats' order.
func Keys() []Key {
	var out []Key
	for _, f := range Formats {
		seen := false
		for _, k := range out {
			seen = seen || k == f.Key
		}
		if !seen {
			out = append(out, f.Key)
		}
	}
	return out
}

// FullPath is e's path from the origin: below Root when e has one, else
// below base ("/v1", the base URL's path).
func (e Endpoint) FullPath(base string) string {
	if e.Root != "" {
		return e.Root + e.Path
	}
	return base + e.Path
}

// Pattern is e's method and path from the origin (FullPath), as a
// net/http ServeMux pattern would be written; a "{name}:verb" segment
// makes it one a ServeMux cannot take (MuxPattern).
func (e Endpoint) Pattern(base string) string { return e.Method + " " + e.FullPath(base) }

// MuxPattern is the ServeMux pattern that holds e's calls: Pattern with
// each "{name}:verb" segment widened to "{name}". Several endpoints can
// share one (Gemini's three verbs), so its handler must tell them apart
// with Match.
func (e Endpoint) MuxPattern(base string) string {
	segs := strings.Split(e.FullPath(base), "/")
	for i, seg := range segs {
		if name, _, ok := verbSegment(seg); ok {
			segs[i] = "{" + name + "}"
		}
	}
	return e.Method + " " + strings.Join(segs, "/")
}

// verbSegment reads a "{name}:verb" segment.
func verbSegment(seg string) (name, verb string, ok bool) {
	if !strings.HasPrefix(seg, "{") {
		return "", "", false
	}
	name, verb, ok = strings.Cut(seg[1:], "}:")
	return name, verb, ok && name != "" && verb != "" && !strings.ContainsAny(verb, "{}:")
}

// Match says whether path p is the path pattern pat, segment by segment,
// and gives the values of its braced segments by name: a "{name}"
// segment stands for one non-empty segment ("/models/{id}" is one model,
// never "/models/" or "/models/a/b"); a "{name}:verb" segment for a
// non-empty name without ":" followed by ":verb" ("fake:generateContent",
// never ":generateContent" or "a:b:generateContent"); any other segment
// for itself.
func Match(pat, p string) (map[string]string, bool) {
	ps, qs := strings.Split(pat, "/"), strings.Split(p, "/")
	if len(ps) != len(qs) {
		return nil, false
	}
	vals := map[string]string{}
	for i, seg := range ps {
		if name, verb, ok := verbSegment(seg); ok {
			v, found := strings.CutSuffix(qs[i], ":"+verb)
			if !found || v == "" || strings.Contains(v, ":") {
				return nil, false
			}
			vals[name] = v
			continue
		}
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			if qs[i] == "" {
				return nil, false
			}
			vals[seg[1:len(seg)-1]] = qs[i]
			continue
		}
		if seg != qs[i] {
			return nil, false
		}
	}
	return vals, true
}
