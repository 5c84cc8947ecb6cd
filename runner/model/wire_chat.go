package model

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sandproof/sandproof/runner/wire"
)

// OpenAI's Chat Completions (POST /v1/chat/completions): what the model
// reads of a request and how it answers (wire.Chat). Its errors are
// OpenAI's (server.go's writeError, writeMalformed).

func init() { apis[wire.Chat.Name] = openAIAPI(parseChat, writeChat) }

// chatRequest is the part of a Chat Completions request the server reads.
type chatRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls []struct {
			Function struct {
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			Parameters  map[string]any `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

func parseChat(body []byte) (conversation, error) {
	var r chatRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return conversation{}, fmt.Errorf("decode chat completions request: %w", err)
	}
	c := conversation{Model: r.Model, Stream: r.Stream}
	c.IncludeUsage = r.StreamOptions != nil && r.StreamOptions.IncludeUsage
	for _, t := range r.Tools {
		if t.Function.Name != "" {
			c.Tools = append(c.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
		}
	}
	var user, assistant, system []string
	for i, m := range r.Messages {
		switch m.Role {
		case "user":
			user = append(user, contentText(m.Content))
			if i == len(r.Messages)-1 {
				c.LastUserText = user[len(user)-1]
			}
		case "system", "developer":
			system = append(system, contentText(m.Content))
		case "tool", "function":
			c.HasToolResult = true
			c.ToolResults = append(c.ToolResults, contentText(m.Content))
		case "assistant":
			assistant = append(assistant, contentText(m.Content))
			for _, tc := range m.ToolCalls {
				c.CalledArgs = append(c.CalledArgs, tc.Function.Arguments)
			}
		}
	}
	c.UserText, c.AssistantText, c.SystemText = strings.Join(user, "\n"), strings.Join(assistant, "\n"), strings.Join(system, "\n")
	return c, nil
}

// writeChat renders a reply as a Chat Completions response: SSE chunks when
// the request streams, one JSON object otherwise.
func writeChat(w http.ResponseWriter, c conversation, rep reply) int {
	id, created := newID("chatcmpl-"), time.Now().Unix()
	pt, ct := usage(c, rep)
	usageObj := map[string]any{"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}
	finish := "stop"
	if rep.ToolName != "" {
		finish = "tool_calls"
	}
	callID := newID("call_")
	if !c.Stream {
		msg := map[string]any{"role": "assistant", "content": rep.Text}
		if rep.ToolName != "" {
			msg["content"] = nil
			msg["tool_calls"] = []any{map[string]any{"id": callID, "type": "function",
				"function": map[string]any{"name": rep.ToolName, "arguments": rep.Arguments}}}
		}
		return writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "chat.completion", "created": created,
			"model": c.Model, "choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage": usageObj})
	}
	out := newSSE(w)
	chunk := func(delta map[string]any, finishReason any) {
		out.data(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": c.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finishReason}}})
	}
	if rep.ToolName != "" {
		// First the id and the function name with empty arguments, then
		// the arguments string in pieces, as OpenAI streams them.
		chunk(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"index": 0, "id": callID, "type": "function",
			"function": map[string]any{"name": rep.ToolName, "arguments": ""}}}}, nil)
		for _, p := range pieces(rep.Arguments, argPiece) {
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": p}}}}, nil)
		}
	} else {
		chunk(map[string]any{"role": "assistant", "content": ""}, nil)
		for _, p := range pieces(rep.Text, 4) {
			chunk(map[string]any{"content": p}, nil)
		}
	}
	chunk(map[string]any{}, finish)
	if c.IncludeUsage {
		out.data(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": c.Model,
			"choices": []any{}, "usage": usageObj})
	}
	out.raw("data: [DONE]\n\n")
	return http.StatusOK
}
