package relay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
)

// MaxClaimed caps the claimed tool calls recorded of one request (a
// request carries the whole conversation, so they grow with every turn).
const MaxClaimed = 64

// parseRequest reads the model, stream flag, declared tools, the tool
// results (each with the id of the call it answers) and the assistant tool
// calls the history claims of a Chat Completions, Responses or Anthropic
// Messages request.
func (r *Relay) parseRequest(c *Call, body []byte) {
	var q struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			// Chat Completions: the assistant's calls; function_call is
			// the API's older form, which has no id.
			ToolCalls []struct {
				ID       string       `json:"id"`
				Function functionCall `json:"function"`
			} `json:"tool_calls"`
			FunctionCall *functionCall `json:"function_call"`
		} `json:"messages"`
		Input json.RawMessage `json:"input"`
		Tools []struct {
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
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
	result := func(id, text string) {
		c.ToolResults = append(c.ToolResults, r.text(text))
		c.ToolResultIDs = append(c.ToolResultIDs, r.text(id))
	}
	claim := func(id, name, args string) {
		if len(c.ClaimedToolCalls) < MaxClaimed {
			c.ClaimedToolCalls = append(c.ClaimedToolCalls, ToolCall{ID: r.text(id), Name: r.text(name), Arguments: r.text(args)})
		}
	}
	for _, m := range q.Messages {
		switch m.Role {
		case "tool":
			result(m.ToolCallID, contentText(m.Content))
		case "function":
			result("", contentText(m.Content))
		case "assistant":
			for _, tc := range m.ToolCalls {
				claim(tc.ID, tc.Function.Name, tc.Function.Arguments)
			}
			if f := m.FunctionCall; f != nil {
				claim("", f.Name, f.Arguments)
			}
		}
		// Anthropic Messages: a user message's tool_result blocks, an
		// assistant message's tool_use blocks.
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
					result(b.ToolUseID, contentText(b.Content))
				case m.Role == "assistant" && b.Type == "tool_use":
					claim(b.ID, b.Name, string(b.Input))
				}
			}
		}
	}
	var items []struct {
		Type      string          `json:"type"`
		Output    json.RawMessage `json:"output"`
		CallID    string          `json:"call_id"`
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
		Input     string          `json:"input"`
	}
	if len(q.Input) > 0 && json.Unmarshal(q.Input, &items) == nil {
		for _, it := range items {
			switch it.Type {
			case "function_call_output", "custom_tool_call_output":
				result(it.CallID, contentText(it.Output))
			case "function_call":
				claim(it.CallID, it.Name, it.Arguments)
			case "custom_tool_call":
				claim(it.CallID, it.Name, it.Input)
			}
		}
	}
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
	type acc struct {
		id, name string
		args     strings.Builder
	}
	var calls []*acc
	var blocks []*acc // Anthropic tool_use blocks by index
	var text strings.Builder
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
		for _, ch := range a.Choices {
			if ch.Delta == nil {
				continue
			}
			text.WriteString(ch.Delta.Content)
			for _, tc := range ch.Delta.ToolCalls {
				for len(calls) <= tc.Index && tc.Index < 64 {
					calls = append(calls, &acc{})
				}
				if tc.Index >= len(calls) {
					continue
				}
				if tc.Function.Name != "" {
					calls[tc.Index].name = tc.Function.Name
				}
				// The id comes with the call's first chunk; some servers
				// repeat it in every one.
				if tc.ID != "" && calls[tc.Index].id == "" {
					calls[tc.Index].id = tc.ID
				}
				if calls[tc.Index].args.Len() < r.opts.MaxBody {
					calls[tc.Index].args.WriteString(tc.Function.Arguments)
				}
			}
		}
		switch a.Type {
		case "message_start":
			if a.Message != nil && a.Message.Usage != nil {
				c.Usage = &Usage{Input: a.Message.Usage.InputTokens, Output: a.Message.Usage.OutputTokens}
			}
			continue
		case "content_block_start":
			if b := a.ContentBlock; b != nil && b.Type == "tool_use" && a.Index >= 0 && a.Index < 64 {
				for len(blocks) <= a.Index {
					blocks = append(blocks, nil)
				}
				blocks[a.Index] = &acc{id: b.ID, name: b.Name}
			}
			continue
		case "content_block_delta":
			var d struct {
				Text        string `json:"text"`
				PartialJSON string `json:"partial_json"`
			}
			if json.Unmarshal(a.Delta, &d) == nil {
				text.WriteString(d.Text)
				if a.Index >= 0 && a.Index < len(blocks) && blocks[a.Index] != nil && blocks[a.Index].args.Len() < r.opts.MaxBody {
					blocks[a.Index].args.WriteString(d.PartialJSON)
				}
			}
			continue
		case "message_delta":
			if a.Usage != nil {
				if c.Usage == nil {
					c.Usage = &Usage{}
				}
				c.Usage.Output = a.Usage.OutputTokens
			}
			continue
		}
		if a.Usage != nil {
			c.Usage = &Usage{Input: a.Usage.PromptTokens + a.Usage.InputTokens, Output: a.Usage.CompletionTokens + a.Usage.OutputTokens}
		}
		if a.Type == "response.completed" && a.Response != nil {
			r.responsesItems(c, a.Response.Output, &text)
			if u := a.Response.Usage; u != nil {
				c.Usage = &Usage{Input: u.InputTokens, Output: u.OutputTokens}
			}
		}
	}
	for _, a := range calls {
		c.ToolCalls = append(c.ToolCalls, r.toolCall(a.id, a.name, a.args.String()))
	}
	for _, a := range blocks {
		if a != nil {
			c.ToolCalls = append(c.ToolCalls, r.toolCall(a.id, a.name, a.args.String()))
		}
	}
	c.Text = r.text(text.String())
}

// toolCall records one tool call, each text capped.
func (r *Relay) toolCall(id, name, args string) ToolCall {
	return ToolCall{ID: r.text(id), Name: r.text(name), Arguments: r.text(args)}
}
