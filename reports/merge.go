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
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrMerge, fmt.Sprintf(format, args...))
	}
	if len(inputs) == 0 {
		return nil, bad("no run given")
	}
	var (
		matrix, matrixFrom string
		total, cases       int
		shardFrom          = map[int]string{}
		caseFrom           = map[string]string{}
		agree              = map[string][2]string{} // what -> value, where
		out                []*Evidence
	)
	must := func(what, value, where string) error {
		if prev, ok := agree[what]; ok && prev[0] != value {
			return bad("%s differs: %q in %s, %q in %s", what, prev[0], prev[1], value, where)
		}
		agree[what] = [2]string{value, where}
		return nil
	}
	for _, in := range inputs {
		last := map[string]*Evidence{}
		for _, e := range in.Records {
			if prev, ok := last[e.CaseID]; ok && prev.AttemptNumber() == e.AttemptNumber() {
				return nil, bad("%s: case %s attempt %d is recorded twice", in.Name, e.CaseID, e.AttemptNumber())
			}
			if prev, ok := last[e.CaseID]; !ok || e.AttemptNumber() > prev.AttemptNumber() {
				last[e.CaseID] = e
			}
		}
		if len(last) == 0 {
			return nil, bad("%s: no case recorded", in.Name)
		}
		// The shard first: every record of a run names the same one.
		shard := ""
		for _, e := range last {
			where := in.Name + " (" + e.CaseID + ")"
			if e.Shard == "" || e.MatrixSHA256 == "" {
				return nil, bad("%s: not a shard's record (no shard or matrix_sha256): run certify with --shard i/N", where)
			}
			if shard != "" && e.Shard != shard {
				return nil, bad("%s: shard %s in a run of shard %s", where, e.Shard, shard)
			}
			shard = e.Shard
		}
		i, n, err := ParseShard(shard)
		if err != nil {
			return nil, bad("%s: shard %q: %v", in.Name, shard, err)
		}
		if total == 0 {
			total = n
		} else if n != total {
			return nil, bad("%s is shard %s, the others are of %d", in.Name, shard, total)
		}
		if other, dup := shardFrom[i]; dup {
			return nil, bad("shard %s is given twice: %s and %s", shard, other, in.Name)
		}
		shardFrom[i] = in.Name
		ids := make([]string, 0, len(last))
		for id := range last {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			e := last[id]
			where := in.Name + " (" + e.CaseID + ")"
			if matrix == "" {
				matrix, matrixFrom, cases = e.MatrixSHA256, in.Name, e.MatrixCases
			} else if e.MatrixSHA256 != matrix || e.MatrixCases != cases {
				return nil, bad("%s is a shard of another matrix (%d cases, sha256 %.12s) than %s (%d cases, sha256 %.12s): the shards must be run with the same --adapter and --image flags",
					in.Name, e.MatrixCases, e.MatrixSHA256, matrixFrom, cases, matrix)
			}
			for _, a := range []struct{ what, value string }{
				{"suite_version", e.SuiteVersion},
				{"warden_sha256", e.WardenSHA256},
				{"adapter_sha256 of " + e.Harness, e.AdapterSHA256},
			} {
				if err := must(a.what, a.value, where); err != nil {
					return nil, err
				}
			}
			if other, dup := caseFrom[e.CaseID]; dup {
				return nil, bad("case %s is in %s and in %s", e.CaseID, other, in.Name)
			}
			caseFrom[e.CaseID] = in.Name
			c := *e
			c.ShardRunID, c.RunID, c.Line = e.RunID, runID, 0
			out = append(out, &c)
		}
	}
	var missing []string
	for i := 1; i <= total; i++ {
		if _, ok := shardFrom[i]; !ok {
			missing = append(missing, fmt.Sprintf("%d/%d", i, total))
		}
	}
	if len(missing) > 0 {
		return nil, bad("shard %s missing", strings.Join(missing, ", "))
	}
	if len(out) != cases {
		return nil, bad("the shards hold %d of the matrix's %d cases: a shard's run is incomplete (finish it with certify --resume)", len(out), cases)
	}
	slices.SortFunc(out, func(a, b *Evidence) int { return strings.Compare(a.CaseID, b.CaseID) })
	return out, nil
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
