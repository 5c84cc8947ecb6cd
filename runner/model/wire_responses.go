package model

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sandproof/sandproof/runner/wire"
)

// OpenAI's Responses API (POST /v1/responses): what the model reads of a
// request and how it answers (wire.Responses). Its errors are OpenAI's
// (server.go's writeError, writeMalformed).

func init() { apis[wire.Responses.Name] = openAIAPI(parseResponses, writeResponses) }

// responsesRequest is the part of a Responses API request the server reads.
type responsesRequest struct {
	Model        string          `json:"model"`
	Stream       bool            `json:"stream"`
	Instructions string          `json:"instructions"`
	Input        json.RawMessage `json:"input"`
	Tools        []struct {
		Type        string         `json:"type"`
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Parameters  map[string]any `json:"parameters"`
	} `json:"tools"`
}

func parseResponses(body []byte) (conversation, error) {
	var r responsesRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return conversation{}, fmt.Errorf("decode responses request: %w", err)
	}
	c := conversation{Model: r.Model, Stream: r.Stream, IncludeUsage: true, SystemText: r.Instructions}
	for _, t := range r.Tools {
		if t.Type == "function" && t.Name != "" {
			c.Tools = append(c.Tools, Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		}
	}
	// input is either one string (the user's text) or a list of items.
	var s string
	if json.Unmarshal(r.Input, &s) == nil {
		c.UserText, c.LastUserText = s, s
		return c, nil
	}
	var items []struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		Output    json.RawMessage `json:"output"`
		Arguments string          `json:"arguments"`
		Input     string          `json:"input"`
	}
	if len(r.Input) > 0 {
		if err := json.Unmarshal(r.Input, &items); err != nil {
			return conversation{}, fmt.Errorf("decode responses input: %w", err)
		}
	}
	var user, assistant, system []string
	for i, it := range items {
		switch {
		case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
			c.HasToolResult = true
			c.ToolResults = append(c.ToolResults, contentText(it.Output))
		case it.Type == "function_call":
			c.CalledArgs = append(c.CalledArgs, it.Arguments)
		case it.Type == "custom_tool_call":
			c.CalledArgs = append(c.CalledArgs, it.Input)
		case it.Role == "user":
			user = append(user, contentText(it.Content))
			if i == len(items)-1 {
				c.LastUserText = user[len(user)-1]
			}
		case it.Role == "assistant":
			assistant = append(assistant, contentText(it.Content))
		case it.Role == "system" || it.Role == "developer":
			system = append(system, contentText(it.Content))
		}
	}
	if len(system) > 0 {
		c.SystemText = strings.Join(append([]string{c.SystemText}, system...), "\n")
	}
	c.UserText, c.AssistantText = strings.Join(user, "\n"), strings.Join(assistant, "\n")
	return c, nil
}

// writeResponses renders a reply as a Responses API response: typed SSE
// events (response.created ... response.completed) when streaming, the
// response object otherwise.
func writeResponses(w http.ResponseWriter, c conversation, rep reply) int {
	respID, created := newID("resp_"), time.Now().Unix()
	pt, ct := usage(c, rep)
	var item map[string]any
	if rep.ToolName != "" {
		item = map[string]any{"type": "function_call", "id": newID("fc_"), "call_id": newID("call_"),
			"name": rep.ToolName, "arguments": rep.Arguments, "status": "completed"}
	} else {
		item = map[string]any{"type": "message", "id": newID("msg_"), "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": rep.Text, "annotations": []any{}}}}
	}
	response := func(status string, output []any, withUsage bool) map[string]any {
		r := map[string]any{"id": respID, "object": "response", "created_at": created, "status": status,
			"model": c.Model, "output": output, "error": nil}
		if withUsage {
			r["usage"] = map[string]any{"input_tokens": pt, "output_tokens": ct, "total_tokens": pt + ct}
		}
		return r
	}
	if !c.Stream {
		return writeJSON(w, http.StatusOK, response("completed", []any{item}, true))
	}
	out := newSSE(w)
	seq := 0
	ev := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		out.event(typ, fields)
	}
	ev("response.created", map[string]any{"response": response("in_progress", []any{}, false)})
	ev("response.in_progress", map[string]any{"response": response("in_progress", []any{}, false)})
	itemID := item["id"]
	if rep.ToolName != "" {
		added := map[string]any{}
		for k, v := range item {
			added[k] = v
		}
		added["arguments"], added["status"] = "", "in_progress"
		ev("response.output_item.added", map[string]any{"output_index": 0, "item": added})
		for _, p := range pieces(rep.Arguments, argPiece) {
			ev("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": 0, "delta": p})
		}
		ev("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": 0, "arguments": rep.Arguments})
	} else {
		ev("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{
			"type": "message", "id": itemID, "status": "in_progress", "role": "assistant", "content": []any{}}})
		part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
		ev("response.content_part.added", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "part": part})
		for _, p := range pieces(rep.Text, 4) {
			ev("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "delta": p})
		}
		ev("response.output_text.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "text": rep.Text})
		ev("response.content_part.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": rep.Text, "annotations": []any{}}})
	}
	ev("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	ev("response.completed", map[string]any{"response": response("completed", []any{item}, true)})
	return http.StatusOK
}
