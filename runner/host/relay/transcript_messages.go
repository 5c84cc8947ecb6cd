package relay

import (
	"encoding/json"
	"strings"
)

// Anthropic's Messages API (wire.Messages), as the relay reads it with its
// own decoders (never the scripted model's: the relay is the witness).

// messagesContent reads an Anthropic Messages message's content blocks: a
// user message's tool_result blocks, an assistant message's tool_use
// blocks.
func (h history) messagesContent(m requestMessage) {
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

// messagesAnswer is an Anthropic Messages answer's part: a plain
// answer's content blocks; a stream's message_start (message.usage),
// content_block_start (index, content_block) and content_block_delta
// (index, delta) events.
type messagesAnswer struct {
	Content      []messagesBlock `json:"content"`
	Message      *messagesObject `json:"message"`
	Index        int             `json:"index"`
	ContentBlock *messagesBlock  `json:"content_block"`
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

// messagesObject is message_start's message: its usage.
type messagesObject struct {
	Usage *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// messagesBlocks reads a plain Messages answer's content blocks: their
// text and tool_use calls.
func (r *Relay) messagesBlocks(c *Call, a messagesAnswer, text *strings.Builder) {
	for _, b := range a.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			c.ToolCalls = append(c.ToolCalls, r.toolCall(b.ID, b.Name, string(b.Input)))
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
