package relay

import "strings"

// OpenAI's Chat Completions (wire.Chat), as the relay reads it with its
// own decoders (never the scripted model's: the relay is the witness).

// chatMessage is a Chat Completions message's own fields: the id of the
// call a tool message answers, and an assistant's calls (function_call
// is the API's older form, which has no id).
type chatMessage struct {
	ToolCallID string `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string       `json:"id"`
		Function functionCall `json:"function"`
	} `json:"tool_calls"`
	FunctionCall *functionCall `json:"function_call"`
}

// chatMessage reads a Chat Completions message: a tool or function
// message's result, an assistant's calls.
func (h history) chatMessage(m requestMessage) {
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
}

// functionCall is a Chat Completions call's function: its name and its
// arguments, a JSON text.
type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// chatAnswer is a Chat Completions answer's part: its choices, each a
// message (plain) or a delta (a stream's chunk).
type chatAnswer struct {
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
}

// chatChoices reads a plain Chat Completions answer's messages: their
// text and tool calls.
func (r *Relay) chatChoices(c *Call, a chatAnswer, text *strings.Builder) {
	for _, ch := range a.Choices {
		if ch.Message == nil {
			continue
		}
		text.WriteString(ch.Message.Content)
		for _, tc := range ch.Message.ToolCalls {
			c.ToolCalls = append(c.ToolCalls, r.toolCall(tc.ID, tc.Function.Name, tc.Function.Arguments))
		}
	}
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
