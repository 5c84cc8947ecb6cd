package certify

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/relay"
	"github.com/sandproof/sandproof/runner/model"
)

// turn is one tool round of a conversation as a harness sends it back:
// the assistant tool call its history claims and the tool result it
// carries.
type turn struct {
	claimID, name, args string
	resultID, result    string
}

// apiShape builds a request of one model API: the prompt, the turns, and
// a read and a write tool declared with their schemas.
type apiShape struct {
	name, path string
	build      func(prompt string, turns []turn) any
}

var (
	readSchema  = map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []any{"path"}}
	writeSchema = map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}},
		"required": []any{"path", "content"}}
)

func rawArgs(args string) json.RawMessage {
	if json.Valid([]byte(args)) {
		return json.RawMessage(args)
	}
	b, _ := json.Marshal(args)
	return b
}

var apiShapes = []apiShape{
	{name: "chat completions", path: "/chat/completions", build: func(prompt string, turns []turn) any {
		msgs := []any{map[string]any{"role": "user", "content": prompt}}
		for _, t := range turns {
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": t.claimID, "type": "function",
					"function": map[string]any{"name": t.name, "arguments": t.args}}}},
				map[string]any{"role": "tool", "tool_call_id": t.resultID, "content": t.result})
		}
		return map[string]any{"model": "fake-model", "messages": msgs, "tools": []any{
			map[string]any{"type": "function", "function": map[string]any{"name": "read", "parameters": readSchema}},
			map[string]any{"type": "function", "function": map[string]any{"name": "write", "parameters": writeSchema}}}}
	}},
	{name: "responses", path: "/responses", build: func(prompt string, turns []turn) any {
		items := []any{map[string]any{"role": "user", "content": prompt}}
		for _, t := range turns {
			items = append(items,
				map[string]any{"type": "function_call", "id": "fc_" + t.claimID, "call_id": t.claimID, "name": t.name, "arguments": t.args},
				map[string]any{"type": "function_call_output", "call_id": t.resultID, "output": t.result})
		}
		return map[string]any{"model": "fake-model", "input": items, "tools": []any{
			map[string]any{"type": "function", "name": "read", "parameters": readSchema},
			map[string]any{"type": "function", "name": "write", "parameters": writeSchema}}}
	}},
	{name: "anthropic messages", path: "/messages", build: func(prompt string, turns []turn) any {
		msgs := []any{map[string]any{"role": "user", "content": prompt}}
		for _, t := range turns {
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": t.claimID, "name": t.name, "input": rawArgs(t.args)}}},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": t.resultID,
					"content": []any{map[string]any{"type": "text", "text": t.result}}}}})
		}
		return map[string]any{"model": "fake-model", "max_tokens": 1000, "messages": msgs, "tools": []any{
			map[string]any{"name": "read", "input_schema": readSchema},
			map[string]any{"name": "write", "input_schema": writeSchema}}}
	}},
}

// conv is a harness talking to the scripted model through a relay in one
// API shape; send returns the tool calls of the model's answer.
type conv struct {
	t      *testing.T
	shape  apiShape
	rel    *relay.Relay
	srv    *model.Server
	prompt string
	// challenge is the case's; token what the scripted model derives.
	challenge, token string
	// stream asks for streamed answers (SSE).
	stream bool
}

