package relay

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/sandproof/sandproof/runner/wire"
)

// MaxClaimed caps the claimed tool calls recorded of one request (a
// request carries the whole conversation, so they grow with every turn).
const MaxClaimed = 64

// MaxHistory caps the turn digests recorded of one request (Call.History).
const MaxHistory = 64

// request is the envelope of a Chat Completions, Responses, Anthropic
// Messages or Gemini request: every field any of the four carries that
// the relay reads, decoded in one json.Unmarshal, so a body that fails to
// decode is read for none of them (all or nothing, as before the formats
// had a file each). Each format's reader then takes its part, in this
// order: messages (Chat Completions, then Anthropic Messages), then input
// (Responses), then contents (Gemini).
type request struct {
	Model    string           `json:"model"`
	Stream   bool             `json:"stream"`
	Messages []requestMessage `json:"messages"`
	Input    json.RawMessage  `json:"input"`
	Contents []geminiContent  `json:"contents"`
	Tools    []struct {
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
		// FunctionDeclarations are Gemini's: one tools entry
		// declares many functions.
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
}

// requestMessage is one message of a request's history: a Chat
// Completions or an Anthropic Messages one (its content blocks are read
// from Content, transcript_messages.go).
type requestMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	chatMessage
}

// parseRequest reads the model, stream flag, declared tools, the tool
// results (each with the id of the call it answers) and the assistant tool
// calls the history claims of a Chat Completions, Responses, Anthropic
// Messages or Gemini request (ep is its endpoint: Gemini's path names the
// model and the stream).
func (r *Relay) parseRequest(c *Call, ep wire.Endpoint, body []byte) {
	var q request
	if json.Unmarshal(body, &q) != nil {
		return
	}
	c.Model, c.Stream = q.Model, q.Stream
	r.geminiPath(c, ep)
	for _, t := range q.Tools {
		n := t.Function.Name
		if n == "" {
			n = t.Name
		}
		names := []string{n}
		for _, f := range t.FunctionDeclarations {
			names = append(names, f.Name)
		}
		for _, n := range names {
			if n != "" && len(c.Tools) < 64 {
				c.Tools = append(c.Tools, r.text(n))
			}
		}
	}
	h := history{r: r, c: c}
	for _, m := range q.Messages {
		h.chatMessage(m)
		h.messagesContent(m)
		h.turn(messageTurn(m))
	}
	h.responsesInput(q.Input)
	h.geminiContents(q.Contents)
}

// history records a request's tool results and claimed tool calls into
// its call, each text capped.
type history struct {
	r *Relay
	c *Call
}

func (h history) result(id, text string) {
	h.c.ToolResults = append(h.c.ToolResults, h.r.text(text))
	h.c.ToolResultIDs = append(h.c.ToolResultIDs, h.r.text(id))
}

func (h history) claim(id, name, args string) {
	if len(h.c.ClaimedToolCalls) < MaxClaimed {
		h.c.ClaimedToolCalls = append(h.c.ClaimedToolCalls, ToolCall{ID: h.r.text(id), Name: h.r.text(name), Arguments: h.r.text(args)})
	}
}

// Turn is what one turn of a conversation says, built part by part and
// digested whole (Digest): the same turn sent again, whatever ids, cache
// markers or JSON spacing it carries, has the same digest.
type Turn struct {
	role  string // "user" or "assistant", as the API names it; "" for a tool result
	text  bool   // a text part was added
	parts []string
}

// Text adds a text part.
func (t *Turn) Text(s string) {
	t.text = true
	t.parts = append(t.parts, "t\x00"+s)
}

// Call adds an assistant's tool call: its name and its arguments, a JSON
// text re-encoded (keys sorted, no spacing) where it is one.
func (t *Turn) Call(name, args string) {
	t.role = "assistant"
	t.parts = append(t.parts, "c\x00"+name+"\x00"+canonicalJSON(args))
}

// Result adds a tool result's text.
func (t *Turn) Result(s string) { t.parts = append(t.parts, "r\x00"+s) }

// Digest is the turn's entry in Call.History, "" for a turn that says
// nothing (a system prompt, a reasoning item, an empty message): "u", "a"
// or "r" (user text, assistant, tool results only) and 16 hex digits of
// the SHA-256 of its parts.
func (t Turn) Digest() string {
	if len(t.parts) == 0 {
		return ""
	}
	kind := "r"
	switch {
	case t.role == "assistant":
		kind = "a"
	case t.text:
		kind = "u"
	}
	sum := sha256.Sum256([]byte(kind + "\x1e" + strings.Join(t.parts, "\x1e")))
	return kind + hex.EncodeToString(sum[:8])
}

// canonicalJSON re-encodes a JSON text with its keys sorted and no
// spacing; any other text is kept as it is.
func canonicalJSON(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return s
	}
	return string(b)
}

// turn records a turn's digest, a turn that says nothing left out.
func (h history) turn(t Turn) {
	d := t.Digest()
	switch {
	case d == "":
	case len(h.c.History) < MaxHistory:
		h.c.History = append(h.c.History, d)
	default:
		h.c.HistoryDropped++
	}
}

