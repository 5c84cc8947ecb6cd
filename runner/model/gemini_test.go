package model_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/model"
)

// geminiCLITools is what Gemini CLI declares (its names and parameter
// names, in parametersJsonSchema), with a decoy first: a read tool whose
// schema takes no file path.
var geminiCLITools = []any{map[string]any{"functionDeclarations": []any{
	map[string]any{"name": "read_many_files", "parametersJsonSchema": schema([]string{"include"}, "include", "array")},
	map[string]any{"name": "read_file", "parametersJsonSchema": schema([]string{"file_path"}, "file_path", "string", "start_line", "number")},
	map[string]any{"name": "write_file", "parametersJsonSchema": schema([]string{"file_path", "content"}, "file_path", "string", "content", "string")},
	map[string]any{"name": "run_shell_command", "parametersJsonSchema": schema([]string{"command"}, "command", "string", "dir_path", "string")},
}}}

// geminiURL is the scripted model's URL of a Gemini endpoint: Gemini's
// clients are given the origin and put "/v1beta" in the path themselves.
func geminiURL(s *model.Server, verb string) string {
	return "http://" + s.Addr() + "/v1beta/models/gemini-test:" + verb
}

// geminiTurn is one tool round as Gemini CLI sends it back: the model's
// call, with the id the client gave it, and its functionResponse.
func geminiTurn(id, name string, args map[string]any, output string) []any {
	return []any{
		map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"id": id, "name": name, "args": args}}}},
		map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"id": id, "name": name,
			"response": map[string]any{"output": output}}}}},
	}
}