func newConv(t *testing.T, shape apiShape) *conv {
	t.Helper()
	srv, err := model.Start(model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	rel, err := relay.Start(relay.Options{Upstream: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rel.Close() })
	ch := model.ChallengePrefix + strings.Repeat("5a", 16)
	return &conv{t: t, shape: shape, rel: rel, srv: srv, challenge: ch, token: srv.Token(ch),
		prompt: model.ChallengePrompt(ChallengeFile, Deliverable)}
}

func (c *conv) send(turns ...turn) []relay.ToolCall {
	c.t.Helper()
	req := c.shape.build(c.prompt, turns).(map[string]any)
	req["stream"] = c.stream
	b, _ := json.Marshal(req)
	resp, err := http.Post(c.rel.URL()+c.shape.path, "application/json", strings.NewReader(string(b)))
	if err != nil {
		c.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		c.t.Fatalf("%s: status %d: %s", c.shape.path, resp.StatusCode, body)
	}
	calls := c.rel.Calls()
	return calls[len(calls)-1].ToolCalls
}

// answer is the turn that answers the model's tool call tc with text.
func answer(tc relay.ToolCall, text string) turn {
	return turn{claimID: tc.ID, name: tc.Name, args: tc.Arguments, resultID: tc.ID, result: text}
}

// judge runs analyse and loopChecks over the relay's transcript, with the
// scripted model's token or, as for `--model URL`, none.
func (c *conv) judge(derived string) (loopProof, map[string]reports.Check) {
	c.rel.Close()
	return judgeCalls(c.rel.Calls(), c.challenge, derived)
}

func judgeCalls(calls []relay.Call, challenge, derived string) (loopProof, map[string]reports.Check) {
	p := analyse(calls, challenge, derived, "scripted")
	cr := &caseRun{ev: &reports.Evidence{}}
	cr.loopChecks(p, derived)
	out := map[string]reports.Check{}
	for _, ch := range cr.ev.Checks {
		out[ch.ID] = ch
	}
	return p, out
}

// wantChecks says which of the loop's checks pass; a failed one's detail
// must hold its string (the link that broke).
func wantChecks(t *testing.T, got map[string]reports.Check, want map[string]string) {
	t.Helper()
	for _, id := range []string{"verify.model_called", "verify.challenge_asked", "verify.challenge_round_trip", "verify.write_after_challenge"} {
		w, fails := want[id]
		ch := got[id]
		switch {
		case !fails && ch.Status != reports.StatusPassed:
			t.Errorf("%s %s: %s; want passed", id, ch.Status, ch.Detail)
		case fails && ch.Status != reports.StatusFailed:
			t.Errorf("%s %s: %s; want failed", id, ch.Status, ch.Detail)
		case fails && !strings.Contains(ch.Detail, w):
			t.Errorf("%s detail %q; want it to say %q", id, ch.Detail, w)
		}
	}
}

// The chained proof on each API shape, against the scripted model through
// the relay (no engine): a true chain passes, with the scripted model's
// token and without it (--model URL); a retried request passes; a result
// the model never asked for (made up with its call, or naming an id no
// answer made), a history that rewrites the model's call, and a forged
// result beside a true chain each fail on verify.challenge_asked, naming
// the link.
func TestLoopProofIsAChain(t *testing.T) {
	for _, shape := range apiShapes {
		t.Run(shape.name, func(t *testing.T) {
			for _, derived := range []string{"token", ""} {
				mode := map[string]string{"token": "scripted token", "": "model url"}[derived]
				token := func(c *conv) string {
					if derived == "" {
						return ""
					}
					return c.token
				}
				t.Run("true chain, "+mode, func(t *testing.T) {
					c := newConv(t, shape)
					read := c.send()
					if len(read) != 1 || read[0].ID == "" || !strings.Contains(read[0].Arguments, ChallengeFile) {
						t.Fatalf("the model's first answer %+v; want a read of the challenge with an id", read)
					}
					r1 := answer(read[0], c.challenge)
					write := c.send(r1)
					if len(write) != 1 || !strings.Contains(write[0].Arguments, c.token) {
						t.Fatalf("the model's second answer %+v; want the write of %s", write, c.token)
					}
					c.send(r1, answer(write[0], "written"))
					p, checks := c.judge(token(c))
					wantChecks(t, checks, nil)
					st := p.steps
					if st.AskCall != 1 || st.AskID != read[0].ID || st.ResultCall != 2 || st.WriteCall != 2 || st.Broken != "" || st.Missing != "" {
						t.Errorf("steps %+v; want ask 1 (%s), result 2, write 2", st, read[0].ID)
					}
					if d := checks["verify.challenge_asked"].Detail; !strings.Contains(d, fmt.Sprintf("call 1 asked for tool call %q", read[0].ID)) {
						t.Errorf("challenge_asked detail %q; want it to name call 1's tool call", d)
					}
					if s := st.Steps[1]; fmt.Sprint(s.ToolResultIDs) != "["+read[0].ID+"]" || fmt.Sprint(st.Steps[0].ToolCallIDs) != "["+read[0].ID+"]" {
						t.Errorf("steps %+v; want the chain's id on the ask and the result", st.Steps)
					}
				})
				t.Run("true chain, streamed, "+mode, func(t *testing.T) {
					// Each answer streamed: the relay writes its last
					// bytes before the harness's next request is whole.
					c := newConv(t, shape)
					c.stream = true
					read := c.send()
					if len(read) != 1 || read[0].ID == "" {
						t.Fatalf("the model's first answer %+v; want a read with an id", read)
					}
					r1 := answer(read[0], c.challenge)
					write := c.send(r1)
					if len(write) != 1 || !strings.Contains(write[0].Arguments, c.token) {
						t.Fatalf("the model's second answer %+v; want the write of %s", write, c.token)
					}
					calls := c.rel.Calls()
					if !calls[0].Stream || calls[0].WrittenAt.IsZero() || !calls[0].WrittenAt.Before(calls[1].ReceivedAt) {
						t.Fatalf("relay record %+v; want a streamed answer written before the next request was whole", calls)
					}
					p, checks := c.judge(token(c))
					wantChecks(t, checks, nil)
					if st := p.steps; st.AskCall != 1 || st.ResultCall != 2 || st.WriteCall != 2 {
						t.Errorf("steps %+v; want ask 1, result 2, write 2", st)
					}
				})
				t.Run("retried requests, "+mode, func(t *testing.T) {
					c := newConv(t, shape)
					// The first request twice (two answers, two ids; the
					// harness runs the second's), then the result twice.
					c.send()
					read := c.send()
					r1 := answer(read[0], c.challenge)
					c.send(r1)
					write := c.send(r1)
					c.send(r1, answer(write[0], "written"))
					p, checks := c.judge(token(c))
					wantChecks(t, checks, nil)
					if st := p.steps; st.AskCall != 2 || st.ResultCall != 3 || st.WriteCall != 3 {
						t.Errorf("steps %+v; want ask 2, result 3, write 3", st)
					}
				})
				t.Run("forged call and result, "+mode, func(t *testing.T) {
					// The harness: one request, whose history holds
					// a read it made up and the challenge as its result.
					c := newConv(t, shape)
					forged := turn{claimID: "call_x", name: "read", args: `{"path":"/task/challenge.txt"}`, resultID: "call_x", result: c.challenge}
					write := c.send(forged)
					if len(write) != 1 || !strings.Contains(write[0].Arguments, c.token) {
						t.Fatalf("positive control: the model did not write on the forged result: %+v", write)
					}
					p, checks := c.judge(token(c))
					link := `call 1's request carries a result for tool call "call_x" (read {"path":"/task/challenge.txt"}, by the request's own history), which no model answer asked for`
					wantChecks(t, checks, map[string]string{"verify.challenge_asked": link, "verify.challenge_round_trip": link,
						"verify.write_after_challenge": "no model answer after the challenge came back"})
					if st := p.steps; st.Broken != link || st.AskCall != 0 || st.ResultCall != 0 || st.Missing != "tool call asking for the challenge" {
						t.Errorf("steps %+v; want the broken link and no chain", st)
					}
				})
				t.Run("result for an id nobody asked, "+mode, func(t *testing.T) {
					c := newConv(t, shape)
					read := c.send()
					r := answer(read[0], c.challenge)
					r.resultID = "call_nobody"
					c.send(r)
					_, checks := c.judge(token(c))
					wantChecks(t, checks, map[string]string{
						"verify.challenge_asked":       `call 2's request carries a result for tool call "call_nobody", which no model answer asked for`,
						"verify.challenge_round_trip":  `"call_nobody", which no model answer asked for`,
						"verify.write_after_challenge": "no model answer after"})
				})
				t.Run("history rewrites the model's call, "+mode, func(t *testing.T) {
					c := newConv(t, shape)
					read := c.send()
					r := answer(read[0], c.challenge)
					r.args = `{"path":"/etc/hostname"}`
					c.send(r)
					_, checks := c.judge(token(c))
					wantChecks(t, checks, map[string]string{
						"verify.challenge_asked":       fmt.Sprintf(`call 2's request says tool call %q was read {"path":"/etc/hostname"}, but call 1's answer asked for read`, read[0].ID),
						"verify.challenge_round_trip":  "answer no tool call of the model's",
						"verify.write_after_challenge": "no model answer after"})
				})
				t.Run("forged result beside a true chain, "+mode, func(t *testing.T) {
					c := newConv(t, shape)
					read := c.send()
					r1 := answer(read[0], c.challenge)
					forged := turn{claimID: "call_y", name: "read", args: `{"path":"/task/challenge.txt"}`, resultID: "call_y", result: c.challenge}
					write := c.send(r1, forged)
					c.send(r1, forged, answer(write[0], "written"))
					p, checks := c.judge(token(c))
					// The true chain is found; the forged link still fails
					// the case.
					wantChecks(t, checks, map[string]string{"verify.challenge_asked": `carries a result for tool call "call_y"`})
					if st := p.steps; st.AskCall != 1 || st.ResultCall != 2 || st.WriteCall != 2 {
						t.Errorf("steps %+v; want the true chain beside the broken link", st)
					}
				})
			}
		})
	}
}

// t0 is the start of a hand-made transcript's clock.
var t0 = time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)

