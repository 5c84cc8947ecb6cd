package certify

import (
	"testing"

	"github.com/sandproof/sandproof/runner/host/relay"
	"github.com/sandproof/sandproof/runner/model"
)

// Two links of the chained proof no other test broke alone (the host-path
// mutants, docs/mutation.md), on hand-made transcripts as in
// TestLoopProofOrderAndIDlessCalls: a history that names another tool for
// the model's call (same id, same arguments), and, with the scripted
// model's token, a write whose content is not the token though its
// arguments hold it. Each table's first row is the positive control.
func TestLoopProofClaimedToolAndDerivedToken(t *testing.T) {
	const ch, tok = model.ChallengePrefix + "00112233445566778899aabbccddeeff", "proof-0123"
	read := relay.ToolCall{ID: "call_a", Name: "read", Arguments: `{"path":"/task/challenge.txt"}`}
	write := func(content string) relay.ToolCall {
		return relay.ToolCall{ID: "call_w", Name: "write", Arguments: `{"path":"/task/deliverable.txt","content":"` + content + `"}`}
	}
	result := []relay.ToolCall{{ID: "call_a", Arguments: "1\t" + ch}}
	for _, tc := range []struct {
		name  string
		calls []relay.Call
		want  map[string]string
	}{
		{name: "the model's call, the token written", calls: []relay.Call{
			call(1, nil, nil, read),
			call(2, result, []relay.ToolCall{read}, write(tok))}},
		{name: "the history names another tool", calls: []relay.Call{
			call(1, nil, nil, read),
			call(2, result, []relay.ToolCall{{ID: "call_a", Name: "bash", Arguments: read.Arguments}}, write(tok))},
			want: map[string]string{"verify.challenge_asked": `call 2's request says tool call "call_a" was bash`,
				"verify.challenge_round_trip": "answer no tool call of the model's", "verify.write_after_challenge": "no model answer after"}},
		{name: "the token inside other content", calls: []relay.Call{
			call(1, nil, nil, read),
			call(2, result, []relay.ToolCall{read}, write("not "+tok+" at all"))},
			want: map[string]string{"verify.write_after_challenge": `not the token derived from the challenge`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, checks := judgeCalls(tc.calls, ch, tok)
			wantChecks(t, checks, tc.want)
		})
	}
}
