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

import "net/http"

// Endpoint is one call of a model API.
type Endpoint struct {
	Method string
	// Path is below the API's base URL (".../v1"). A segment in braces,
	// "{id}", stands for one non-empty segment, as in net/http's
	// ServeMux patterns; Gemini's "/models/{model}:generateContent" will
	// need such a segment.
	Path string
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
	// Query, when not "", is a query parameter that carries the key
	// instead of a header (Gemini's "?key="). No format uses it yet: the
	// relay copies the query it forwards, so the format that does must
	// first make the relay take the parameter out (and swap in the
	// upstream key there), or the canary would go upstream.
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
)

// Formats are the wire formats, in the order the model reads a key
// (Keys).
var Formats = []Format{Chat, Responses, Messages}

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

// Pattern is e's net/http ServeMux pattern below base ("/v1").
func (e Endpoint) Pattern(base string) string { return e.Method + " " + base + e.Path }