// geminiOut is a GenerateContentResponse as a client reads it.
type geminiOut struct {
	Candidates []struct {
		Content struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         string `json:"text"`
				FunctionCall *struct {
					ID   string          `json:"id"`
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	UsageMetadata *struct {
		Prompt     int `json:"promptTokenCount"`
		Candidates int `json:"candidatesTokenCount"`
		Total      int `json:"totalTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
}

// geminiAsk posts a Gemini request and reads the answer: plain, or each
// SSE data line a whole GenerateContentResponse (checked: only the last
// has a finish reason), joined into one.
func geminiAsk(t *testing.T, s *model.Server, stream bool, contents, tools []any) (call *struct{ name, args string }, text string, last geminiOut) {
	t.Helper()
	verb := "generateContent"
	if stream {
		verb = "streamGenerateContent?alt=sse"
	}
	req := map[string]any{"contents": contents, "systemInstruction": map[string]any{"parts": []any{map[string]any{"text": "You are Gemini CLI."}}}}
	if tools != nil {
		req["tools"] = tools
	}
	a := post(t, geminiURL(s, verb), req, nil)
	if a.status != 200 {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	chunks := []string{a.body}
	if stream {
		if ct := a.header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("a stream's Content-Type %q", ct)
		}
		chunks = sseData(a.body)
	}
	for i, d := range chunks {
		var r geminiOut
		mustUnmarshal(t, d, &r)
		if len(r.Candidates) != 1 || r.Candidates[0].Content.Role != "model" || r.ModelVersion != "gemini-test" {
			t.Fatalf("chunk %d %s: want one model candidate of gemini-test", i, d)
		}
		if fin := r.Candidates[0].FinishReason; (fin != "") != (i == len(chunks)-1) {
			t.Fatalf("chunk %d of %d has finish reason %q: want one on the last only", i, len(chunks), fin)
		}
		for _, p := range r.Candidates[0].Content.Parts {
			text += p.Text
			if fc := p.FunctionCall; fc != nil {
				if call != nil || fc.ID != "" {
					t.Fatalf("a second call, or a call with an id: %s", d)
				}
				call = &struct{ name, args string }{fc.Name, string(fc.Args)}
			}
		}
		last = r
	}
	return call, text, last
}

// The challenge through Gemini's format with Gemini CLI's tools, plain and
// streamed: the read of the challenge (a functionCall without an id, by
// the file tool that takes a path), the write of the token derived from
// the functionResponse that carries it, then done; usage on the last
// chunk; the model and the stream read from the path.
func TestGeminiRunsTheChallengeWithGeminiCLITools(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			s := start(t, model.Options{})
			prompt := []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "context"},
				map[string]any{"text": model.ChallengePrompt("/task/challenge.txt", "/task/answer.txt")}}}}
			// A request without tools (Gemini CLI's own side questions)
			// is answered with text, streamed in pieces.
			_, title, _ := geminiAsk(t, s, stream, prompt, nil)
			if len(title) < 8 {
				t.Fatalf("an answer without tools %q; want a text of several pieces", title)
			}
			read, _, last := geminiAsk(t, s, stream, prompt, geminiCLITools)
			if read == nil || read.name != "read_file" || read.args != `{"file_path":"/task/challenge.txt"}` {
				t.Fatalf("first answer %+v; want read_file of the challenge", read)
			}
			if u := last.UsageMetadata; u == nil || u.Prompt <= 0 || u.Candidates <= 0 || u.Total != u.Prompt+u.Candidates {
				t.Fatalf("usage %+v; want counts that add up", last.UsageMetadata)
			}
			challenge := model.ChallengePrefix + strings.Repeat("ab", 16)
			var args map[string]any
			mustUnmarshal(t, read.args, &args)
			history := append(prompt, geminiTurn("read_file__1", read.name, args, challenge)...)
			write, _, _ := geminiAsk(t, s, stream, history, geminiCLITools)
			if write == nil || write.name != "write_file" || !strings.Contains(write.args, s.Token(challenge)) || !strings.Contains(write.args, "/task/answer.txt") {
				t.Fatalf("second answer %+v; want write_file of %s", write, s.Token(challenge))
			}
			mustUnmarshal(t, write.args, &args)
			history = append(history, geminiTurn("write_file__2", write.name, args, "written")...)
			done, text, _ := geminiAsk(t, s, stream, history, geminiCLITools)
			if done != nil || text == "" {
				t.Fatalf("third answer %+v %q; want text", done, text)
			}
			calls := s.Calls()
			if len(calls) != 4 || calls[1].Model != "gemini-test" || calls[1].Stream != stream || calls[2].Carries != model.TargetResult ||
				fmt.Sprint(calls[1].ToolNames) != "[read_many_files read_file write_file run_shell_command]" {
				t.Fatalf("calls %+v; want four of gemini-test, stream %v, the third carrying the result", calls, stream)
			}
		})
	}
}

// A tool declared with Gemini's own Schema (parameters, "type": "STRING")
// is read as the JSON schema it stands for: its path and content are
// strings the scripts can fill.
func TestGeminiSchemaTypesAreRead(t *testing.T) {
	s := start(t, model.Options{})
	tools := []any{map[string]any{"functionDeclarations": []any{map[string]any{"name": "write_file", "parameters": map[string]any{
		"type": "OBJECT", "required": []any{"path", "content", "mode"}, "properties": map[string]any{
			"path": map[string]any{"type": "STRING"}, "content": map[string]any{"type": "STRING"}, "mode": map[string]any{"type": "INTEGER"}}}}}}}
	a := post(t, geminiURL(s, "generateContent"), map[string]any{"tools": tools, "contents": []any{map[string]any{"role": "user",
		"parts": []any{map[string]any{"text": model.CertPrompt("/task/out.txt", "tok-1234")}}}}}, nil)
	var r geminiOut
	mustUnmarshal(t, a.body, &r)
	if a.status != 200 || len(r.Candidates) != 1 || len(r.Candidates[0].Content.Parts) != 1 || r.Candidates[0].Content.Parts[0].FunctionCall == nil {
		t.Fatalf("answer %d %s; want a functionCall", a.status, a.body)
	}
	var args map[string]any
	mustUnmarshal(t, string(r.Candidates[0].Content.Parts[0].FunctionCall.Args), &args)
	if args["path"] != "/task/out.txt" || args["content"] != "tok-1234" || args["mode"] != float64(60) {
		t.Fatalf("args %v; want the path, the token and the integer mode filled", args)
	}
}

// Faults in Gemini's error shape: {"error":{"code","message","status"}};
// a 429 with Retry-After and Google's RetryInfo, the context-limit 400 in
// Google's words; a malformed stream ends inside a data line; the stall
// answers nothing.
func TestGeminiFaultsAreGoogleShaped(t *testing.T) {
	req := map[string]any{"tools": geminiCLITools, "contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "hello"}}}}}
	for _, c := range []struct {
		fault   model.Fault
		code    int
		status  string
		message string
	}{
		{model.Fault429, 429, "RESOURCE_EXHAUSTED", "Rate limit"},
		{model.Fault400, 400, "INVALID_ARGUMENT", "exceeds the maximum number of tokens"},
		{model.Fault500, 500, "INTERNAL", "server had an error"},
	} {
		t.Run(string(c.fault), func(t *testing.T) {
			s := start(t, model.Options{Script: model.Script{Fault: c.fault}, RetryAfter: 7})
			a := post(t, geminiURL(s, "streamGenerateContent?alt=sse"), req, nil)
			var body struct {
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
					Status  string `json:"status"`
					Details []struct {
						Type       string `json:"@type"`
						RetryDelay string `json:"retryDelay"`
					} `json:"details"`
				} `json:"error"`
			}
			mustUnmarshal(t, a.body, &body)
			e := body.Error
			if a.status != c.code || e.Code != c.code || e.Status != c.status || !strings.Contains(e.Message, c.message) {
				t.Fatalf("answered %d %s; want %d %s %q", a.status, a.body, c.code, c.status, c.message)
			}
			retry := c.fault == model.Fault429
			if got := len(e.Details) == 1 && e.Details[0].Type == "type.googleapis.com/google.rpc.RetryInfo" && e.Details[0].RetryDelay == "7s"; got != retry ||
				(a.header.Get("Retry-After") == "7") != retry {
				t.Fatalf("Retry-After %q, details %+v; want the delay (7 s) in both only on a 429", a.header.Get("Retry-After"), e.Details)
			}
		})
	}
	t.Run("malformed", func(t *testing.T) {
		s := start(t, model.Options{Script: model.Script{Fault: model.FaultMalformed}})
		a := post(t, geminiURL(s, "streamGenerateContent?alt=sse"), req, nil)
		d := sseData(a.body)
		var v any
		if a.status != 200 || len(d) != 2 || json.Unmarshal([]byte(d[0]), &v) != nil || json.Unmarshal([]byte(d[1]), &v) == nil {
			t.Fatalf("malformed stream %d %q; want a good chunk, then a truncated one", a.status, a.body)
		}
		a = post(t, geminiURL(s, "generateContent"), req, nil)
		if a.status != 200 || json.Unmarshal([]byte(a.body), &v) == nil {
			t.Fatalf("malformed answer %d %q; want truncated JSON", a.status, a.body)
		}
	})
	t.Run("stall", func(t *testing.T) {
		s := start(t, model.Options{Script: model.Script{Fault: model.FaultStall}, StallMax: 1})
		b, _ := json.Marshal(req)
		resp, err := http.Post(geminiURL(s, "streamGenerateContent?alt=sse"), "application/json", strings.NewReader(string(b)))
		if err == nil {
			resp.Body.Close()
			t.Fatalf("a stall answered %d; want the connection dropped", resp.StatusCode)
		}
		if c := waitCalls(t, s, 1); c[0].Fault != model.FaultStall || c[0].Status != 0 {
			t.Fatalf("calls %+v; want the stall recorded with no status", c)
		}
	})
}

// The key is read from x-goog-api-key or "?key=", refused in Gemini's
// shape otherwise, and never echoed.
func TestGeminiKeyInHeaderOrQuery(t *testing.T) {
	s := start(t, model.Options{APIKey: "AIza-right"})
	req := map[string]any{"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "hi"}}}}}
	for _, k := range []struct {
		query, header string
		want          int
	}{{"", "AIza-right", 200}, {"AIza-right", "", 200}, {"AIza-wrong", "", 401}, {"", "AIza-wrong", 401}, {"", "", 401}} {
		u := geminiURL(s, "generateContent")
		if k.query != "" {
			u += "?key=" + k.query
		}
		h := map[string]string{}
		if k.header != "" {
			h["x-goog-api-key"] = k.header
		}
		a := post(t, u, req, h)
		if a.status != k.want || (k.want == 401 && !strings.Contains(a.body, `"UNAUTHENTICATED"`)) || strings.Contains(a.body, "AIza") {
			t.Fatalf("key %q in the query, %q in the header: %d %s; want %d and no key echoed", k.query, k.header, a.status, a.body, k.want)
		}
	}
	var auths []string
	for _, c := range waitCalls(t, s, 5) {
		auths = append(auths, c.Auth)
	}
	if fmt.Sprint(auths) != "[ok ok wrong wrong missing]" {
		t.Fatalf("auths %v", auths)
	}
}

// countTokens answers an estimate, for contents or a whole
// generateContentRequest, and is no model call.
func TestGeminiCountTokens(t *testing.T) {
	s := start(t, model.Options{})
	contents := []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": strings.Repeat("word ", 400)}}}}
	for _, req := range []any{map[string]any{"contents": contents}, map[string]any{"generateContentRequest": map[string]any{"model": "models/gemini-test", "contents": contents}}} {
		a := post(t, geminiURL(s, "countTokens"), req, nil)
		var r struct {
			TotalTokens int `json:"totalTokens"`
		}
		mustUnmarshal(t, a.body, &r)
		if a.status != 200 || r.TotalTokens < 400 {
			t.Fatalf("countTokens = %d %s; want 200 and about 500 tokens", a.status, a.body)
		}
	}
	if c := waitCalls(t, s, 2); c[0].Seq != 0 || c[0].Model != "gemini-test" || s.ModelCalls() != 0 {
		t.Fatalf("calls %+v; want calls of gemini-test that are not model calls", c)
	}
}
