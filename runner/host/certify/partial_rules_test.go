package certify

import (
	"testing"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/model"
)

// scenario.partial_transcript reads a harness's captures as a transcript
// when they gave events, rows or both: a harness whose adapter reads
// events alone (no result records) kept its transcript. The positive
// control: neither is a failure (TestPartialTranscriptRules).
func TestPartialTranscriptEventsAlone(t *testing.T) {
	calls := []model.Call{{Seq: 1, Reply: "read_challenge"}, {Seq: 2, Reply: "start_writer"}, {Seq: 3, Reply: "stall"}}
	for _, tc := range []struct {
		name            string
		records, events int
		want            reports.Status
	}{
		{"events alone", 0, 12, reports.StatusPassed},
		{"rows alone", 3, 0, reports.StatusPassed},
		{"neither", 0, 0, reports.StatusFailed},
	} {
		s := transcriptSeen{calls: calls, relayCalls: 3, records: tc.records, eventLines: tc.events, roundTripped: true}
		if c := partialTranscriptCheck(s); c.Status != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, c.Status, c.Detail, tc.want)
		}
	}
}
