package model_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/model"
)

// harnessTools reads testdata/tools/NAME.json: the tools a harness
// declares, as its requests carry them.
func harnessTools(t *testing.T, name string) []model.Tool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "tools", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var decl []struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Parameters  map[string]any `json:"parameters"`
	}
	if err := json.Unmarshal(b, &decl); err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	tools := make([]model.Tool, len(decl))
	for i, d := range decl {
		tools[i] = model.Tool{Name: d.Name, Description: d.Description, Parameters: d.Parameters}
	}
	return tools
}

// plan is what the scripted model chose from one harness's tools: a
// tool's name and its JSON arguments, "" when it found none.
type plan struct{ name, args string }

func planned(name, args string, ok bool) plan {
	if !ok {
		return plan{}
	}
	return plan{name, args}
}

// TestPlansPinEachHarnessChoice pins the tool, and its arguments, the
// scripted model picks from each harness's declared tools to read the
// challenge, to write the deliverable (write preferred, then shell
// preferred) and to start the writer in the shell tool's own background
// mode: every shipped harness keeps the choice that certifies it.
func TestPlansPinEachHarnessChoice(t *testing.T) {
	const (
		catArg   = `'/task/challenge.txt'`
		printfSh = `printf '%s' 'proof-1' \u003e '/task/deliverable.txt'`
	)
	cases := []struct {
		harness                   string
		read, write, shell, bgRun plan
	}{
		{"claude-code", plan{"Read", `{"file_path":"/task/challenge.txt"}`}, plan{"Write", `{"content":"proof-1","file_path":"/task/deliverable.txt"}`},
			plan{"Bash", `{"command":"` + printfSh + `"}`}, plan{}},
		{"codex", plan{"exec_command", `{"cmd":"cat ` + catArg + `"}`}, plan{"exec_command", `{"cmd":"` + printfSh + `"}`},
			plan{"exec_command", `{"cmd":"` + printfSh + `"}`}, plan{}},
		{"codex-shell", plan{"shell", `{"command":["cat","/task/challenge.txt"]}`}, plan{"shell", `{"command":["sh","-c","` + printfSh + `"]}`},
			plan{"shell", `{"command":["sh","-c","` + printfSh + `"]}`}, plan{}},
		{"pi", plan{"read", `{"path":"/task/challenge.txt"}`}, plan{"write", `{"content":"proof-1","path":"/task/deliverable.txt"}`},
			plan{"bash", `{"command":"` + printfSh + `"}`}, plan{}},
		{"opencode", plan{"read", `{"filePath":"/task/challenge.txt"}`}, plan{"write", `{"content":"proof-1","filePath":"/task/deliverable.txt"}`},
			plan{"bash", `{"command":"` + printfSh + `","description":"Write the deliverable file"}`}, plan{}},
		{"kilo", plan{"read", `{"filePath":"/task/challenge.txt"}`}, plan{"write", `{"content":"proof-1","filePath":"/task/deliverable.txt"}`},
			plan{"bash", `{"command":"` + printfSh + `","description":"Write the deliverable file"}`}, plan{}},
		{"openclaw", plan{"read", `{"path":"/task/challenge.txt"}`}, plan{"write", `{"content":"proof-1","path":"/task/deliverable.txt"}`},
			plan{"exec", `{"command":"` + printfSh + `"}`}, plan{"exec", `{"background":true,"command":"sleep 1"}`}},
		{"hermes", plan{"read_file", `{"path":"/task/challenge.txt"}`}, plan{"write_file", `{"content":"proof-1","path":"/task/deliverable.txt"}`},
			plan{"terminal", `{"command":"` + printfSh + `"}`}, plan{"terminal", `{"background":true,"command":"sleep 1"}`}},
		{"mini-swe-agent", plan{"bash", `{"command":"cat ` + catArg + `"}`}, plan{"bash", `{"command":"` + printfSh + `"}`},
			plan{"bash", `{"command":"` + printfSh + `"}`}, plan{}},
		{"stirrup", plan{"code_exec", `{"cmd":"cat ` + catArg + `"}`}, plan{"code_exec", `{"cmd":"` + printfSh + `"}`},
			plan{"code_exec", `{"cmd":"` + printfSh + `"}`}, plan{}},
		// Cline 3.0.65: arrays and nested objects (issue 38).
		{"cline", plan{"read_files", `{"files":[{"path":"/task/challenge.txt"}]}`}, plan{"editor", `{"new_text":"proof-1","path":"/task/deliverable.txt"}`},
			plan{"run_commands", `{"commands":["` + printfSh + `"]}`}, plan{}},
	}
	for _, c := range cases {
		t.Run(c.harness, func(t *testing.T) {
			tools := harnessTools(t, c.harness)
			for _, got := range []struct {
				what      string
				got, want plan
			}{
				{"read", planned(model.PlanReadCall(tools, "/task/challenge.txt")), c.read},
				{"write (write preferred)", planned(model.PlanToolCall(tools, "/task/deliverable.txt", "proof-1", model.PreferWrite)), c.write},
				{"write (shell preferred)", planned(model.PlanToolCall(tools, "/task/deliverable.txt", "proof-1", model.PreferShell)), c.shell},
				{"background writer", planned(model.PlanBackgroundShellCall(tools, "sleep 1")), c.bgRun},
			} {
				if got.got != got.want {
					t.Errorf("%s: got %s %s, want %s %s", got.what, got.got.name, got.got.args, got.want.name, got.want.args)
				}
			}
		})
	}
}

