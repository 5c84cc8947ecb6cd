package relay_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/relay"
)

// A request is decoded in one envelope for every format, all or nothing:
// a body whose messages do not decode is read for none of its fields, its
// Responses input and its model included (the formats' readers have a
// file each; what they read still comes from one decode). The positive
// control: the same body with its messages fixed is read whole.
func TestRelayRequestEnvelopeIsAllOrNothing(t *testing.T) {
	up := newUpstream(t)
	r := startRelay(t, relay.Options{Upstream: up.URL + "/v1"})
	input := `"input":[{"type":"function_call_output","call_id":"c1","output":"seen"}]`
	for _, body := range []string{`{"model":"m","messages":"not a list",` + input + `}`, `{"model":"m","messages":[],` + input + `}`} {
		resp, err := http.Post(r.URL()+"/responses", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// A call is recorded as its handler ends, after its answer went out.
	waitFor(t, "both calls recorded", func() bool { return len(r.Calls()) == 2 })
	calls := r.Calls()
	if c := calls[0]; c.Model != "" || len(c.ToolResults) != 0 {
		t.Errorf("a body that fails to decode was read in part: model %q, tool results %q", c.Model, c.ToolResults)
	}
	if c := calls[1]; c.Model != "m" || len(c.ToolResults) != 1 || c.ToolResultIDs[0] != "c1" {
		t.Errorf("positive control: model %q, tool results %q %q", c.Model, c.ToolResults, c.ToolResultIDs)
	}
}