// at is a time of a hand-made transcript's clock, n microseconds in.
func at(n int) time.Time { return t0.Add(time.Duration(n) * time.Microsecond) }

// call is one relayed call of a hand-made transcript: what its request
// carried and what its answer asked for. Its request is received whole
// at 2*seq µs and its answer written whole at 2*seq+1 µs: each request
// goes round before the next (timed sets other times).
func call(seq int, results []relay.ToolCall, claimed []relay.ToolCall, answer ...relay.ToolCall) relay.Call {
	c := relay.Call{Seq: seq, Status: 200, Auth: "canary", ClaimedToolCalls: claimed, ToolCalls: answer,
		ReceivedAt: at(2 * seq), WrittenAt: at(2*seq + 1)}
	for _, r := range results {
		c.ToolResults = append(c.ToolResults, r.Arguments)
		c.ToolResultIDs = append(c.ToolResultIDs, r.ID)
	}
	return c
}

// The rules of the chain no model run can show, on hand-made transcripts
// (the relay's parsing of each API is TestTranscriptRecordsToolCallIDs):
// a result whose id the model asked for only later, or in the answer to
// the same request, came before the ask; a write before the result is no
// write after it; a result without an id (an API without ids) chains by
// the same tool and arguments, and not by another's.
func TestLoopProofOrderAndIDlessCalls(t *testing.T) {
	const ch, tok = model.ChallengePrefix + "00112233445566778899aabbccddeeff", "proof-0123"
	read := relay.ToolCall{ID: "call_a", Name: "read", Arguments: `{"path":"/task/challenge.txt"}`}
	write := relay.ToolCall{ID: "call_w", Name: "write", Arguments: `{"path":"/task/deliverable.txt","content":"` + tok + `"}`}
	result := func(id string) []relay.ToolCall { return []relay.ToolCall{{ID: id, Arguments: "1\t" + ch}} }
	noID := func(tc relay.ToolCall) relay.ToolCall { tc.ID = ""; return tc }
	for _, tc := range []struct {
		name  string
		calls []relay.Call
		want  map[string]string
		ask   int
	}{
		{name: "true chain", ask: 1, calls: []relay.Call{
			call(1, nil, nil, read),
			call(2, result("call_a"), []relay.ToolCall{read}, write)}},
		{name: "result before the ask", calls: []relay.Call{
			call(1, result("call_a"), []relay.ToolCall{read}),
			call(2, nil, nil, read),
			call(3, nil, nil, write)},
			want: map[string]string{"verify.challenge_asked": `call 1's request carries a result for tool call "call_a", which the model asked for only in call 2`,
				"verify.challenge_round_trip": "which the model asked for only in call 2", "verify.write_after_challenge": "no model answer after"}},
		{name: "result answered by its own request's answer", calls: []relay.Call{
			call(1, result("call_a"), []relay.ToolCall{read}, read, write)},
			want: map[string]string{"verify.challenge_asked": `call 1's request carries a result for tool call "call_a", which the model asked for only in call 1`,
				"verify.challenge_round_trip": "asked for only in call 1", "verify.write_after_challenge": "no model answer after"}},
		{name: "write before the result", ask: 1, calls: []relay.Call{
			call(1, nil, nil, read, write),
			call(2, result("call_a"), []relay.ToolCall{read})},
			want: map[string]string{"verify.write_after_challenge": "no model answer after the challenge came back wrote the deliverable"}},
		// With the scripted model's token only the call carrying it is the
		// write, not an earlier one in the same answer; without one, any
		// write after the challenge is.
		{name: "a scratch write before the token's", ask: 1, calls: []relay.Call{
			call(1, nil, nil, read),
			call(2, result("call_a"), []relay.ToolCall{read},
				relay.ToolCall{ID: "call_s", Name: "write", Arguments: `{"path":"/task/notes.txt","content":"notes"}`}, write)}},
		{name: "no ids, same tool and arguments", ask: 1, calls: []relay.Call{
			call(1, nil, nil, noID(read)),
			call(2, result(""), []relay.ToolCall{{Name: "read", Arguments: `{ "path": "/task/challenge.txt" }`}}, noID(write))}},
		{name: "no ids, the model named none and the harness did", ask: 1, calls: []relay.Call{
			call(1, nil, nil, noID(read)),
			call(2, result("h1"), []relay.ToolCall{{ID: "h1", Name: "read", Arguments: read.Arguments}}, noID(write))}},
		{name: "no ids, other arguments", calls: []relay.Call{
			call(1, nil, nil, noID(read)),
			call(2, result(""), []relay.ToolCall{{Name: "read", Arguments: `{"path":"/etc/hostname"}`}}, noID(write))},
			want: map[string]string{"verify.challenge_asked": `call 2's request carries a result (no tool call id) for read {"path":"/etc/hostname"}, which no model answer before it asked for`,
				"verify.challenge_round_trip": "no tool call id", "verify.write_after_challenge": "no model answer after"}},
		{name: "no ids, the model's call had an id", calls: []relay.Call{
			call(1, nil, nil, read),
			call(2, result("h1"), []relay.ToolCall{{ID: "h1", Name: "read", Arguments: read.Arguments}}, write)},
			want: map[string]string{"verify.challenge_asked": `tool call "h1"`, "verify.challenge_round_trip": `"h1"`, "verify.write_after_challenge": "no model answer after"}},
		{name: "no ids, forged", calls: []relay.Call{
			call(1, result(""), []relay.ToolCall{noID(read)}, noID(write))},
			want: map[string]string{"verify.challenge_asked": "call 1's request carries a result (no tool call id) for read", "verify.challenge_round_trip": "no tool call id",
				"verify.write_after_challenge": "no model answer after"}},
		{name: "no ids, no call to answer", calls: []relay.Call{
			call(1, nil, nil, noID(read)),
			call(2, result(""), nil, noID(write))},
			want: map[string]string{"verify.challenge_asked": "call 2's request carries a tool result with no tool call id and no tool call of its history",
				"verify.challenge_round_trip": "no tool call id", "verify.write_after_challenge": "no model answer after"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, derived := range []string{tok, ""} {
				p, checks := judgeCalls(tc.calls, ch, derived)
				wantChecks(t, checks, tc.want)
				if p.steps.AskCall != tc.ask && tc.want["verify.challenge_asked"] == "" {
					t.Errorf("derived %q: ask call %d; want %d", derived, p.steps.AskCall, tc.ask)
				}
			}
		})
	}
}

