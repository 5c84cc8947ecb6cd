package model_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/model"
)

// Issue 38: after model-400's context-limit answer a harness compacts
// its conversation (a summary request, then the resumed conversation);
// the scripted model must keep to the challenge flow through both, and
// never ask a harness to write a file the task gave it to read.

// turn is one turn of a conversation, built in each wire format by
// convo: "system", "user", "assistant" (text), "call" (the assistant's
// tool call: name, args), "result" (a tool result: text).
type turn struct{ kind, text, name, args string }

// format builds a request of one wire format from turns and reads its
// answer.
type format struct {
	name, path string
	build      func(turns []turn, tools bool) map[string]any
	// answer is the reply's tool call (name, arguments as JSON), or "" and
	// its text.
	answer func(t *testing.T, body string) (name, args, text string)
}

// readTool and writeTool are each format's read and write tools: the
// Messages API's as Claude Code names them.
func toolsFor(format string) []any {
	schema := func(props ...string) map[string]any {
		p := map[string]any{}
		for _, k := range props {
			p[k] = map[string]any{"type": "string"}
		}
		return map[string]any{"type": "object", "properties": p, "required": props}
	}
	switch format {
	case "messages":
		return []any{map[string]any{"name": "Read", "input_schema": schema("file_path")},
			map[string]any{"name": "Write", "input_schema": schema("file_path", "content")}}
	case "responses":
		return []any{map[string]any{"type": "function", "name": "read", "parameters": schema("path")},
			map[string]any{"type": "function", "name": "write", "parameters": schema("path", "content")}}
	}
	return []any{map[string]any{"type": "function", "function": map[string]any{"name": "read", "parameters": schema("path")}},
		map[string]any{"type": "function", "function": map[string]any{"name": "write", "parameters": schema("path", "content")}}}
}

