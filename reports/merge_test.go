package reports

import (
	"errors"
	"strings"
	"testing"
)

// shardRun is one shard's run of a 4-case matrix: the cases whose index k
// (in a-b-c-d order) has k mod n == i-1.
func shardRun(run string, i, n int, matrix string) MergeInput {
	var in MergeInput
	in.Name = run
	for k, id := range []string{"img/a", "img/b", "img/c", "img/d"} {
		if k%n != i-1 {
			continue
		}
		e := okEvidence(run, id, "img", id[4:])
		e.Shard, e.MatrixSHA256, e.MatrixCases = strings.Join([]string{itoa(i), itoa(n)}, "/"), matrix, 4
		in.Records = append(in.Records, e)
	}
	return in
}

func itoa(i int) string { return string(rune('0' + i)) }

func TestMergeJoinsShardsIntoOneRun(t *testing.T) {
	out, err := Merge([]MergeInput{shardRun("run2", 2, 2, "m"), shardRun("run1", 1, 2, "m")}, "merged")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range out {
		ids = append(ids, e.CaseID)
		if e.RunID != "merged" || (e.ShardRunID != "run1" && e.ShardRunID != "run2") {
			t.Errorf("%s: run_id %q shard_run_id %q", e.CaseID, e.RunID, e.ShardRunID)
		}
	}
	if got := strings.Join(ids, " "); got != "img/a img/b img/c img/d" {
		t.Fatalf("merged cases %q", got)
	}
}

// The last attempt of a resumed case counts once.
func TestMergeTakesTheLastAttempt(t *testing.T) {
	one := shardRun("run1", 1, 1, "m")
	again := okEvidence("run1", "img/a", "img", "a")
	again.Shard, again.MatrixSHA256, again.MatrixCases, again.Attempt = "1/1", "m", 4, 2
	again.Host = "second attempt"
	one.Records = append(one.Records, again)
	out, err := Merge([]MergeInput{one}, "merged")
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 4 || out[0].Host != "second attempt" {
		t.Fatalf("merged %d records, first from %q", len(out), out[0].Host)
	}
}

func TestMergeRefuses(t *testing.T) {
	notShard := shardRun("plain", 1, 1, "m")
	for _, e := range notShard.Records {
		e.Shard = ""
	}
	otherWarden := shardRun("run2", 2, 2, "m")
	for _, e := range otherWarden.Records {
		e.WardenSHA256 = "sha256:other"
	}
	incomplete := shardRun("run2", 2, 2, "m")
	incomplete.Records = incomplete.Records[:1]
	for _, tc := range []struct {
		name   string
		inputs []MergeInput
		want   string
	}{
		{"a missing shard", []MergeInput{shardRun("run1", 1, 2, "m")}, "shard 2/2 missing"},
		{"a shard twice", []MergeInput{shardRun("run1", 1, 2, "m"), shardRun("again", 1, 2, "m"), shardRun("run2", 2, 2, "m")}, "given twice"},
		{"another matrix", []MergeInput{shardRun("run1", 1, 2, "m"), shardRun("run2", 2, 2, "other")}, "another matrix"},
		{"not a shard", []MergeInput{notShard}, "not a shard's record"},
		{"another warden", []MergeInput{shardRun("run1", 1, 2, "m"), otherWarden}, "warden_sha256 differs"},
		{"an incomplete shard", []MergeInput{shardRun("run1", 1, 2, "m"), incomplete}, "3 of the matrix's 4 cases"},
		{"different shard counts", []MergeInput{shardRun("run1", 1, 2, "m"), shardRun("run3", 3, 3, "m")}, "the others are of 2"},
		{"nothing", nil, "no run given"},
	} {
		_, err := Merge(tc.inputs, "merged")
		if !errors.Is(err, ErrMerge) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want ErrMerge saying %q", tc.name, err, tc.want)
		}
	}
	// Positive control: the same inputs, whole, merge.
	if _, err := Merge([]MergeInput{shardRun("run1", 1, 2, "m"), shardRun("run2", 2, 2, "m")}, "merged"); err != nil {
		t.Fatalf("control: %v", err)
	}
}
