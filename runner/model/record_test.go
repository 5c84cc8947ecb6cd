package model_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/model"
)

// The scripted model's record of a call keeps a bounded part of what the
// harness sent (red team rt2 C1: a request under the relay's 8 MiB cap
// whose "model" field was 7 MiB, or that declared 100,000 tools, was kept
// and logged whole for every call, in certify's memory and on its disk,
// while the relay stayed within its budget): the model name at most 256
// bytes (also as answers echo it), 128 tool names of at most 128 bytes
// with the rest counted, and the calls together within RecordBytes,
// past which a call is counted (Unrecorded), neither kept nor logged.
func TestModelRecordIsBounded(t *testing.T) {
	log := filepath.Join(t.TempDir(), "model_calls.jsonl")
	const budget = 64 << 10
	s := start(t, model.Options{LogPath: log, RecordBytes: budget})
	tools := make([]any, 1000)
	for i := range tools {
		tools[i] = map[string]any{"type": "function", "function": map[string]any{"name": fmt.Sprintf("t%d-%s", i, strings.Repeat("n", 300)), "parameters": map[string]any{"type": "object"}}}
	}
	req := map[string]any{"model": strings.Repeat("m", 1<<20), "tools": tools,
		"messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	a := post(t, s.URL()+"/chat/completions", req, nil)
	if a.status != 200 {
		t.Fatalf("first request: %d %s", a.status, a.body)
	}
	if len(a.body) > 64<<10 || !strings.Contains(a.body, "…[cut]") {
		t.Errorf("the answer echoes a model name of %d bytes (want it cut to 256): %.200s", len(a.body), a.body)
	}
	calls := s.Calls()
	if len(calls) != 1 {
		t.Fatalf("%d calls kept after one request", len(calls))
	}
	c := calls[0]
	if len(c.Model) > 256+len("…[cut]") || !strings.HasPrefix(c.Model, "mmm") {
		t.Errorf("the model name kept is %d bytes", len(c.Model))
	}
	if len(c.ToolNames) != 128 || c.ToolNamesOmitted != 872 || len(c.ToolNames[0]) > 128+len("…[cut]") || !strings.HasPrefix(c.ToolNames[0], "t0-") {
		t.Errorf("tool names kept: %d (first %d bytes), omitted %d; want 128 of at most 128 bytes, 872 omitted", len(c.ToolNames), len(c.ToolNames[0]), c.ToolNamesOmitted)
	}
	// The budget: requests go on being answered; past it they are counted.
	for i := 0; i < 100; i++ {
		if a := post(t, s.URL()+"/chat/completions", req, nil); a.status != 200 {
			t.Fatalf("request %d: %d", i+2, a.status)
		}
	}
	kept, lost := len(s.Calls()), s.Unrecorded()
	if kept+lost != 101 || lost == 0 || kept < 2 {
		t.Errorf("%d calls kept and %d counted past the budget, of 101 (want both, adding up)", kept, lost)
	}
	fi, err := os.Stat(log)
	if err != nil || fi.Size() > budget || fi.Size() == 0 {
		t.Errorf("the log is %v bytes (%v), want some and at most the budget %d", fi.Size(), err, budget)
	}
}