var formats = []format{
	{"chat completions", "/chat/completions",
		func(turns []turn, tools bool) map[string]any {
			var msgs []any
			for i, tn := range turns {
				id := fmt.Sprintf("call_%d", i)
				switch tn.kind {
				case "call":
					msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
						"id": id, "type": "function", "function": map[string]any{"name": tn.name, "arguments": tn.args}}}})
				case "result":
					msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": fmt.Sprintf("call_%d", i-1), "content": tn.text})
				default:
					msgs = append(msgs, map[string]any{"role": tn.kind, "content": tn.text})
				}
			}
			req := map[string]any{"model": "fake-model", "messages": msgs}
			if tools {
				req["tools"] = toolsFor("chat")
			}
			return req
		},
		func(t *testing.T, body string) (string, string, string) {
			var r struct {
				Choices []struct {
					Message struct {
						Content   string        `json:"content"`
						ToolCalls []toolCallOut `json:"tool_calls"`
					} `json:"message"`
				} `json:"choices"`
			}
			mustUnmarshal(t, body, &r)
			if m := r.Choices[0].Message; len(m.ToolCalls) > 0 {
				return m.ToolCalls[0].Function.Name, m.ToolCalls[0].Function.Arguments, ""
			}
			return "", "", r.Choices[0].Message.Content
		}},
	{"responses", "/responses",
		func(turns []turn, tools bool) map[string]any {
			req := map[string]any{"model": "fake-model"}
			var items []any
			for i, tn := range turns {
				switch tn.kind {
				case "system":
					req["instructions"] = tn.text
				case "call":
					items = append(items, map[string]any{"type": "function_call", "call_id": fmt.Sprintf("call_%d", i), "name": tn.name, "arguments": tn.args})
				case "result":
					items = append(items, map[string]any{"type": "function_call_output", "call_id": fmt.Sprintf("call_%d", i-1), "output": tn.text})
				case "user":
					items = append(items, map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": tn.text}}})
				case "assistant":
					items = append(items, map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": tn.text}}})
				}
			}
			req["input"] = items
			if tools {
				req["tools"] = toolsFor("responses")
			}
			return req
		},
		func(t *testing.T, body string) (string, string, string) {
			var r struct {
				Output []struct {
					Type      string `json:"type"`
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
					Content   []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"output"`
			}
			mustUnmarshal(t, body, &r)
			if o := r.Output[0]; o.Type == "function_call" {
				return o.Name, o.Arguments, ""
			}
			return "", "", r.Output[0].Content[0].Text
		}},
	{"messages", "/messages",
		func(turns []turn, tools bool) map[string]any {
			req := map[string]any{"model": "fake-model", "max_tokens": 1024}
			var msgs []any
			for i, tn := range turns {
				switch tn.kind {
				case "system":
					req["system"] = []any{map[string]any{"type": "text", "text": tn.text}}
				case "call":
					var input map[string]any
					json.Unmarshal([]byte(tn.args), &input)
					msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{map[string]any{
						"type": "tool_use", "id": fmt.Sprintf("toolu_%d", i), "name": tn.name, "input": input}}})
				case "result":
					msgs = append(msgs, map[string]any{"role": "user", "content": []any{map[string]any{
						"type": "tool_result", "tool_use_id": fmt.Sprintf("toolu_%d", i-1), "content": tn.text}}})
				default:
					msgs = append(msgs, map[string]any{"role": tn.kind, "content": []any{map[string]any{"type": "text", "text": tn.text}}})
				}
			}
			req["messages"] = msgs
			if tools {
				req["tools"] = toolsFor("messages")
			}
			return req
		},
		func(t *testing.T, body string) (string, string, string) {
			var r struct {
				Content []struct {
					Type  string          `json:"type"`
					Name  string          `json:"name"`
					Input json.RawMessage `json:"input"`
					Text  string          `json:"text"`
				} `json:"content"`
			}
			mustUnmarshal(t, body, &r)
			if b := r.Content[0]; b.Type == "tool_use" {
				return b.Name, string(b.Input), ""
			}
			return "", "", r.Content[0].Text
		}},
}

// turnOf asks s for f's answer to turns.
func turnOf(t *testing.T, s *model.Server, f format, turns []turn, tools bool) (name, args, text string) {
	t.Helper()
	a := post(t, s.URL()+f.path, f.build(turns, tools), nil)
	if a.status != 200 {
		t.Fatalf("%s: status %d: %s", f.name, a.status, a.body)
	}
	return f.answer(t, a.body)
}

// readArgsOf and writeArgsOf are the arguments the model gives f's read
// and write tools.
func readArgsOf(f format, path string) string {
	if f.name == "messages" {
		return fmt.Sprintf(`{"file_path":%q}`, path)
	}
	return fmt.Sprintf(`{"path":%q}`, path)
}

func writeArgsOf(f format, path, content string) string {
	if f.name == "messages" {
		return fmt.Sprintf(`{"content":%q,"file_path":%q}`, content, path)
	}
	return fmt.Sprintf(`{"content":%q,"path":%q}`, content, path)
}

const (
	compactChallenge = model.ChallengePrefix + "79efc6de3344957e1ae0c5c4cf7e3519"
	// claudeCompact is Claude Code's own summary instruction, its first
	// words (2.1.x), in the request's last user turn.
	claudeCompact = "Your task is to create a detailed summary of the conversation so far, paying close attention to the user's explicit requests and your previous actions."
	// claudeResumed is how Claude Code 2.1.332 resumes from a summary
	// (measured, issue 38): the summary between these.
	claudeResumedHead = "This session is being continued from a previous conversation that ran out of context. The summary below covers the earlier portion of the conversation.\n\n"
	claudeResumedTail = "\n\nIf you need specific details from before compaction (like exact code snippets, error messages, or content you generated), read the full transcript at: /home/u/.claude/projects/-task/s.jsonl\n" +
		"Continue the conversation from where it left off without asking the user any further questions. Resume directly — do not acknowledge the summary, do not recap what was happening, do not preface with \"I'll continue\" or similar. Pick up the last task as if the break never happened."
)

// The summary requests of the harnesses the issue names, each with the
// turns before it: the task, the read and its result (Claude Code left
// the prompt itself out of its summary request).
// qwenCompress is the first line of Qwen Code 0.24.4's compression
// prompt (its npm package).
const qwenCompress = "You are the component that summarizes a conversation when its context window is about to overflow."

func summaryRequests(f format, prompt string) map[string][]turn {
	read := []turn{{kind: "call", name: map[bool]string{true: "Read", false: "read"}[f.name == "messages"], args: readArgsOf(f, "/task/challenge.txt")},
		{kind: "result", text: "1\t" + compactChallenge + "\n"}}
	withPrompt := append([]turn{{kind: "user", text: prompt}}, read...)
	return map[string][]turn{
		"Claude Code (the prompt left out)": append(append([]turn{{kind: "user", text: "<system-reminder>\nThe earlier part was too large.\n</system-reminder>"}}, read...),
			turn{kind: "user", text: "<system-reminder>\nAttribution for git commits: create a summary line.\n</system-reminder>\n" + claudeCompact}),
		"Codex": append(append([]turn(nil), withPrompt...), turn{kind: "user", text: "You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for another LLM that will resume the task."}),
		"OpenCode and Kilo": append(append([]turn{{kind: "system", text: "You are a helpful AI assistant tasked with summarizing conversations."}}, withPrompt...),
			turn{kind: "user", text: "Provide a detailed prompt for continuing our conversation above. Focus on information that would be helpful for continuing the conversation."}),
		"Qwen Code": append(append([]turn{{kind: "system", text: qwenCompress}}, withPrompt...),
			turn{kind: "user", text: "First, reason in your <analysis> block. Then, produce the <state_snapshot> XML."}),
		// The system prompt alone decides: a last turn that asks for no
		// summary in words the user rule knows.
		"Qwen Code (its system prompt alone)": append(append([]turn{{kind: "system", text: qwenCompress}}, withPrompt...),
			turn{kind: "user", text: "First, reason in your <analysis> block."}),
	}
}

func TestCompactionKeepsToTheChallengeFlow(t *testing.T) {
	prompt := model.ChallengePrompt("/task/challenge.txt", "/task/deliverable.txt")
	for _, f := range formats {
		for harness, req := range summaryRequests(f, prompt) {
			t.Run(f.name+"/"+harness, func(t *testing.T) {
				s := start(t, model.Options{})
				readName := map[bool]string{true: "Read", false: "read"}[f.name == "messages"]
				writeName := map[bool]string{true: "Write", false: "write"}[f.name == "messages"]
				if name, args, _ := turnOf(t, s, f, []turn{{kind: "user", text: prompt}}, true); name != readName || args != readArgsOf(f, "/task/challenge.txt") {
					t.Fatalf("the task's first turn answered %s %s; want the read", name, args)
				}
				// The summary request, with its tools and without: a summary
				// that keeps the task and the challenge, never a tool call.
				var summary, id string
				for i, tools := range []bool{true, false} {
					a := post(t, s.URL()+f.path, f.build(req, tools), nil)
					name, args, text := f.answer(t, a.body)
					if name != "" || !strings.HasPrefix(text, model.SummaryMark) || !strings.Contains(text, prompt) || !strings.Contains(text, compactChallenge) {
						t.Fatalf("summary request (tools %t) answered %s %s %q; want a summary keeping the task and the challenge", tools, name, args, text)
					}
					// Its id (the request's number) on the answer and in the
					// mark: what the relay ties a resumed conversation by.
					if id = a.header.Get(model.SummaryHeader); id != fmt.Sprintf("s%d", 2+i) || !strings.Contains(text, ", "+id+"]") {
						t.Fatalf("summary request (tools %t): %s %q, text %q; want s%d in both", tools, model.SummaryHeader, id, text, 2+i)
					}
					summary = text
				}
				// The resumed conversation, as each harness builds it from
				// the summary: the challenge is in it (the summary's text), so
				// the write of the token derived from it, to the target.
				want := writeArgsOf(f, "/task/deliverable.txt", s.Token(compactChallenge))
				resumedAs := map[string][]turn{
					"a user turn (Claude Code)": {{kind: "user", text: "Called the Read tool with the following input: " + readArgsOf(f, "/task/challenge.txt")},
						{kind: "user", text: "Result of calling the Read tool:\n1\t" + compactChallenge},
						{kind: "user", text: claudeResumedHead + summary + claudeResumedTail}},
					"the assistant's turn (OpenCode)": {{kind: "assistant", text: summary}, {kind: "user", text: "Continue if you have next steps"}},
				}
				for how, resumed := range resumedAs {
					a := post(t, s.URL()+f.path, f.build(resumed, true), nil)
					name, args, text := f.answer(t, a.body)
					if name != writeName || args != want {
						t.Fatalf("resumed with the summary in %s: answered %s %s %q; want %s %s", how, name, args, text, writeName, want)
					}
					if got := a.header.Get(model.ResumesHeader); got != id {
						t.Fatalf("resumed with the summary in %s: %s %q; want %q", how, model.ResumesHeader, got, id)
					}
					after := append(append([]turn(nil), resumed...), turn{kind: "call", name: name, args: args}, turn{kind: "result", text: "written"})
					if name, args, text := turnOf(t, s, f, after, true); name != "" || text != "done" {
						t.Fatalf("resumed in %s, after the write: answered %s %s %q; want done", how, name, args, text)
					}
				}
				for _, c := range s.Calls() {
					if c.Reply == "no_task" {
						t.Errorf("call %d answered no_task: %s", c.Seq, c.Error)
					}
					if (c.Resumes != "") != (c.Seq > 3) || c.Resumes != "" && c.Resumes != id {
						t.Errorf("call %d recorded resumes %q; want %q from request 4 on", c.Seq, c.Resumes, id)
					}
				}
			})
		}
	}
}

// A summary made before the challenge came back keeps the task; the
// resumed conversation then reads the challenge again.
func TestResumedWithoutTheChallengeReadsIt(t *testing.T) {
	prompt := model.ChallengePrompt("/task/challenge.txt", "/task/deliverable.txt")
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			s := start(t, model.Options{})
			_, _, summary := turnOf(t, s, f, []turn{{kind: "user", text: prompt}, {kind: "user", text: claudeCompact}}, true)
			if !strings.Contains(summary, prompt) || strings.Contains(summary, model.ChallengePrefix) {
				t.Fatalf("summary before the read = %q; want the task and no challenge", summary)
			}
			name, args, text := turnOf(t, s, f, []turn{{kind: "user", text: claudeResumedHead + summary + claudeResumedTail}}, true)
			if !strings.EqualFold(name, "read") || args != readArgsOf(f, "/task/challenge.txt") {
				t.Fatalf("resumed without the challenge: answered %s %s %q; want the read", name, args, text)
			}
		})
	}
}

// A text that only speaks of a summary is no summary request: the task
// goes on.
func TestSummaryWordsElsewhereAreNoSummaryRequest(t *testing.T) {
	prompt := model.ChallengePrompt("/task/challenge.txt", "/task/deliverable.txt")
	f := formats[2]
	s := start(t, model.Options{})
	turns := []turn{{kind: "system", text: "When the conversation grows long, some or all of the current context is summarized; the summary is provided in the next context window."},
		{kind: "user", text: "<system-reminder>\nYou may be asked to create a summary of the conversation later.\n</system-reminder>\n" + prompt}}
	if name, _, text := turnOf(t, s, f, turns, true); name != "Read" {
		t.Fatalf("the task with summary words around it answered %s %q; want the read", name, text)
	}
}

// The guard: whatever a conversation looks like, the model never asks
// to write (or run a command naming) a file the task gave it to read.
// Without it, the old defect's resumed conversation (Claude Code's, the
// summary a bare "done") reads as a prompt-token prompt naming
// /task/challenge.txt and the challenge, and the model asked to write
// the one into the other.
func TestTheModelNeverAsksToWriteTheTaskInput(t *testing.T) {
	prompt := model.ChallengePrompt("/task/challenge.txt", "/task/deliverable.txt")
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			s := start(t, model.Options{})
			turnOf(t, s, f, []turn{{kind: "user", text: prompt}}, true)
			resumed := []turn{{kind: "user", text: "Called the Read tool with the following input: " + readArgsOf(f, "/task/challenge.txt")},
				{kind: "user", text: "Result of calling the Read tool:\n1\t" + compactChallenge},
				{kind: "user", text: claudeResumedHead + "done" + claudeResumedTail}}
			name, args, text := turnOf(t, s, f, resumed, true)
			if strings.Contains(args, "/task/challenge.txt") || name != "" {
				t.Fatalf("the resumed conversation of the issue answered %s %s; want no call naming the challenge", name, args)
			}
			calls := s.Calls()
			if last := calls[len(calls)-1]; last.Reply != "no_task" || !strings.Contains(last.Error, "/task/challenge.txt") || !strings.Contains(text, "/task/challenge.txt") {
				t.Fatalf("the refusal recorded %+v, said %q; want no_task naming the input", last, text)
			}
		})
	}
	// A prompt whose deliverable is its own challenge, through a write
	// tool or a shell: the read, then no write.
	selfPrompt := model.ChallengePrompt("/task/challenge.txt", "/task/challenge.txt")
	for name, tools := range map[string][]any{"a write tool": readWriteTools, "an argv shell": codexTools} {
		t.Run("its own challenge through "+name, func(t *testing.T) {
			s := start(t, model.Options{})
			msgs := []any{map[string]any{"role": "user", "content": selfPrompt}}
			call, _ := ask(t, s, tools, msgs)
			if call == nil || !strings.Contains(call.Function.Arguments, "/task/challenge.txt") {
				t.Fatalf("first answer = %+v; want the read", call)
			}
			msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": call.ID, "type": "function",
				"function": map[string]any{"name": call.Function.Name, "arguments": call.Function.Arguments}}}},
				map[string]any{"role": "tool", "tool_call_id": call.ID, "content": compactChallenge})
			if w, text := ask(t, s, tools, msgs); w != nil {
				t.Fatalf("a prompt asking to write its own challenge got %s %s (%q); want no call", w.Function.Name, w.Function.Arguments, text)
			}
		})
	}
}
