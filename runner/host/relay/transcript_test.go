package relay_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/relay"
)

// sse writes events as an SSE body: each a data line, Anthropic's and the
// Responses API's with an event line first.
func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		var ev struct {
			Type string `json:"type"`
		}
		if json.Unmarshal([]byte(e), &ev) == nil && ev.Type != "" {
			fmt.Fprintf(&b, "event: %s\n", ev.Type)
		}
		fmt.Fprintf(&b, "data: %s\n\n", e)
	}
	return b.String()
}

// The transcript holds what the chained proof needs (contract §7.4), for
// each API shape, plain and streamed: every tool call an answer made with
// its id, every tool result a request carried with the id of the call it
// answers, and the assistant tool calls the request's history claims. The
// answers and requests are canned, so each field is known exactly.
func TestTranscriptRecordsToolCallIDs(t *testing.T) {
	readArgs := `{"path":"/task/challenge.txt"}`
	writeArgs := `{"content":"proof-1","path":"/task/deliverable.txt"}`
	chatReq := `{"model":"m","messages":[
		{"role":"user","content":"go"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"read","arguments":` + jsonStr(readArgs) + `}}]},
		{"role":"tool","tool_call_id":"call_a","content":"challenge-a"},
		{"role":"assistant","content":null,"function_call":{"name":"read","arguments":"{}"}},
		{"role":"function","name":"read","content":[{"type":"text","text":"legacy"}]}]}`
	chatWant := relay.Call{
		ToolResults:      []string{"challenge-a", "legacy"},
		ToolResultIDs:    []string{"call_a", ""},
		ClaimedToolCalls: []relay.ToolCall{{ID: "call_a", Name: "read", Arguments: readArgs}, {Name: "read", Arguments: "{}"}},
		ToolCalls:        []relay.ToolCall{{ID: "call_b", Name: "write", Arguments: writeArgs}},
	}
	respReq := `{"model":"m","input":[
		{"role":"user","content":"go"},
		{"type":"function_call","id":"fc_1","call_id":"call_r1","name":"read","arguments":` + jsonStr(readArgs) + `},
		{"type":"function_call_output","call_id":"call_r1","output":"challenge-r"},
		{"type":"custom_tool_call","call_id":"call_r2","name":"apply_patch","input":"*** Begin Patch"},
		{"type":"custom_tool_call_output","call_id":"call_r2","output":"patched"}]}`
	respWant := relay.Call{
		ToolResults:   []string{"challenge-r", "patched"},
		ToolResultIDs: []string{"call_r1", "call_r2"},
		ClaimedToolCalls: []relay.ToolCall{{ID: "call_r1", Name: "read", Arguments: readArgs},
			{ID: "call_r2", Name: "apply_patch", Arguments: "*** Begin Patch"}},
		// The call_id, not the item's own id (fc_...).
		ToolCalls: []relay.ToolCall{{ID: "call_r3", Name: "write", Arguments: writeArgs}},
	}
	respItem := `{"type":"function_call","id":"fc_3","call_id":"call_r3","name":"write","arguments":` + jsonStr(writeArgs) + `}`
	msgReq := `{"model":"m","max_tokens":10,"messages":[
		{"role":"user","content":"go"},
		{"role":"assistant","content":[{"type":"text","text":"reading"},{"type":"tool_use","id":"toolu_1","name":"Read","input":` + readArgs + `}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"challenge-m"}]}]}]}`
	msgWant := relay.Call{
		ToolResults:      []string{"challenge-m"},
		ToolResultIDs:    []string{"toolu_1"},
		ClaimedToolCalls: []relay.ToolCall{{ID: "toolu_1", Name: "Read", Arguments: readArgs}},
		ToolCalls:        []relay.ToolCall{{ID: "toolu_2", Name: "Write", Arguments: writeArgs}},
	}
	for _, tc := range []struct {
		name, path, req, answer string
		stream                  bool
		want                    relay.Call
	}{
		{name: "chat plain", path: "/chat/completions", req: chatReq, want: chatWant,
			answer: `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_b","type":"function","function":{"name":"write","arguments":` + jsonStr(writeArgs) + `}}]}}]}`},
		{name: "chat streamed", path: "/chat/completions", req: chatReq, want: chatWant, stream: true,
			answer: sse(`{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"write","arguments":""}}]}}]}`,
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`+jsonStr(writeArgs[:10])+`}}]}}]}`,
				// A server that repeats the id in later chunks.
				`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_b","function":{"arguments":`+jsonStr(writeArgs[10:])+`}}]}}]}`,
				`[DONE]`)},
		{name: "responses plain", path: "/responses", req: respReq, want: respWant,
			answer: `{"id":"resp_1","object":"response","output":[` + respItem + `]}`},
		{name: "responses streamed", path: "/responses", req: respReq, want: respWant, stream: true,
			answer: sse(`{"type":"response.created","response":{"id":"resp_1","output":[]}}`,
				`{"type":"response.function_call_arguments.delta","item_id":"fc_3","delta":"{}"}`,
				`{"type":"response.completed","response":{"id":"resp_1","output":[`+respItem+`]}}`)},
		{name: "messages plain", path: "/messages", req: msgReq, want: msgWant,
			answer: `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"Write","input":` + writeArgs + `}]}`},
		{name: "messages streamed", path: "/messages", req: msgReq, want: msgWant, stream: true,
			answer: sse(`{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":3,"output_tokens":1}}}`,
				`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_2","name":"Write","input":{}}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":`+jsonStr(writeArgs[:12])+`}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":`+jsonStr(writeArgs[12:])+`}}`,
				`{"type":"content_block_stop","index":0}`, `{"type":"message_stop"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if tc.stream {
					w.Header().Set("Content-Type", "text/event-stream")
				} else {
					w.Header().Set("Content-Type", "application/json")
				}
				io.WriteString(w, tc.answer)
			}))
			defer up.Close()
			r := startRelay(t, relay.Options{Upstream: up.URL + "/v1"})
			resp, err := http.Post(r.URL()+tc.path, "application/json", strings.NewReader(tc.req))
			if err != nil {
				t.Fatal(err)
			}
			io.ReadAll(resp.Body)
			resp.Body.Close()
			r.Close()
			calls := r.Calls()
			if len(calls) != 1 {
				t.Fatalf("calls = %+v; want 1", calls)
			}
			c := calls[0]
			got := relay.Call{ToolResults: c.ToolResults, ToolResultIDs: c.ToolResultIDs, ClaimedToolCalls: c.ClaimedToolCalls, ToolCalls: c.ToolCalls}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("recorded\n%s\nwant\n%s", js(got), js(tc.want))
			}
		})
	}
}

// A transcript line written before ids were recorded still reads, with
// its tool results as they were (model_relay.jsonl is evidence others
// read: the new fields are additive).
func TestTranscriptReadsAnOldLine(t *testing.T) {
	old := `{"seq":2,"method":"POST","path":"/v1/chat/completions","time":"2026-01-01T00:00:00Z","auth":"canary","status":200,"stream":true,` +
		`"tool_results":["sandproof-challenge-00"],"tool_calls":[{"name":"write","arguments":"{}"}],"bytes":10,"seconds":0.1}`
	var c relay.Call
	if err := json.Unmarshal([]byte(old), &c); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c.ToolResults) != "[sandproof-challenge-00]" || c.ToolResultIDs != nil || len(c.ToolCalls) != 1 || c.ToolCalls[0].ID != "" {
		t.Fatalf("read %+v", c)
	}
	b, _ := json.Marshal(c)
	for _, k := range []string{`"tool_result_ids"`, `"claimed_tool_calls"`, `"id"`} {
		if strings.Contains(string(b), k) {
			t.Errorf("an old line written again gains %s: %s", k, b)
		}
	}
}

func jsonStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func js(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