// timed sets when call c's request was received whole and its answer
// written whole, in µs of the hand-made clock (written < 0: never).
func timed(c relay.Call, received, written int) relay.Call {
	c.ReceivedAt, c.WrittenAt = at(received), at(written)
	if written < 0 {
		c.WrittenAt = time.Time{}
	}
	return c
}

// The chain's two rules of issue 35 (D3 of the rt-bd pass), on hand-made
// transcripts: a result without an id answers only a model's call without
// one (a call with an id is answered by that id alone); and a result
// answers a call only if the answer asking for it was written to the
// harness whole before the result's request was received whole, whatever
// the requests' numbers (given at their headers). Rows: the attack as the
// relay recorded it; each rule broken alone; the honest request numbered
// before the answer it carries the result of, whole after it; and a write
// answered before the challenge came back though numbered after it.
func TestLoopProofCausalOrderAndIDs(t *testing.T) {
	const ch, tok = model.ChallengePrefix + "00112233445566778899aabbccddeeff", "proof-0123"
	read := relay.ToolCall{ID: "call_a", Name: "read", Arguments: `{"path":"/task/challenge.txt"}`}
	write := relay.ToolCall{ID: "call_w", Name: "write", Arguments: `{"path":"/task/deliverable.txt","content":"` + tok + `"}`}
	result := func(id string) []relay.ToolCall { return []relay.ToolCall{{ID: id, Arguments: "1\t" + ch}} }
	noID := func(tc relay.ToolCall) relay.ToolCall { tc.ID = ""; return tc }
	notAfter := map[string]string{"verify.write_after_challenge": "no model answer after"}
	for _, tc := range []struct {
		name  string
		calls []relay.Call
		want  map[string]string
		// ask, result, write: the chain's calls when it holds.
		ask, result, write int
	}{
		{name: "the attack: an id-less result, the read asked for after it was whole", calls: []relay.Call{
			timed(call(1, nil, nil, read), 5, 6),
			timed(call(2, result(""), []relay.ToolCall{noID(read)}, write), 2, 3)},
			want: map[string]string{"verify.challenge_asked": `call 2's request carries a result (no tool call id) for read {"path":"/task/challenge.txt"}, ` +
				`which the model asked for only as tool call "call_a" in call 1 (a call with an id is answered by that id alone), ` +
				`whose answer was written to the harness at 00:00:00.000006, after call 2's request was complete at 00:00:00.000002`,
				"verify.challenge_round_trip": "answer no tool call of the model's", "verify.write_after_challenge": "no model answer after"}},
		{name: "an id-less result for a call with an id, in order", calls: []relay.Call{
			call(1, nil, nil, read),
			call(2, result(""), []relay.ToolCall{noID(read)}, write)},
			want: map[string]string{"verify.challenge_asked": `which the model asked for only as tool call "call_a" in call 1 (a call with an id is answered by that id alone)`,
				"verify.challenge_round_trip": "answer no tool call of the model's", "verify.write_after_challenge": "no model answer after"}},
		{name: "the result's id asked for in an answer written after the result's request was whole", calls: []relay.Call{
			timed(call(1, nil, nil, read), 2, 6),
			timed(call(2, result("call_a"), []relay.ToolCall{read}, write), 4, 5)},
			want: map[string]string{"verify.challenge_asked": `call 2's request carries a result for tool call "call_a", which the model asked for only in call 1, ` +
				`whose answer was written to the harness at 00:00:00.000006, after call 2's request was complete at 00:00:00.000004`,
				"verify.challenge_round_trip": "asked for only in call 1", "verify.write_after_challenge": "no model answer after"}},
		{name: "no ids, the read asked for after the result's request was whole", calls: []relay.Call{
			timed(call(1, nil, nil, noID(read)), 2, 6),
			timed(call(2, result(""), []relay.ToolCall{noID(read)}, noID(write)), 4, 5)},
			want: map[string]string{"verify.challenge_asked": `call 2's request carries a result (no tool call id) for read {"path":"/task/challenge.txt"}, which the model asked for only in call 1, whose answer was written`,
				"verify.challenge_round_trip": "asked for only in call 1", "verify.write_after_challenge": "no model answer after"}},
		{name: "the answer asking never reached the harness whole", calls: []relay.Call{
			timed(call(1, nil, nil, read), 2, -1),
			call(2, result("call_a"), []relay.ToolCall{read}, write)},
			want: map[string]string{"verify.challenge_asked": `which the model asked for only in call 1, whose answer never reached the harness whole`,
				"verify.challenge_round_trip": "never reached the harness whole", "verify.write_after_challenge": "no model answer after"}},
		{name: "honest: the result's request numbered first, whole after the answer", ask: 2, result: 1, write: 1, calls: []relay.Call{
			timed(call(1, result("call_a"), []relay.ToolCall{read}, write), 8, 9),
			timed(call(2, nil, nil, read), 4, 5)}},
		// A link found once is remembered for the requests after, by the
		// result's id and the call its history names: never for another
		// id, nor for the same id with another call.
		{name: "a later request rewrites the call it answered before", ask: 1, result: 2, write: 2, calls: []relay.Call{
			call(1, nil, nil, read),
			call(2, result("call_a"), []relay.ToolCall{read}, write),
			call(3, result("call_a"), []relay.ToolCall{{ID: "call_a", Name: "read", Arguments: `{"path":"/etc/hostname"}`}})},
			want: map[string]string{"verify.challenge_asked": `call 3's request says tool call "call_a" was read {"path":"/etc/hostname"}, but call 1's answer asked for read`}},
		{name: "a later request's result under another id, the same call", ask: 1, result: 2, write: 2, calls: []relay.Call{
			call(1, nil, nil, read),
			call(2, result("call_a"), []relay.ToolCall{read}, write),
			call(3, result("call_x"), []relay.ToolCall{{ID: "call_x", Name: "read", Arguments: read.Arguments}})},
			want: map[string]string{"verify.challenge_asked": `call 3's request carries a result for tool call "call_x" (read {"path":"/task/challenge.txt"}, by the request's own history), which no model answer asked for`}},
		{name: "a write answered before the challenge came back, numbered after it", calls: []relay.Call{
			call(1, nil, nil, read),
			timed(call(2, result("call_a"), []relay.ToolCall{read}), 10, 11),
			timed(call(3, nil, nil, write), 6, 7)},
			want: notAfter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, derived := range []string{tok, ""} {
				p, checks := judgeCalls(tc.calls, ch, derived)
				wantChecks(t, checks, tc.want)
				if st := p.steps; tc.ask != 0 && (st.AskCall != tc.ask || st.ResultCall != tc.result || st.WriteCall != tc.write) {
					t.Errorf("derived %q: steps %+v; want ask %d, result %d, write %d", derived, st, tc.ask, tc.result, tc.write)
				}
			}
		})
	}
}

