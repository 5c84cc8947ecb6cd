package relay

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// MaxClaimed caps the claimed tool calls recorded of one request (a
// request carries the whole conversation, so they grow with every turn).
const MaxClaimed = 64

// MaxHistory caps the turn digests recorded of one request (Call.History).
const MaxHistory = 64

// request is the part of a Chat Completions, Responses or Anthropic
// Messages request the relay reads.
type request struct {
	Model    string           `json:"model"`
	Stream   bool             `json:"stream"`
	Messages []requestMessage `json:"messages"`
	Input    json.RawMessage  `json:"input"`
	Tools    []struct {
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

// requestMessage is one message of a request's history.
type requestMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	// Chat Completions: the assistant's calls; function_call is the
	// API's older form, which has no id.
	ToolCalls []struct {
		ID       string       `json:"id"`
		Function functionCall `json:"function"`
	} `json:"tool_calls"`
	FunctionCall *functionCall `json:"function_call"`
}

// parseRequest reads the model, stream flag, declared tools, the tool
// results (each with the id of the call it answers) and the assistant tool
// calls the history claims of a Chat Completions, Responses or Anthropic
// Messages request.
func (r *Relay) parseRequest(c *Call, body []byte) {
	var q request
	if json.Unmarshal(body, &q) != nil {
		return
	}
	c.Model, c.Stream = q.Model, q.Stream
	for _, t := range q.Tools {
		n := t.Function.Name
		if n == "" {
			n = t.Name
		}
		if n != "" && len(c.Tools) < 64 {
			c.Tools = append(c.Tools, r.text(n))
		}
	}
	h := history{r: r, c: c}
	for _, m := range q.Messages {
		h.message(m)
		h.turn(messageTurn(m))
	}
	h.responsesInput(q.Input)
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

// message reads one message: Chat Completions' tool and function results
// and assistant calls, then Anthropic Messages' content blocks (a user
// message's tool_result blocks, an assistant message's tool_use blocks).
func (h history) message(m requestMessage) {
	switch m.Role {
	case "tool":
		h.result(m.ToolCallID, contentText(m.Content))
	case "function":
		h.result("", contentText(m.Content))
	case "assistant":
		for _, tc := range m.ToolCalls {
			h.claim(tc.ID, tc.Function.Name, tc.Function.Arguments)
		}
		if f := m.FunctionCall; f != nil {
			h.claim("", f.Name, f.Arguments)
		}
	}
	var blocks []struct {
		Type      string          `json:"type"`
		Content   json.RawMessage `json:"content"`
		ToolUseID string          `json:"tool_use_id"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	}
	if (m.Role == "user" || m.Role == "assistant") && json.Unmarshal(m.Content, &blocks) == nil {
		for _, b := range blocks {
			switch {
			case m.Role == "user" && b.Type == "tool_result":
				h.result(b.ToolUseID, contentText(b.Content))
			case m.Role == "assistant" && b.Type == "tool_use":
				h.claim(b.ID, b.Name, string(b.Input))
			}
		}
	}
}

// responsesInput reads a Responses request's input items: the call
// outputs and the calls they answer, and each item's turn (an input that
// is one string is one user turn).
func (h history) responsesInput(input json.RawMessage) {
	var items []struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		Output    json.RawMessage `json:"output"`
		CallID    string          `json:"call_id"`
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
		Input     string          `json:"input"`
	}
	var one string
	if len(input) > 0 && json.Unmarshal(input, &one) == nil {
		var t Turn
		t.Text(one)
		h.turn(t)
		return
	}
	if len(input) > 0 && json.Unmarshal(input, &items) == nil {
		for _, it := range items {
			var t Turn
			switch it.Type {
			case "function_call_output", "custom_tool_call_output":
				h.result(it.CallID, contentText(it.Output))
				t.Result(contentText(it.Output))
			case "function_call":
				h.claim(it.CallID, it.Name, it.Arguments)
				t.Call(it.Name, it.Arguments)
			case "custom_tool_call":
				h.claim(it.CallID, it.Name, it.Input)
				t.Call(it.Name, it.Input)
			case "message", "":
				t = contentTurn(it.Role, it.Content)
			}
			h.turn(t)
		}
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

// functionCall is a Chat Completions call's function: its name and its
// arguments, a JSON text.
type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
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

// answer is the part of an answer the relay reads: a Chat Completions
// object or chunk, or a Responses object or event.
type answer struct {
	Choices []struct {
		Index   int `json:"index"`
		Message *struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				ID       string       `json:"id"`
				Function functionCall `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		Delta *struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				Index    int          `json:"index"`
				ID       string       `json:"id"`
				Function functionCall `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		InputTokens      int `json:"input_tokens"`
		OutputTokens     int `json:"output_tokens"`
	} `json:"usage"`
	// Responses API.
	Type     string           `json:"type"`
	Output   []responsesItem  `json:"output"`
	Response *responsesObject `json:"response"`
	// Anthropic Messages: a plain answer's content blocks; a stream's
	// message_start (message.usage), content_block_start (index,
	// content_block), content_block_delta (index, delta) and
	// message_delta (usage) events.
	Content      []messagesBlock `json:"content"`
	Message      *messagesObject `json:"message"`
	Index        int             `json:"index"`
	ContentBlock *messagesBlock  `json:"content_block"`
	// Delta is raw: a Responses event's delta is a string.
	Delta json.RawMessage `json:"delta"`
}

// messagesBlock is an Anthropic content block: text, or a tool_use with
// its id and input object.
type messagesBlock struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type messagesObject struct {
	Usage *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

type responsesObject struct {
	Output []responsesItem `json:"output"`
	Usage  *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// responsesItem is a Responses output item: a function_call (its call_id
// is what the function_call_output answering it names; id is the item's
// own), a custom_tool_call (its arguments a free text, input) or a message.
type responsesItem struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Input     string `json:"input"`
	Content   []struct {
		Text string `json:"text"`
	} `json:"content"`
}

// parseJSON reads a plain answer.
func (r *Relay) parseJSON(c *Call, body []byte) {
	var a answer
	if json.Unmarshal(body, &a) != nil {
		return
	}
	var text strings.Builder
	for _, ch := range a.Choices {
		if ch.Message == nil {
			continue
		}
		text.WriteString(ch.Message.Content)
		for _, tc := range ch.Message.ToolCalls {
			c.ToolCalls = append(c.ToolCalls, r.toolCall(tc.ID, tc.Function.Name, tc.Function.Arguments))
		}
	}
	r.responsesItems(c, a.Output, &text)
	for _, b := range a.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			c.ToolCalls = append(c.ToolCalls, r.toolCall(b.ID, b.Name, string(b.Input)))
		}
	}
	if a.Usage != nil {
		c.Usage = &Usage{Input: a.Usage.PromptTokens + a.Usage.InputTokens, Output: a.Usage.CompletionTokens + a.Usage.OutputTokens}
	}
	c.Text = r.text(text.String())
}

func (r *Relay) responsesItems(c *Call, items []responsesItem, text *strings.Builder) {
	for _, it := range items {
		switch it.Type {
		case "function_call":
			c.ToolCalls = append(c.ToolCalls, r.toolCall(it.CallID, it.Name, it.Arguments))
		case "custom_tool_call":
			c.ToolCalls = append(c.ToolCalls, r.toolCall(it.CallID, it.Name, it.Input))
		case "message":
			for _, p := range it.Content {
				text.WriteString(p.Text)
			}
		}
	}
}

// parseSSE reads a streamed answer: Chat Completions chunks (tool call
// arguments arrive in pieces, by index), Responses events (the final
// response.completed holds the output) or Anthropic Messages events
// (tool_use blocks whose input arrives as input_json_delta pieces, by
// block index; input tokens in message_start, output in message_delta).
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
		if st.messagesEvent(a) {
			continue
		}
		if a.Usage != nil {
			c.Usage = &Usage{Input: a.Usage.PromptTokens + a.Usage.InputTokens, Output: a.Usage.CompletionTokens + a.Usage.OutputTokens}
		}
		if a.Type == "response.completed" && a.Response != nil {
			r.responsesItems(c, a.Response.Output, &st.text)
			if u := a.Response.Usage; u != nil {
				c.Usage = &Usage{Input: u.InputTokens, Output: u.OutputTokens}
			}
		}
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

// chatDeltas adds a Chat Completions chunk's text and tool call pieces.
func (st *sseState) chatDeltas(a answer) {
	for _, ch := range a.Choices {
		if ch.Delta == nil {
			continue
		}
		st.text.WriteString(ch.Delta.Content)
		for _, tc := range ch.Delta.ToolCalls {
			for len(st.calls) <= tc.Index && tc.Index < 64 {
				st.calls = append(st.calls, &toolAcc{})
			}
			if tc.Index >= len(st.calls) {
				continue
			}
			call := st.calls[tc.Index]
			if tc.Function.Name != "" {
				call.name = tc.Function.Name
			}
			// The id comes with the call's first chunk; some servers
			// repeat it in every one.
			if tc.ID != "" && call.id == "" {
				call.id = tc.ID
			}
			if call.args.Len() < st.r.opts.MaxBody {
				call.args.WriteString(tc.Function.Arguments)
			}
		}
	}
}

// messagesEvent reads an Anthropic Messages event; it reports whether a
// was one (the rest of the event's reading is then skipped).
func (st *sseState) messagesEvent(a answer) bool {
	c := st.c
	switch a.Type {
	case "message_start":
		if a.Message != nil && a.Message.Usage != nil {
			c.Usage = &Usage{Input: a.Message.Usage.InputTokens, Output: a.Message.Usage.OutputTokens}
		}
	case "content_block_start":
		if b := a.ContentBlock; b != nil && b.Type == "tool_use" && a.Index >= 0 && a.Index < 64 {
			for len(st.blocks) <= a.Index {
				st.blocks = append(st.blocks, nil)
			}
			st.blocks[a.Index] = &toolAcc{id: b.ID, name: b.Name}
		}
	case "content_block_delta":
		var d struct {
			Text        string `json:"text"`
			PartialJSON string `json:"partial_json"`
		}
		if json.Unmarshal(a.Delta, &d) == nil {
			st.text.WriteString(d.Text)
			if a.Index >= 0 && a.Index < len(st.blocks) && st.blocks[a.Index] != nil && st.blocks[a.Index].args.Len() < st.r.opts.MaxBody {
				st.blocks[a.Index].args.WriteString(d.PartialJSON)
			}
		}
	case "message_delta":
		if a.Usage != nil {
			if c.Usage == nil {
				c.Usage = &Usage{}
			}
			c.Usage.Output = a.Usage.OutputTokens
		}
	default:
		return false
	}
	return true
}

// toolCall records one tool call, each text capped.
func (r *Relay) toolCall(id, name, args string) ToolCall {
	return ToolCall{ID: r.text(id), Name: r.text(name), Arguments: r.text(args)}
}