// messageTurn is a Chat Completions or Anthropic Messages message as a
// turn: a tool or function message is a result; a user or assistant one
// is its content (contentTurn) and, for an assistant's, the Chat
// Completions calls beside it. A system or developer message says
// nothing of the conversation.
func messageTurn(m requestMessage) Turn {
	switch m.Role {
	case "tool", "function":
		var t Turn
		t.Result(contentText(m.Content))
		return t
	case "user", "assistant":
		t := contentTurn(m.Role, m.Content)
		for _, tc := range m.ToolCalls {
			t.Call(tc.Function.Name, tc.Function.Arguments)
		}
		if f := m.FunctionCall; f != nil {
			t.Call(f.Name, f.Arguments)
		}
		return t
	}
	return Turn{}
}

// contentTurn is a user's or an assistant's content as a turn: a string,
// or blocks (text, input_text, output_text; Anthropic's tool_use and
// tool_result); images and other blocks say nothing here.
func contentTurn(role string, raw json.RawMessage) Turn {
	t := Turn{}
	if role == "assistant" {
		t.role = role
	} else if role != "user" {
		return t
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s != "" {
			t.Text(s)
		}
		return t
	}
	var blocks []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Name    string          `json:"name"`
		Input   json.RawMessage `json:"input"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return t
	}
	for _, b := range blocks {
		switch b.Type {
		case "text", "input_text", "output_text":
			t.Text(b.Text)
		case "tool_use":
			t.Call(b.Name, string(b.Input))
		case "tool_result":
			t.Result(contentText(b.Content))
		}
	}
	return t
}

// contentText flattens a content: a string or a list of parts with text.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text   string `json:"text"`
		Output string `json:"output"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return string(raw)
	}
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text + p.Output)
	}
	return b.String()
}

// answer is the envelope of an answer or of one event of a stream: each
// format's part (a Chat Completions object or chunk, a Responses object
// or event, an Anthropic Messages answer or event), decoded in one
// json.Unmarshal, and the fields they share.
type answer struct {
	chatAnswer
	responsesAnswer
	messagesAnswer
	geminiAnswer
	// Usage is Chat Completions' (prompt_, completion_tokens), or a
	// Responses answer's or a Messages message_delta's (input_,
	// output_tokens).
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		InputTokens      int `json:"input_tokens"`
		OutputTokens     int `json:"output_tokens"`
	} `json:"usage"`
	// Type is a Responses or a Messages event's.
	Type string `json:"type"`
	// Delta is raw: a Responses event's delta is a string, a Messages
	// content_block_delta's an object.
	Delta json.RawMessage `json:"delta"`
}

// parseJSON reads a plain answer.
func (r *Relay) parseJSON(c *Call, body []byte) {
	var a answer
	if json.Unmarshal(body, &a) != nil {
		return
	}
	var text strings.Builder
	r.chatChoices(c, a.chatAnswer, &text)
	r.responsesItems(c, a.Output, &text)
	r.messagesBlocks(c, a.messagesAnswer, &text)
	r.geminiCandidates(c, a.geminiAnswer, &text)
	if a.Usage != nil {
		c.Usage = &Usage{Input: a.Usage.PromptTokens + a.Usage.InputTokens, Output: a.Usage.CompletionTokens + a.Usage.OutputTokens}
	}
	c.Text = r.text(text.String())
}

// parseSSE reads a streamed answer: Chat Completions chunks (tool call
// arguments arrive in pieces, by index), Responses events (the final
// response.completed holds the output), Anthropic Messages events
// (tool_use blocks whose input arrives as input_json_delta pieces, by
// block index; input tokens in message_start, output in message_delta) or
// Gemini's GenerateContentResponse chunks (calls whole in one).
func (r *Relay) parseSSE(c *Call, body []byte) {
	st := &sseState{r: r, c: c}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), len(body)+1)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		c.Chunks++
		d = strings.TrimSpace(d)
		if d == "[DONE]" {
			continue
		}
		var a answer
		if json.Unmarshal([]byte(d), &a) != nil {
			continue
		}
		st.chatDeltas(a)
		st.r.geminiCandidates(c, a.geminiAnswer, &st.text)
		if st.messagesEvent(a) {
			continue
		}
		if a.Usage != nil {
			c.Usage = &Usage{Input: a.Usage.PromptTokens + a.Usage.InputTokens, Output: a.Usage.CompletionTokens + a.Usage.OutputTokens}
		}
		st.responsesEvent(a)
	}
	for _, a := range st.calls {
		c.ToolCalls = append(c.ToolCalls, r.toolCall(a.id, a.name, a.args.String()))
	}
	for _, a := range st.blocks {
		if a != nil {
			c.ToolCalls = append(c.ToolCalls, r.toolCall(a.id, a.name, a.args.String()))
		}
	}
	c.Text = r.text(st.text.String())
}

// sseState is what a stream's events build up before the call is
// recorded: Chat Completions calls and Anthropic tool_use blocks by index
// (at most 64 of each), and the answer's text.
type sseState struct {
	r      *Relay
	c      *Call
	calls  []*toolAcc
	blocks []*toolAcc
	text   strings.Builder
}

// toolAcc is one streamed tool call, its arguments arriving in pieces.
type toolAcc struct {
	id, name string
	args     strings.Builder
}

// toolCall records one tool call, each text capped.
func (r *Relay) toolCall(id, name, args string) ToolCall {
	return ToolCall{ID: r.text(id), Name: r.text(name), Arguments: r.text(args)}
}
