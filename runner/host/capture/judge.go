package capture

import (
	"slices"

	"github.com/tidwall/gjson"

	"github.com/sandproof/sandproof/runner/host/adapter"
)

// Observation gaps the reader reports.
const (
	GapCachedTokens = "cached_token_usage_unavailable"
	GapUsage        = "usage_details_unavailable"
	GapResult       = "result_unavailable"
)

// Response statuses.
const (
	ResponseCompleted  = "completed"
	ResponseFailed     = "failed"
	ResponseIncomplete = "incomplete"
)

// Usage is one observation record: the token counts of one model response.
type Usage struct {
	Input, Output, Cached, Reasoning int64
}

// Outcome is what the result rules read from the records.
type Outcome struct {
	// Records is how many records were read.
	Records int
	// Success and Failure say whether a rule of each kind matched.
	Success, Failure bool
	// FailureMessage is the first failure's message, when the rule names one.
	FailureMessage string
	// Observations are the usage records, one per matching record.
	Observations []Usage
	ItemTypes    map[string]int
	// Gaps lists what could not be observed, sorted, without duplicates.
	Gaps []string
}

// Judge applies result rules to records fed to it one at a time.
type Judge struct {
	r   adapter.Result
	out Outcome
	gap map[string]bool
}

// NewJudge starts a judge for the rules of r.
func NewJudge(r adapter.Result) *Judge {
	j := &Judge{r: r, gap: map[string]bool{}}
	j.out.ItemTypes = map[string]int{}
	for _, g := range r.Gaps {
		j.gap[g] = true
	}
	return j
}

func matches(rec string, where []adapter.Cond) bool {
	for _, c := range where {
		v := gjson.Get(rec, c.Path)
		if !v.Exists() || (c.Value != "*" && v.String() != c.Value) {
			return false
		}
	}
	return true
}

// Add reads one record (a JSON document). It always returns true, so it
// can be passed to ReadEvents and ReadSQLite as is.
func (j *Judge) Add(rec string) bool {
	j.out.Records++
	for _, ru := range j.r.Failure {
		if matches(rec, ru.Where) {
			if !j.out.Failure && ru.Message != "" {
				j.out.FailureMessage = gjson.Get(rec, ru.Message).String()
			}
			j.out.Failure = true
		}
	}
	for _, ru := range j.r.Success {
		if matches(rec, ru.Where) {
			j.out.Success = true
		}
	}
	for _, u := range j.r.Usage {
		if !matches(rec, u.Where) {
			continue
		}
		var o Usage
		get := func(p string, gap string, dst *int64) {
			if p == "" {
				j.gap[gap] = true
				return
			}
			v := gjson.Get(rec, p)
			if !v.Exists() {
				j.gap[gap] = true
				return
			}
			*dst = v.Int()
		}
		get(u.Input, GapUsage, &o.Input)
		get(u.Output, GapUsage, &o.Output)
		get(u.Cached, GapCachedTokens, &o.Cached)
		if u.Reasoning != "" {
			get(u.Reasoning, GapUsage, &o.Reasoning)
		}
		j.out.Observations = append(j.out.Observations, o)
		break
	}
	for _, it := range j.r.Items {
		if !matches(rec, it.Where) {
			continue
		}
		if it.Type != "" {
			j.out.ItemTypes[it.Type]++
			continue
		}
		gjson.Get(rec, it.Each).ForEach(func(_, el gjson.Result) bool {
			if t, ok := it.Map[el.Get(it.Kind).String()]; ok {
				j.out.ItemTypes[t]++
			}
			return true
		})
	}
	return true
}

// Outcome finishes the judgement. exitCode is the harness's return code
// from its receipt (nil when unknown).
func (j *Judge) Outcome() Outcome {
	out := j.out
	if len(j.r.Usage) > 0 && len(out.Observations) == 0 {
		j.gap[GapUsage] = true
	}
	if len(j.r.Usage) == 0 {
		j.gap[GapUsage] = true
	}
	out.Gaps = make([]string, 0, len(j.gap))
	for g := range j.gap {
		out.Gaps = append(out.Gaps, g)
	}
	slices.Sort(out.Gaps)
	return out
}

// ResponseStatus turns an outcome and the harness's exit status into the
// evidence's response_status: failed when a failure rule matched or the
// harness exited non-zero; completed when a success rule matched (or, with
// no success rules, the harness exited 0); incomplete otherwise.
func ResponseStatus(r adapter.Result, o Outcome, returnCode *int) string {
	switch {
	case o.Failure, returnCode != nil && *returnCode != 0:
		return ResponseFailed
	case len(r.Success) > 0 && o.Success:
		return ResponseCompleted
	case len(r.Success) == 0 && returnCode != nil:
		return ResponseCompleted
	}
	return ResponseIncomplete
}
