package capture_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/capture"
)

// The response status and the result rules, one rule at a time (the
// host-path mutants, docs/mutation.md).

func code(c int) *int { return &c }

func TestResponseStatusRules(t *testing.T) {
	withSuccess := adapter.Result{Success: []adapter.Rule{{Where: []adapter.Cond{{Path: "type", Value: "done"}}}}}
	noSuccess := adapter.Result{}
	for _, tc := range []struct {
		name string
		r    adapter.Result
		o    capture.Outcome
		rc   *int
		want string
	}{
		{"success matched, exit 0", withSuccess, capture.Outcome{Success: true}, code(0), capture.ResponseCompleted},
		{"success matched, exit 1", withSuccess, capture.Outcome{Success: true}, code(1), capture.ResponseFailed},
		{"success matched, a failure matched", withSuccess, capture.Outcome{Success: true, Failure: true}, code(0), capture.ResponseFailed},
		{"success rules, none matched, exit 0", withSuccess, capture.Outcome{}, code(0), capture.ResponseIncomplete},
		{"no success rules, exit 0", noSuccess, capture.Outcome{}, code(0), capture.ResponseCompleted},
		{"no success rules, exit 2", noSuccess, capture.Outcome{}, code(2), capture.ResponseFailed},
		{"no success rules, exit unknown", noSuccess, capture.Outcome{}, nil, capture.ResponseIncomplete},
	} {
		if got := capture.ResponseStatus(tc.r, tc.o, tc.rc); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// A failure rule keeps the first failure's message; a condition matches
// only its value ("*" any); usage rules that matched nothing are a gap.
func TestJudgeRules(t *testing.T) {
	r := adapter.Result{
		Success: []adapter.Rule{{Where: []adapter.Cond{{Path: "type", Value: "done"}}}},
		Failure: []adapter.Rule{{Where: []adapter.Cond{{Path: "type", Value: "error"}}, Message: "msg"}},
		Usage:   []adapter.UsageRule{{Where: []adapter.Cond{{Path: "type", Value: "usage"}}, Input: "in", Output: "out", Cached: "cached"}},
	}
	j := capture.NewJudge(r)
	j.Add(`{"type":"started"}`)
	j.Add(`{"type":"error","msg":"first"}`)
	j.Add(`{"type":"error","msg":"second"}`)
	o := j.Outcome()
	if !o.Failure || o.FailureMessage != "first" {
		t.Fatalf("failure %t message %q, want the first failure's message", o.Failure, o.FailureMessage)
	}
	if o.Success {
		t.Fatalf("success matched a record whose type is not done")
	}
	if !slices.Contains(o.Gaps, capture.GapUsage) {
		t.Fatalf("gaps %v: usage rules that matched no record are a usage gap", o.Gaps)
	}

	// Positive control: the matching records are seen.
	j = capture.NewJudge(r)
	j.Add(`{"type":"usage","in":3,"out":4,"cached":1}`)
	j.Add(`{"type":"done"}`)
	o = j.Outcome()
	if !o.Success || o.Failure || !reflect.DeepEqual(o.Observations, []capture.Usage{{Input: 3, Output: 4, Cached: 1}}) {
		t.Fatalf("success %t failure %t observations %+v, want success and one usage record", o.Success, o.Failure, o.Observations)
	}
	if slices.Contains(o.Gaps, capture.GapUsage) {
		t.Fatalf("gaps %v: usage was observed", o.Gaps)
	}
}

// An adapter that declares no usage rules observes no usage: a gap.
func TestNoUsageRulesIsAGap(t *testing.T) {
	j := capture.NewJudge(adapter.Result{Success: []adapter.Rule{{Where: []adapter.Cond{{Path: "type", Value: "done"}}}}})
	j.Add(`{"type":"done","usage":{"in":3}}`)
	o := j.Outcome()
	if !o.Success {
		t.Fatalf("positive control: the success rule did not match")
	}
	if !slices.Contains(o.Gaps, capture.GapUsage) {
		t.Fatalf("gaps %v, want %s: no rule reads usage", o.Gaps, capture.GapUsage)
	}
}
