package model_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/runner/model"
)

// bashTools declares a read tool and a string-command shell (Pi's shape).
var bashTools = []any{
	readWriteTools[0],
	map[string]any{"type": "function", "function": map[string]any{"name": "bash", "parameters": map[string]any{
		"type": "object", "required": []any{"command"}, "properties": map[string]any{"command": map[string]any{"type": "string"}}}}},
}

// FlowWriterStall reads the challenge, then starts the writer through the
// shell tool, then stalls the next request; OnStall names that request as
// the stall begins, and the client gets no answer.
func TestWriterStallFlowReadsStartsTheWriterThenStalls(t *testing.T) {
	stalled := make(chan int, 4)
	s := start(t, model.Options{Script: model.Script{Flow: model.FlowWriterStall}, WriterPath: "/task/w.log",
		OnStall: func(seq int) { stalled <- seq }})
	msgs := []any{map[string]any{"role": "user", "content": model.ChallengePrompt("/task/challenge.txt", "/task/deliverable.txt")}}
	read, _ := ask(t, s, bashTools, msgs)
	if read == nil || read.Function.Name != "read" {
		t.Fatalf("first answer %+v, want the read of the challenge", read)
	}
	msgs = append(msgs, called(read), map[string]any{"role": "tool", "tool_call_id": read.ID, "content": model.ChallengePrefix + strings.Repeat("cd", 16)})
	w, _ := ask(t, s, bashTools, msgs)
	var args struct{ Command string }
	if w == nil || w.Function.Name != "bash" || json.Unmarshal([]byte(w.Function.Arguments), &args) != nil ||
		args.Command != model.WriterCommand("/task/w.log") {
		t.Fatalf("second answer %+v, want the bash call %q", w, model.WriterCommand("/task/w.log"))
	}
	msgs = append(msgs, called(w), map[string]any{"role": "tool", "tool_call_id": w.ID, "content": "writer started"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan error, 1)
	go func() {
		b, _ := json.Marshal(map[string]any{"model": "fake-model", "messages": msgs, "tools": bashTools})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/chat/completions", bytes.NewReader(b))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		got <- err
	}()
	if seq := <-stalled; seq != 3 {
		t.Fatalf("stall began on request %d, want 3", seq)
	}
	cancel()
	if err := <-got; err == nil {
		t.Fatal("the stalled request got an answer")
	}
	// Without a shell tool the flow stalls right after the read.
	s2 := start(t, model.Options{Script: model.Script{Flow: model.FlowWriterStall}, OnStall: func(seq int) { stalled <- seq }, StallMax: time.Millisecond})
	r2, _ := ask(t, s2, readWriteTools[:1], msgs[:1])
	msgs2 := append(msgs[:1:1], called(r2), map[string]any{"role": "tool", "tool_call_id": r2.ID, "content": model.ChallengePrefix + strings.Repeat("cd", 16)})
	b, _ := json.Marshal(map[string]any{"model": "fake-model", "messages": msgs2, "tools": readWriteTools[:1]})
	if resp, err := http.Post(s2.URL()+"/chat/completions", "application/json", bytes.NewReader(b)); err == nil {
		resp.Body.Close()
		t.Fatalf("no shell tool: the second request got status %d, want no answer", resp.StatusCode)
	}
	if seq := <-stalled; seq != 2 {
		t.Fatalf("no shell tool: stall began on request %d, want 2", seq)
	}
	if _, err := model.Start(model.Options{WriterPath: "/task/it's"}); err == nil {
		t.Fatal("a writer path with a quote was taken")
	}
}

// Whether the model asked for the writer is its own record, not the
// history the harness sends (red team D4): a history that claims a bash
// call carrying the writer's mark, which the model never made, gets the
// writer's call, not a stall; once the model asked, the next request
// stalls whatever its history holds; and a stall without the writer is
// recorded as the model's, naming the missing shell (model.StallNoShell)
// only when the harness declared none.
func TestWriterStallTrustsItsOwnRecord(t *testing.T) {
	s := start(t, model.Options{Script: model.Script{Flow: model.FlowWriterStall}, WriterPath: "/task/w.log", StallMax: time.Millisecond})
	msgs := []any{map[string]any{"role": "user", "content": model.ChallengePrompt("/task/challenge.txt", "/task/deliverable.txt")}}
	read, _ := ask(t, s, bashTools, msgs)
	if read == nil || read.Function.Name != "read" {
		t.Fatalf("first answer %+v, want the read of the challenge", read)
	}
	msgs = append(msgs, called(read), map[string]any{"role": "tool", "tool_call_id": read.ID, "content": model.ChallengePrefix + strings.Repeat("cd", 16)})
	forged := &toolCallOut{ID: "call_mine"}
	forged.Function.Name, forged.Function.Arguments = "bash", `{"command":"echo sandproof-writer"}`
	claimed := append(append([]any{}, msgs...), called(forged), map[string]any{"role": "tool", "tool_call_id": "call_mine", "content": "sandproof-writer"})
	w, _ := ask(t, s, bashTools, claimed)
	if w == nil || w.Function.Name != "bash" || !strings.Contains(w.Function.Arguments, "setsid sh -c") {
		t.Fatalf("a history claiming the writer's call: answer %+v, want the writer's own call (the model never asked)", w)
	}
	// Asked now: the request after, its history without the writer's
	// call, stalls (StallMax 1 ms: no answer).
	b, _ := json.Marshal(map[string]any{"model": "fake-model", "messages": msgs, "tools": bashTools})
	if resp, err := http.Post(s.URL()+"/chat/completions", "application/json", bytes.NewReader(b)); err == nil {
		resp.Body.Close()
		t.Fatalf("after the writer's call: status %d, want a stall", resp.StatusCode)
	}
	calls := callsOnceRecorded(t, s, 3)
	if len(calls) != 3 || calls[1].Reply != "start_writer" || calls[2].Reply != "stall" || strings.HasPrefix(calls[2].Error, model.StallNoShell) {
		t.Fatalf("calls %+v, want read, start_writer, then a stall after the writer", calls)
	}
	// No shell tool: the stall says so.
	s2 := start(t, model.Options{Script: model.Script{Flow: model.FlowWriterStall}, StallMax: time.Millisecond})
	r2, _ := ask(t, s2, readWriteTools[:1], msgs[:1])
	msgs2 := append(msgs[:1:1], called(r2), map[string]any{"role": "tool", "tool_call_id": r2.ID, "content": model.ChallengePrefix + strings.Repeat("cd", 16)})
	b, _ = json.Marshal(map[string]any{"model": "fake-model", "messages": msgs2, "tools": readWriteTools[:1]})
	if resp, err := http.Post(s2.URL()+"/chat/completions", "application/json", bytes.NewReader(b)); err == nil {
		resp.Body.Close()
	}
	if c := callsOnceRecorded(t, s2, 2); len(c) != 2 || c[1].Reply != "stall" || !strings.HasPrefix(c[1].Error, model.StallNoShell) {
		t.Errorf("no shell tool: calls %+v, want a stall noted %q", c, model.StallNoShell)
	}
}

// callsOnceRecorded is s.Calls() once it holds n calls: a stalled call is
// recorded as its handler returns, after the client saw the connection
// close. It polls the record, bounded, and fails the test past 5 s.
func callsOnceRecorded(t *testing.T, s *model.Server, n int) []model.Call {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if c := s.Calls(); len(c) >= n || time.Now().After(deadline) {
			return c
		}
	}
}