// decl parses one tool declaration written as JSON.
func decl(t *testing.T, name, description, parameters string) model.Tool {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal([]byte(parameters), &p); err != nil {
		t.Fatalf("schema of %s: %v", name, err)
	}
	return model.Tool{Name: name, Description: description, Parameters: p}
}

// TestPlansFollowWhatSchemasExpress: the read, write and shell tools are
// found by what their schemas can express, their names and descriptions
// only ordering them or ruling one out; required arguments are filled
// from the schema (an enum's create value, a nested object's own
// requirements) or rule the tool out (another operation's operand).
func TestPlansFollowWhatSchemasExpress(t *testing.T) {
	const printfSh = `printf '%s' 'proof-1' \u003e '/task/deliverable.txt'`
	cases := []struct {
		name         string
		tools        [][3]string // name, description, schema
		read, write  plan
		writeIsShell bool
	}{
		{name: "an editor whose command enum is filled with create",
			tools: [][3]string{{"str_replace_based_edit_tool", "Custom editing tool for viewing, creating and editing files.",
				`{"type":"object","properties":{"command":{"type":"string","enum":["view","create","str_replace","insert"]},"path":{"type":"string"},"file_text":{"type":"string"},"old_str":{"type":"string"},"new_str":{"type":"string"}},"required":["command","path"]}`}},
			write: plan{"str_replace_based_edit_tool", `{"command":"create","file_text":"proof-1","path":"/task/deliverable.txt"}`}},
		{name: "a path alone does not make a read tool",
			tools: [][3]string{
				{"view_image", "View a local image from the filesystem.", `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`},
				{"finish", "Signal task completion.", `{"type":"object","properties":{"reason":{"type":"string"},"paths":{"type":"array","items":{"type":"string"}}},"required":["reason","paths"]}`},
				{"Glob", "Fast file pattern matching; reads nothing.", `{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"}},"required":["pattern"]}`},
				{"attach", "Attach a local file to the conversation.", `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`},
				{"search_files", "Searches and reads file contents.", `{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"}}}`},
			}},
		{name: "a description that says read, with an array of paths",
			tools: [][3]string{{"fs_get", "Reads the files at the given paths.", `{"type":"object","properties":{"paths":{"type":"array","items":{"type":"string"}}},"required":["paths"]}`}},
			read:  plan{"fs_get", `{"paths":["/task/challenge.txt"]}`}},
		{name: "a nullable path, a nullable timeout and a required nested object built from its schema",
			tools: [][3]string{{"save_file", "", `{"type":"object","properties":{"target":{"anyOf":[{"type":"string"},{"type":"null"}]},"body":{"type":"string"},"options":{"type":"object","properties":{"mode":{"type":"string","enum":["append","overwrite"]},"note":{"type":"string"}},"required":["mode"]},"timeout_ms":{"anyOf":[{"type":"integer"},{"type":"null"}]}},"required":["target","body","options","timeout_ms"]}`}},
			write: plan{"save_file", `{"body":"proof-1","options":{"mode":"overwrite"},"target":"/task/deliverable.txt","timeout_ms":60000}`}},
		{name: "an edit that requires the old text is no write tool",
			tools: [][3]string{
				{"edit_file", "Replace text in a file.", `{"type":"object","properties":{"path":{"type":"string"},"old_text":{"type":"string"},"new_text":{"type":"string"}},"required":["path","old_text","new_text"]}`},
				{"sandbox", "Runs a command in the sandbox.", `{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}`},
			},
			read: plan{"sandbox", `{"cmd":"cat '/task/challenge.txt'"}`}, write: plan{"sandbox", `{"cmd":"` + printfSh + `"}`}},
		{name: "a command enum is no shell",
			tools: [][3]string{{"process", "Manage processes: run, list, kill.", `{"type":"object","properties":{"command":{"type":"string","enum":["list","kill"]}},"required":["command"]}`}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tools []model.Tool
			for _, d := range c.tools {
				tools = append(tools, decl(t, d[0], d[1], d[2]))
			}
			if got := planned(model.PlanReadCall(tools, "/task/challenge.txt")); got != c.read {
				t.Errorf("read: got %s %s, want %s %s", got.name, got.args, c.read.name, c.read.args)
			}
			if got := planned(model.PlanToolCall(tools, "/task/deliverable.txt", "proof-1", model.PreferWrite)); got != c.write {
				t.Errorf("write: got %s %s, want %s %s", got.name, got.args, c.write.name, c.write.args)
			}
		})
	}
}

