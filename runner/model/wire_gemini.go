package model

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sandproof/sandproof/runner/wire"
)

// Google's Gemini API (POST /v1beta/models/{model}:generateContent, its
// streaming twin and countTokens), what Gemini CLI speaks (wire.Gemini):
// the same scripts, faults and call log as the other formats, in Gemini's
// shapes (contents of parts, functionCall and functionResponse parts,
// GenerateContentResponse objects streamed as SSE data lines, Google's
// error objects). The model is named by the path and the verb asks for a
// stream, so both come from the path (api.fromPath), never the body.
// Gemini's calls carry no ids: a result names the function it answers.

func init() {
	apis[wire.Gemini.Name] = api{parse: parseGemini, render: writeGemini, fail: writeGeminiError, malformed: writeGeminiMalformed,
		others:   map[wire.Endpoint]handler{wire.GeminiCountTokens: (*Server).handleGeminiCountTokens},
		fromPath: geminiFromPath}
}

// geminiRequest is the part of a generateContent request the server
// reads. Tools declare functions with either an OpenAPI-style Schema
// (parameters) or a JSON schema (parametersJsonSchema).
type geminiRequest struct {
	Contents []struct {
		Role  string       `json:"role"`
		Parts []geminiPart `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name                 string         `json:"name"`
			Parameters           map[string]any `json:"parameters"`
			ParametersJSONSchema map[string]any `json:"parametersJsonSchema"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
}

// geminiPart is one part of a content: text (a thought when Thought is
// set), a model's functionCall (its args an object) or a client's
// functionResponse (its response an object).
type geminiPart struct {
	Text         string `json:"text"`
	Thought      bool   `json:"thought"`
	FunctionCall *struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

func parseGemini(body []byte) (conversation, error) {
	var r geminiRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return conversation{}, fmt.Errorf("decode generateContent request: %w", err)
	}
	if len(r.Contents) == 0 {
		return conversation{}, fmt.Errorf("contents is not specified")
	}
	// Gemini's answers always carry usageMetadata.
	c := conversation{IncludeUsage: true}
	for _, t := range r.Tools {
		for _, f := range t.FunctionDeclarations {
			if f.Name == "" {
				continue
			}
			params := f.ParametersJSONSchema
			if params == nil {
				params = geminiSchema(f.Parameters)
			}
			c.Tools = append(c.Tools, Tool{Name: f.Name, Parameters: params})
		}
	}
	var user []string
	for _, m := range r.Contents {
		for _, p := range m.Parts {
			switch {
			case m.Role == "model" && p.FunctionCall != nil:
				args := string(p.FunctionCall.Args)
				if args == "" || args == "null" {
					args = "{}"
				}
				c.CalledArgs = append(c.CalledArgs, args)
			case m.Role != "model" && p.FunctionResponse != nil:
				c.HasToolResult = true
				// The response object as sent: the scripts look for
				// the challenge in it, which no JSON escape touches.
				c.ToolResults = append(c.ToolResults, string(p.FunctionResponse.Response))
			case m.Role != "model" && !p.Thought && p.Text != "":
				user = append(user, p.Text)
			}
		}
	}
	c.UserText = strings.Join(user, "\n")
	return c, nil
}

// geminiSchema is a Gemini Schema (OpenAPI-style: "type": "OBJECT") as
// the JSON schema the scripts read: every "type" lower-cased, the rest as
// sent.
func geminiSchema(s map[string]any) map[string]any {
	if s == nil {
		return nil
	}
	out := make(map[string]any, len(s))
	for k, v := range s {
		out[k] = geminiSchemaValue(k, v)
	}
	return out
}

func geminiSchemaValue(key string, v any) any {
	switch v := v.(type) {
	case string:
		if key == "type" {
			return strings.ToLower(v)
		}
	case map[string]any:
		if key == "properties" {
			props := make(map[string]any, len(v))
			for name, p := range v {
				if m, ok := p.(map[string]any); ok {
					props[name] = geminiSchema(m)
				} else {
					props[name] = p
				}
			}
			return props
		}
		return geminiSchema(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = geminiSchemaValue("", e)
		}
		return out
	}
	return v
}

// geminiFromPath takes the model from the path's "{model}" segment and the
// stream from the endpoint's verb.
func geminiFromPath(e wire.Endpoint, path string, c *conversation) {
	vals, _ := wire.Match(e.FullPath(apiBase), path)
	c.Model, c.Stream = vals["model"], e.Stream
}

// geminiStatuses maps a status to Google's status name.
var geminiStatuses = map[int]string{
	http.StatusBadRequest:          "INVALID_ARGUMENT",
	http.StatusUnauthorized:        "UNAUTHENTICATED",
	http.StatusNotFound:            "NOT_FOUND",
	http.StatusTooManyRequests:     "RESOURCE_EXHAUSTED",
	http.StatusInternalServerError: "INTERNAL",
}

// writeGeminiError answers {"error":{"code","message","status"}}. A 429
// also says its delay as Google does, in a RetryInfo detail, from the
// Retry-After the handler set; a context-length fault reads as Google
// words it.
func writeGeminiError(w http.ResponseWriter, status int, e apiError) int {
	name, ok := geminiStatuses[status]
	if !ok {
		name = "INTERNAL"
	}
	msg := e.Message
	if e.Code == errContextLength.Code {
		msg = "The input token count (9000) exceeds the maximum number of tokens allowed (8192)."
	}
	body := map[string]any{"code": status, "message": msg, "status": name}
	if s, err := strconv.Atoi(w.Header().Get("Retry-After")); err == nil && status == http.StatusTooManyRequests {
		body["details"] = []any{map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": strconv.Itoa(s) + "s"}}
	}
	return writeJSON(w, status, map[string]any{"error": body})
}

// geminiResponse is a GenerateContentResponse: one candidate with parts,
// its finish reason when not nil, usageMetadata when in is not negative.
func geminiResponse(c conversation, id string, parts []any, finish any, in, out int) map[string]any {
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	if finish != nil {
		cand["finishReason"] = finish
	}
	r := map[string]any{"candidates": []any{cand}, "modelVersion": c.Model, "responseId": id}
	if in >= 0 {
		r["usageMetadata"] = map[string]any{"promptTokenCount": in, "candidatesTokenCount": out, "totalTokenCount": in + out}
	}
	return r
}

// writeGemini renders a reply as a GenerateContentResponse, or, for
// streamGenerateContent, as SSE data lines of them: the text in pieces,
// a function call whole in one (Gemini never splits a call's args), the
// last with finishReason and usageMetadata.
func writeGemini(w http.ResponseWriter, c conversation, rep reply) int {
	id := newID("")
	pt, ct := usage(c, rep)
	var part map[string]any
	if rep.ToolName != "" {
		part = map[string]any{"functionCall": map[string]any{"name": rep.ToolName, "args": rawJSON(rep.Arguments)}}
	} else {
		part = map[string]any{"text": rep.Text}
	}
	if !c.Stream {
		return writeJSON(w, http.StatusOK, geminiResponse(c, id, []any{part}, "STOP", pt, ct))
	}
	out := newSSE(w)
	if rep.ToolName != "" {
		out.data(geminiResponse(c, id, []any{part}, "STOP", pt, ct))
		return http.StatusOK
	}
	ps := pieces(rep.Text, 4)
	if len(ps) == 0 {
		ps = []string{""}
	}
	for i, p := range ps {
		if i < len(ps)-1 {
			out.data(geminiResponse(c, id, []any{map[string]any{"text": p}}, nil, -1, 0))
		} else {
			out.data(geminiResponse(c, id, []any{map[string]any{"text": p}}, "STOP", pt, ct))
		}
	}
	return http.StatusOK
}

// writeGeminiMalformed answers 200 with a broken body: for a stream, one
// good chunk, then a truncated data line and no finish; otherwise
// truncated JSON.
func writeGeminiMalformed(w http.ResponseWriter, c conversation) int {
	if !c.Stream {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"candidates":[{"content":{"role":"model","parts":[{"te`)
		return http.StatusOK
	}
	out := newSSE(w)
	out.data(geminiResponse(c, "malformed", []any{map[string]any{"text": ""}}, nil, -1, 0))
	out.raw("data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"do\n\n")
	return http.StatusOK
}

// handleGeminiCountTokens answers POST /v1beta/models/{model}:countTokens
// with the same estimate the replies' usage uses; its body is contents,
// or a whole generateContentRequest. It is not a model request (seq 0).
func (s *Server) handleGeminiCountTokens(w http.ResponseWriter, r *http.Request) {
	c := Call{Method: r.Method, Path: r.URL.Path, Time: time.Now(), Auth: s.auth(r)}
	defer func() { s.record(c) }()
	if c.Auth == "missing" || c.Auth == "wrong" {
		c.Status = writeGeminiError(w, http.StatusUnauthorized, errUnauthorized)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		c.Error = fmt.Sprintf("read request: %v", err)
		return
	}
	var outer struct {
		Inner json.RawMessage `json:"generateContentRequest"`
	}
	if json.Unmarshal(body, &outer) == nil && len(outer.Inner) > 0 && string(outer.Inner) != "null" {
		body = outer.Inner
	}
	conv, err := parseGemini(body)
	if err != nil {
		c.Error = err.Error()
		c.Status = writeGeminiError(w, http.StatusBadRequest, apiError{Message: err.Error()})
		return
	}
	geminiFromPath(wire.GeminiCountTokens, r.URL.Path, &conv)
	c.Model, c.Tools = capText(conv.Model, maxModelName), len(conv.Tools) > 0
	pt, _ := usage(conv, reply{})
	c.Status = writeJSON(w, http.StatusOK, map[string]any{"totalTokens": pt})
}
