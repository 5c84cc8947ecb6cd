package relay

import (
	"encoding/json"
	"strings"
)

// OpenAI's Responses API (wire.Responses), as the relay reads it with its
// own decoders (never the scripted model's: the relay is the witness).

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

// responsesAnswer is a Responses answer's part: a plain answer's output
// items, a stream event's response (response.completed holds the output).
type responsesAnswer struct {
	Output   []responsesItem  `json:"output"`
	Response *responsesObject `json:"response"`
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

// responsesItems reads output items: their tool calls and text.
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

// responsesEvent reads a Responses stream's response.completed: its
// output items and usage.
func (st *sseState) responsesEvent(a answer) {
	if a.Type == "response.completed" && a.Response != nil {
		st.r.responsesItems(st.c, a.Response.Output, &st.text)
		if u := a.Response.Usage; u != nil {
			st.c.Usage = &Usage{Input: u.InputTokens, Output: u.OutputTokens}
		}
	}
}
