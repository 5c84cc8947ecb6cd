package model_test

import (
	"encoding/json"
	"os"
	"path/filepath"
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
