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