// The rt-bd pass's D3 through the relay and the scripted model, no
// engine, every step waiting on the relay's bytes: request A (the
// prompt) is sent with "Expect: 100-continue" and, once the relay asks
// for its body (it has numbered A: call 1), all of its body but the last
// byte; request B, an id-less read (Chat Completions' function_call) with
// the challenge as its result, is sent whole and answered with the write;
// then A's last byte, and the model answers A with the read. The relay
// records A's answer written after B was whole, and the chain fails
// naming call 1. On main the chain passed.
func TestLoopProofOutOfOrderThroughTheRelay(t *testing.T) {
	c := newConv(t, apiShapes[0])
	tools := []any{
		map[string]any{"type": "function", "function": map[string]any{"name": "read", "parameters": readSchema}},
		map[string]any{"type": "function", "function": map[string]any{"name": "write", "parameters": writeSchema}}}
	bodyA, _ := json.Marshal(map[string]any{"model": "fake-model", "messages": []any{map[string]any{"role": "user", "content": c.prompt}}, "tools": tools})
	bodyB, _ := json.Marshal(map[string]any{"model": "fake-model", "tools": tools, "messages": []any{
		map[string]any{"role": "user", "content": c.prompt},
		map[string]any{"role": "assistant", "content": nil, "function_call": map[string]any{"name": "read", "arguments": `{"path":"/task/challenge.txt"}`}},
		map[string]any{"role": "function", "name": "read", "content": c.challenge}}})
	addr := strings.TrimPrefix(strings.TrimSuffix(c.rel.URL(), "/v1"), "http://")
	a, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	fmt.Fprintf(a, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nConnection: close\r\nContent-Length: %d\r\n\r\n", len(bodyA))
	ar := bufio.NewReader(a)
	if line, err := ar.ReadString('\n'); err != nil || !strings.Contains(line, " 100 ") {
		t.Fatalf("A: the relay did not ask for the body: %q %v", line, err)
	}
	if _, err := ar.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	a.Write(bodyA[:len(bodyA)-1])
	resp, err := http.Post(c.rel.URL()+"/chat/completions", "application/json", bytes.NewReader(bodyB))
	if err != nil {
		t.Fatal(err)
	}
	answerB, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	a.Write(bodyA[len(bodyA)-1:])
	answerA, _ := io.ReadAll(ar)
	// Positive controls: the model wrote on B's result, and asked for the
	// read in A's answer, which came last.
	if !strings.Contains(string(answerB), c.token) || !strings.Contains(string(answerA), ChallengeFile) {
		t.Fatalf("the attack did not run as built: B's answer %s, A's %s", answerB, answerA)
	}
	calls := c.rel.Calls()
	if len(calls) != 2 || len(calls[0].ToolCalls) != 1 || calls[0].ToolCalls[0].Name != "read" || !calls[0].WrittenAt.After(calls[1].ReceivedAt) {
		t.Fatalf("relay record %+v; want call 1 the read, written after call 2 was whole", calls)
	}
	_, checks := c.judge(c.token)
	wantChecks(t, checks, map[string]string{
		"verify.challenge_asked": fmt.Sprintf(`call 2's request carries a result (no tool call id) for read {"path":"/task/challenge.txt"}, which the model asked for only as tool call %q in call 1 (a call with an id is answered by that id alone), whose answer was written to the harness at`,
			calls[0].ToolCalls[0].ID),
		"verify.challenge_round_trip": "answer no tool call of the model's", "verify.write_after_challenge": "no model answer after"})
}