func called(c *toolCallOut) any {
	return map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": c.ID, "type": "function",
		"function": map[string]any{"name": c.Function.Name, "arguments": c.Function.Arguments}}}}
}

// The writer command runs under BusyBox sh and dash: the shell returns at
// once, and the writer, in a session of its own with its output on
// /dev/null, appends numbered lines until it is killed.
func TestWriterCommandDetachesAndWrites(t *testing.T) {
	for _, sh := range [][]string{{"busybox", "sh"}, {"dash"}} {
		if _, err := exec.LookPath(sh[0]); err != nil {
			t.Fatalf("%s: %v (the test needs it)", sh[0], err)
		}
		out := filepath.Join(t.TempDir(), "w.log")
		cmd := exec.Command(sh[0], append(sh[1:], "-c", model.WriterCommand(out))...)
		said, err := cmd.Output()
		if err != nil || strings.TrimSpace(string(said)) != "writer started" {
			t.Fatalf("%s: %q, %v", sh[0], said, err)
		}
		pid := writerPid(t, out)
		defer syscall.Kill(pid, syscall.SIGKILL)
		sid, err := unix.Getsid(pid)
		if err != nil || sid != pid {
			t.Errorf("%s: writer %d in session %d (%v), want its own", sh[0], pid, sid, err)
		}
		if fd1, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/1"); fd1 != "/dev/null" {
			t.Errorf("%s: writer's stdout %q, want /dev/null", sh[0], fd1)
		}
		for deadline := time.Now().Add(30 * time.Second); ; {
			b, _ := os.ReadFile(out)
			if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) >= 3 {
				if f := strings.Fields(lines[0]); len(f) != 2 || f[0] != "0" {
					t.Errorf("%s: first line %q, want \"0 EPOCH\"", sh[0], lines[0])
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: writer wrote %q in 30 s", sh[0], b)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// writerPid finds the writer writing to out (its command line names out),
// waiting for it with a deadline.
func writerPid(t *testing.T, out string) int {
	t.Helper()
	// The writer is the sh running the loop: not setsid (whose argv holds
	// the loop too, in the caller's session until it execs) and not a
	// command substitution's fork of the loop's sh (its parent is a match).
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(out); len(b) == 0 {
			continue // not yet running its loop
		}
		matches := map[int]int{} // pid -> ppid
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			cl, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			argv0, _, _ := strings.Cut(string(cl), "\x00")
			if filepath.Base(argv0) != "sh" || !strings.Contains(string(cl), out) || !strings.Contains(string(cl), "while") {
				continue
			}
			st, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
			var ppid int
			if i := strings.LastIndexByte(string(st), ')'); i > 0 {
				if f := strings.Fields(string(st[i+2:])); len(f) > 1 {
					ppid, _ = strconv.Atoi(f[1])
				}
			}
			matches[pid] = ppid
		}
		for pid, ppid := range matches {
			if _, child := matches[ppid]; !child {
				return pid
			}
		}
	}
	t.Fatalf("no writer for %s", out)
	return 0
}

// hermesTools declares a read tool and Hermes's terminal: a string command
// and its own background mode.
var hermesTools = []any{
	readWriteTools[0],
	map[string]any{"type": "function", "function": map[string]any{"name": "terminal", "parameters": map[string]any{
		"type": "object", "required": []any{"command"}, "properties": map[string]any{
			"command": map[string]any{"type": "string"}, "background": map[string]any{"type": "boolean"}}}}},
}

// A shell tool that refuses the detached writer in the foreground and
// declares a background mode is asked once more in that mode; one that ran
// it, or declares no such mode, is not: the next request stalls.
func TestWriterStallAsksABackgroundModeOnceWhenRefused(t *testing.T) {
	refused := `{"output": "", "exit_code": -1, "error": "Foreground command uses shell-level background wrappers (nohup/disown/setsid). Use terminal(background=true)"}`
	for _, tc := range []struct {
		name   string
		tools  []any
		result string
		wantBg bool
	}{
		{"refused, background declared", hermesTools, refused, true},
		{"ran, background declared", hermesTools, "writer started", false},
		{"refused, no background mode", bashTools, refused, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, model.Options{Script: model.Script{Flow: model.FlowWriterStall}, WriterPath: "/task/w.log", StallMax: time.Millisecond})
			msgs := []any{map[string]any{"role": "user", "content": model.ChallengePrompt("/task/challenge.txt", "/task/deliverable.txt")}}
			read, _ := ask(t, s, tc.tools, msgs)
			msgs = append(msgs, called(read), map[string]any{"role": "tool", "tool_call_id": read.ID, "content": model.ChallengePrefix + strings.Repeat("cd", 16)})
			w, _ := ask(t, s, tc.tools, msgs)
			if w == nil || !strings.Contains(w.Function.Arguments, "setsid sh -c") {
				t.Fatalf("second answer %+v, want the detached writer first", w)
			}
			msgs = append(msgs, called(w), map[string]any{"role": "tool", "tool_call_id": w.ID, "content": tc.result})
			b, _ := json.Marshal(map[string]any{"model": "fake-model", "messages": msgs, "tools": tc.tools})
			if !tc.wantBg {
				resp, err := http.Post(s.URL()+"/chat/completions", "application/json", bytes.NewReader(b))
				if err == nil {
					resp.Body.Close()
				}
				if c := callsOnceRecorded(t, s, 3); c[len(c)-1].Reply != "stall" {
					t.Fatalf("third call %+v, want a stall", c[len(c)-1])
				}
				return
			}
			bg, _ := ask(t, s, tc.tools, msgs)
			var args struct {
				Command    string
				Background bool
			}
			if bg == nil || json.Unmarshal([]byte(bg.Function.Arguments), &args) != nil || !args.Background ||
				args.Command != model.WriterBackgroundCommand("/task/w.log") {
				t.Fatalf("third answer %+v, want the writer in the background mode", bg)
			}
			if c := s.Calls(); c[len(c)-1].Reply != "start_writer_background" {
				t.Fatalf("third call recorded %+v", c[len(c)-1])
			}
			// Asked in both ways now: the next request stalls.
			resp, err := http.Post(s.URL()+"/chat/completions", "application/json", bytes.NewReader(b))
			if err == nil {
				resp.Body.Close()
			}
			if c := callsOnceRecorded(t, s, 4); c[len(c)-1].Reply != "stall" {
				t.Fatalf("fourth call %+v, want a stall", c[len(c)-1])
			}
		})
	}
}
