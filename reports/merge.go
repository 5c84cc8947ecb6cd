package reports

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrMerge wraps every reason `report merge` refuses its inputs.
var ErrMerge = errors.New("cannot merge")

// MergeInput is one shard's run: its name (the run directory, for
// messages) and its records.
type MergeInput struct {
	Name    string
	Records []*Evidence
}

// Merge joins the runs of the shards of one matrix (certify --shard i/N)
// into one run with id runID. Each input's last attempt of each case
// counts, once. It refuses (ErrMerge) inputs that are not shards, shards of
// different matrices, a shard given twice or missing, a case in two
// inputs, a case count that is not the matrix's, and provenance that
// differs between shards where it must agree: the suite version, warden's
// digest and each adapter's digest (the host and the times may differ).
// The records come back sorted by case id, with run_id set to runID and
// the shard's own run id kept in shard_run_id.
func Merge(inputs []MergeInput, runID string) ([]*Evidence, error) {
	if len(inputs) == 0 {
		return nil, mergeErr("no run given")
	}
	m := merger{runID: runID, shardFrom: map[int]string{}, caseFrom: map[string]string{}, agree: map[string][2]string{}}
	for _, in := range inputs {
		last, err := lastAttempts(in)
		if err != nil {
			return nil, err
		}
		shard, err := shardOf(in, last)
		if err != nil {
			return nil, err
		}
		if err := m.addShard(in, shard); err != nil {
			return nil, err
		}
		if err := m.addCases(in, last); err != nil {
			return nil, err
		}
	}
	if err := m.complete(); err != nil {
		return nil, err
	}
	slices.SortFunc(m.out, func(a, b *Evidence) int { return strings.Compare(a.CaseID, b.CaseID) })
	return m.out, nil
}

// mergeErr is a reason Merge refuses, wrapping ErrMerge.
func mergeErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMerge, fmt.Sprintf(format, args...))
}

// merger is what Merge has learnt from the shards read so far.
type merger struct {
	runID              string
	matrix, matrixFrom string
	total, cases       int
	shardFrom          map[int]string       // shard index -> input
	caseFrom           map[string]string    // case id -> input
	agree              map[string][2]string // what -> value, where
	out                []*Evidence
}

// lastAttempts is each case's last attempt in one input; an attempt
// recorded twice, and attempts of one case id in two scenarios, are
// refused.
func lastAttempts(in MergeInput) (map[string]*Evidence, error) {
	last := map[string]*Evidence{}
	for _, e := range in.Records {
		if prev, ok := last[e.CaseID]; ok && prev.AttemptNumber() == e.AttemptNumber() {
			return nil, mergeErr("%s: case %s attempt %d is recorded twice", in.Name, e.CaseID, e.AttemptNumber())
		}
		// A case's attempts are one scenario's: an attempt of another
		// scenario under the same id would replace a case it is not.
		if prev, ok := last[e.CaseID]; ok && prev.ScenarioName() != e.ScenarioName() {
			return nil, mergeErr("%s: case %s is recorded as scenario %s and as %s: each scenario's case has an id of its own (§7.6 scenarios)",
				in.Name, e.CaseID, prev.ScenarioName(), e.ScenarioName())
		}
		if prev, ok := last[e.CaseID]; !ok || e.AttemptNumber() > prev.AttemptNumber() {
			last[e.CaseID] = e
		}
	}
	if len(last) == 0 {
		return nil, mergeErr("%s: no case recorded", in.Name)
	}
	return last, nil
}

// shardOf is the shard every record of one input names.
func shardOf(in MergeInput, last map[string]*Evidence) (string, error) {
	shard := ""
	for _, e := range last {
		where := in.Name + " (" + e.CaseID + ")"
		if e.Shard == "" || e.MatrixSHA256 == "" {
			return "", mergeErr("%s: not a shard's record (no shard or matrix_sha256): run certify with --shard i/N", where)
		}
		if shard != "" && e.Shard != shard {
			return "", mergeErr("%s: shard %s in a run of shard %s", where, e.Shard, shard)
		}
		shard = e.Shard
	}
	return shard, nil
}

// addShard takes one input's shard: of the same N as the others, and not
// given before.
func (m *merger) addShard(in MergeInput, shard string) error {
	i, n, err := ParseShard(shard)
	if err != nil {
		return mergeErr("%s: shard %q: %v", in.Name, shard, err)
	}
	if m.total == 0 {
		m.total = n
	} else if n != m.total {
		return mergeErr("%s is shard %s, the others are of %d", in.Name, shard, m.total)
	}
	if other, dup := m.shardFrom[i]; dup {
		return mergeErr("shard %s is given twice: %s and %s", shard, other, in.Name)
	}
	m.shardFrom[i] = in.Name
	return nil
}

// addCases takes one input's cases, in case id order: of the same matrix
// and provenance as the others, each case in one input only.
func (m *merger) addCases(in MergeInput, last map[string]*Evidence) error {
	ids := make([]string, 0, len(last))
	for id := range last {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		e := last[id]
		where := in.Name + " (" + e.CaseID + ")"
		if m.matrix == "" {
			m.matrix, m.matrixFrom, m.cases = e.MatrixSHA256, in.Name, e.MatrixCases
		} else if e.MatrixSHA256 != m.matrix || e.MatrixCases != m.cases {
			return mergeErr("%s is a shard of another matrix (%d cases, sha256 %.12s) than %s (%d cases, sha256 %.12s): the shards must be run with the same --adapter and --image flags",
				in.Name, e.MatrixCases, e.MatrixSHA256, m.matrixFrom, m.cases, m.matrix)
		}
		for _, a := range []struct{ what, value string }{
			{"suite_version", e.SuiteVersion},
			{"warden_sha256", e.WardenSHA256},
			{"adapter_sha256 of " + e.Harness, e.AdapterSHA256},
		} {
			if err := m.must(a.what, a.value, where); err != nil {
				return err
			}
		}
		if other, dup := m.caseFrom[e.CaseID]; dup {
			return mergeErr("case %s is in %s and in %s", e.CaseID, other, in.Name)
		}
		m.caseFrom[e.CaseID] = in.Name
		c := *e
		c.ShardRunID, c.RunID, c.Line = e.RunID, m.runID, 0
		m.out = append(m.out, &c)
	}
	return nil
}

// must refuses a value of what that differs from the one seen before.
func (m *merger) must(what, value, where string) error {
	if prev, ok := m.agree[what]; ok && prev[0] != value {
		return mergeErr("%s differs: %q in %s, %q in %s", what, prev[0], prev[1], value, where)
	}
	m.agree[what] = [2]string{value, where}
	return nil
}

// complete refuses a missing shard and a case count short of the
// matrix's.
func (m *merger) complete() error {
	var missing []string
	for i := 1; i <= m.total; i++ {
		if _, ok := m.shardFrom[i]; !ok {
			missing = append(missing, fmt.Sprintf("%d/%d", i, m.total))
		}
	}
	if len(missing) > 0 {
		return mergeErr("shard %s missing", strings.Join(missing, ", "))
	}
	if len(m.out) != m.cases {
		return mergeErr("the shards hold %d of the matrix's %d cases: a shard's run is incomplete (finish it with certify --resume)", len(m.out), m.cases)
	}
	return nil
}

// ParseShard reads a shard "i/N" (1 <= i <= N), as certify --shard
// writes it into every record.
func ParseShard(s string) (i, n int, err error) {
	is, ns, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return 0, 0, errors.New("want i/N with 1 <= i <= N")
	}
	return i, n, nil
}