// TestToolShapesNameWhatTheModelWasOffered: the reason the scripted model
// gives when no tool fits shows each tool's arguments, so a reader can
// tell the model's limit from the harness's fault; it is bounded, since
// the names come from the harness.
func TestToolShapesNameWhatTheModelWasOffered(t *testing.T) {
	got := model.ToolShapes(harnessTools(t, "cline"))
	for _, want := range []string{"read_files{files:[{path}]}", "run_commands{commands:[string]}", "editor{path,new_text}", "fetch_web_content{requests:[{url,prompt}]}"} {
		if !strings.Contains(got, want) {
			t.Errorf("ToolShapes(cline) = %q, lacks %q", got, want)
		}
	}
	many := make([]model.Tool, 40)
	for i := range many {
		many[i] = model.Tool{Name: strings.Repeat("x", 500)}
	}
	got = model.ToolShapes(many)
	if !strings.HasSuffix(got, ", and 24 more") || len(got) > 16*(96+len("…, "))+len("and 24 more") {
		t.Errorf("ToolShapes(40 long names) is not bounded: %d bytes, ends %q", len(got), got[max(0, len(got)-40):])
	}
}

// TestNoFittingToolIsTheModelsRecordedLimit: a harness whose tools the
// scripted model cannot call gets a text answer, and the call's record
// says why as the model's own limit, with every tool's shape, for
// certify's checks; tools it can call leave no limit. The tools travel
// as a harness sends them (Chat Completions, descriptions included: a
// description that says the tool reads makes it the read tool).
func TestNoFittingToolIsTheModelsRecordedLimit(t *testing.T) {
	wire := func(tools ...model.Tool) []any {
		out := make([]any, len(tools))
		for i, tl := range tools {
			out[i] = map[string]any{"type": "function", "function": map[string]any{"name": tl.Name, "description": tl.Description, "parameters": tl.Parameters}}
		}
		return out
	}
	image := decl(t, "view_image", "View a local image.", `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
	finish := decl(t, "finish", "Signal task completion.", `{"type":"object","properties":{"reason":{"type":"string"},"paths":{"type":"array","items":{"type":"string"}}},"required":["reason","paths"]}`)
	getter := decl(t, "fs_get", "Reads the file at path.", `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)
	msgs := []any{map[string]any{"role": "user", "content": model.ChallengePrompt("/task/challenge.txt", "/task/deliverable.txt")}}

	s := start(t, model.Options{})
	call, text := ask(t, s, wire(image, finish), msgs)
	if call != nil || text != "I have no tool that can read a file." {
		t.Fatalf("answer = %+v %q; want the text saying no tool can read", call, text)
	}
	calls := s.Calls()
	want := "the scripted model found no read or shell tool it can call among: view_image{path}, finish{reason,paths:[string]}"
	if len(calls) != 1 || calls[0].Limit != want || calls[0].Reply != "no_task" {
		t.Fatalf("calls = %+v; want one no_task call whose limit is %q", calls, want)
	}

	s = start(t, model.Options{})
	call, text = ask(t, s, wire(image, getter), msgs)
	if call == nil || call.Function.Name != "fs_get" || call.Function.Arguments != `{"path":"/task/challenge.txt"}` {
		t.Fatalf("answer = %+v %q; want fs_get reading the challenge", call, text)
	}
	if calls := s.Calls(); len(calls) != 1 || calls[0].Limit != "" {
		t.Fatalf("calls = %+v; want one call with no limit", calls)
	}
}
