package relay

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/sandproof/sandproof/runner/wire"
)

// Google's Gemini API (wire.Gemini), as the relay reads it with its own
// decoders (never the scripted model's: the relay is the witness). The
// model and the stream are the path's (the "{model}" segment, the
// streaming verb), not the body's. A model's functionCall usually has no
// id; a client may give its functionResponse one of its own (Gemini CLI
// does), which the history's functionCall then carries too: the chain
// proof links such a result by tool and arguments (contract §7.4).

// geminiContent is one content of a request's history: a role ("user",
// "model"; "function" in older clients) and its parts.
type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

// geminiPart is a part of a content or of an answer's candidate: text (a
// thought when Thought is set), a functionCall or a functionResponse.
type geminiPart struct {
	Text             string      `json:"text"`
	Thought          bool        `json:"thought"`
	FunctionCall     *geminiCall `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

// geminiCall is a functionCall: its name, its args object, and the id a
// client or the API may give it.
type geminiCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// args is the call's arguments as a JSON text ("{}" for none).
func (g geminiCall) args() string {
	if len(g.Args) == 0 || string(g.Args) == "null" {
		return "{}"
	}
	return string(g.Args)
}

// geminiPath reads what a Gemini call's path says: its model (the
// "{model}" segment) and, for the streaming verb, that it streams.
func (r *Relay) geminiPath(c *Call, ep wire.Endpoint) {
	if ep.Stream {
		c.Stream = true
	}
	if vals, ok := wire.Match(ep.FullPath(strings.TrimRight(r.upstream.Path, "/")), c.Path); ok && vals["model"] != "" && c.Model == "" {
		c.Model = r.text(vals["model"])
	}
}

// geminiContents reads a request's contents: each model content's calls
// (claimed), each other content's function responses (results, with the
// ids the client gave them), and each content's turn.
func (h history) geminiContents(contents []geminiContent) {
	for _, m := range contents {
		var t Turn
		if m.Role == "model" {
			t.role = "assistant"
		}
		for _, p := range m.Parts {
			switch {
			case p.Thought:
			case m.Role == "model" && p.FunctionCall != nil:
				h.claim(p.FunctionCall.ID, p.FunctionCall.Name, p.FunctionCall.args())
				t.Call(p.FunctionCall.Name, p.FunctionCall.args())
			case m.Role != "model" && p.FunctionResponse != nil:
				text := geminiResponseText(p.FunctionResponse.Response)
				h.result(p.FunctionResponse.ID, text)
				t.Result(text)
			case p.Text != "":
				t.Text(p.Text)
			}
		}
		h.turn(t)
	}
}

// geminiResponseText is a functionResponse's response as text: its
// string values in key order, one a line (Gemini CLI sends {"output":
// "..."}; the challenge's check reads the text, not its JSON escapes);
// the JSON as sent when it holds none.
func geminiResponseText(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	var lines []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			lines = append(lines, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				walk(v[k])
			}
		}
	}
	walk(v)
	if len(lines) == 0 {
		return string(raw)
	}
	return strings.Join(lines, "\n")
}

// geminiAnswer is a GenerateContentResponse, a plain answer or one SSE
// data line of a stream: its candidates' parts and its usageMetadata.
type geminiAnswer struct {
	Candidates []struct {
		Content struct {
			Parts []geminiPart `json:"parts"`
		} `json:"content"`
	} `json:"candidates"`
	UsageMetadata *struct {
		PromptTokenCount     int `json:"promptTokenCount"`
		CandidatesTokenCount int `json:"candidatesTokenCount"`
	} `json:"usageMetadata"`
}

// geminiCandidates reads a GenerateContentResponse (a plain answer, or one
// chunk of a stream, whose calls arrive whole): its text, its calls and
// its usage (a stream's last usageMetadata holds the whole answer's).
func (r *Relay) geminiCandidates(c *Call, a geminiAnswer, text *strings.Builder) {
	for _, cand := range a.Candidates {
		for _, p := range cand.Content.Parts {
			switch {
			case p.Thought:
			case p.FunctionCall != nil:
				if len(c.ToolCalls) < MaxClaimed {
					c.ToolCalls = append(c.ToolCalls, r.toolCall(p.FunctionCall.ID, p.FunctionCall.Name, p.FunctionCall.args()))
				}
			default:
				text.WriteString(p.Text)
			}
		}
	}
	if u := a.UsageMetadata; u != nil {
		c.Usage = &Usage{Input: u.PromptTokenCount, Output: u.CandidatesTokenCount}
	}
}
