package reports

import (
	"errors"
	"strings"
	"testing"
)

// Merge's refusals that no other test reached (the host-path mutants,
// docs/mutation.md); TestMergeRefuses' positive control merges the same
// shards whole.
func TestMergeRefusesHalfAShardsProvenance(t *testing.T) {
	noHash := shardRun("run1", 1, 1, "m")
	for _, e := range noHash.Records {
		e.MatrixSHA256 = ""
	}
	otherCount := shardRun("run2", 2, 2, "m")
	for _, e := range otherCount.Records {
		e.MatrixCases = 6
	}
	for _, tc := range []struct {
		name   string
		inputs []MergeInput
		want   string
	}{
		{"a shard without matrix_sha256", []MergeInput{noHash}, "not a shard's record"},
		{"the same matrix hash, another case count", []MergeInput{shardRun("run1", 1, 2, "m"), otherCount}, "another matrix"},
	} {
		_, err := Merge(tc.inputs, "merged")
		if !errors.Is(err, ErrMerge) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want ErrMerge saying %q", tc.name, err, tc.want)
		}
	}
}

// A case in two shards is refused even when the shards' case count comes
// out right: shard 2 holds img/a (shard 1's) in place of its own img/d,
// so four records merge for a four-case matrix with img/d never run. The
// positive control: the same shards, with img/d in place, merge.
func TestMergeRefusesACaseInTwoShards(t *testing.T) {
	one, two := shardRun("run1", 1, 2, "m"), shardRun("run2", 2, 2, "m")
	if _, err := Merge([]MergeInput{one, two}, "merged"); err != nil {
		t.Fatalf("positive control: %v", err)
	}
	doubled := shardRun("run2", 2, 2, "m")
	for _, e := range doubled.Records {
		if e.CaseID == "img/d" {
			e.CaseID, e.Harness, e.AdapterSHA256 = "img/a", "a", "sha256:a-a"
		}
	}
	if n := len(one.Records) + len(doubled.Records); n != 4 {
		t.Fatalf("positive control: %d records, want the matrix's 4 (the count alone cannot tell)", n)
	}
	_, err := Merge([]MergeInput{one, doubled}, "merged")
	if !errors.Is(err, ErrMerge) || !strings.Contains(err.Error(), "case img/a is in run1 and in run2") {
		t.Errorf("err %v, want ErrMerge naming img/a in both shards", err)
	}
}

// One attempt of a case recorded twice in a shard is refused, whether the
// two records agree or not: which one a merge keeps would be chance. The
// positive control: a second attempt of the same case merges (the last
// counts, TestMergeTakesTheLastAttempt).
func TestMergeRefusesAnAttemptRecordedTwice(t *testing.T) {
	for _, differ := range []bool{false, true} {
		in := shardRun("run1", 1, 1, "m")
		again := *in.Records[0]
		if differ {
			again.Status, again.Passed = StatusFailed, false
		}
		in.Records = append(in.Records, &again)
		_, err := Merge([]MergeInput{in}, "merged")
		if !errors.Is(err, ErrMerge) || !strings.Contains(err.Error(), "case img/a attempt 1 is recorded twice") {
			t.Errorf("records differ %t: err %v, want ErrMerge naming attempt 1 of img/a", differ, err)
		}
	}
	in := shardRun("run1", 1, 1, "m")
	second := *in.Records[0]
	second.Attempt = 2
	in.Records = append(in.Records, &second)
	if _, err := Merge([]MergeInput{in}, "merged"); err != nil {
		t.Errorf("positive control: a second attempt: %v", err)
	}
}

// One side of a diff that holds the same image x harness x task twice is
// refused whether the two come from one evidence file or two (a report of
// two runs' files): pairing either with NEW would be chance. The positive
// control: the same two files with different tasks diff.
func TestDiffRefusesAPairTwiceAcrossFiles(t *testing.T) {
	side := func(task2 string) *Report {
		b := NewBuilder()
		e1, e2 := okEvidence("r1", "a", "debian", "pi"), okEvidence("r2", "a", "debian", "pi")
		e2.TaskID = task2
		if err := b.Add("one.jsonl", e1); err != nil {
			t.Fatal(err)
		}
		if err := b.Add("two.jsonl", e2); err != nil {
			t.Fatal(err)
		}
		return b.Report()
	}
	newer := build(t, okEvidence("r", "a", "debian", "pi"))
	if _, err := Diff(side("other-task"), newer); err != nil {
		t.Fatalf("positive control: two files, two tasks: %v", err)
	}
	_, err := Diff(side(""), newer)
	if err == nil || !strings.Contains(err.Error(), "appears twice (one.jsonl:") || !strings.Contains(err.Error(), "two.jsonl:") {
		t.Errorf("err %v, want the pair named in both files", err)
	}
}
