package certify_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/certify"
)

// TestCertifyShardsMergeToTheWholeRun runs a 2 x 2 matrix whole and as two
// shards (--shard 1/2 and 2/2), merges the shards, and requires the merged
// case set and statuses to equal the whole run's; the merge of one shard
// alone is refused naming the missing one.
func TestCertifyShardsMergeToTheWholeRun(t *testing.T) {
	imgs := needEngine(t, "debian-12", "alpine-class")
	warden, probe, _ := binaries(t)
	ms := load(t, "miniagent-pi", "miniagent-daemon")
	run := func(s certify.Shard) (string, []*reports.Evidence) {
		out := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if _, err := certify.Run(ctx, certify.Options{Adapters: ms, Images: imgs, Warden: warden, Probe: probe, Out: out, Parallel: 2, Shard: s}); err != nil {
			t.Fatal(err)
		}
		recs := slices.Collect(maps.Values(readEvidence(t, out)))
		return out, recs
	}
	_, whole := run(certify.Shard{})
	dirA, a := run(certify.Shard{Index: 1, Total: 2})
	dirB, b := run(certify.Shard{Index: 2, Total: 2})
	if len(whole) != 4 || len(a)+len(b) != 4 || len(a) == 0 || len(b) == 0 {
		t.Fatalf("cases: whole %d, shards %d + %d; want 4 = 2 + 2", len(whole), len(a), len(b))
	}
	status := func(recs []*reports.Evidence) map[string]reports.Status {
		m := map[string]reports.Status{}
		for _, e := range recs {
			m[e.CaseID] = e.Status
		}
		return m
	}
	merged, err := reports.Merge([]reports.MergeInput{{Name: dirB, Records: b}, {Name: dirA, Records: a}}, "merged")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := status(merged), status(whole); !maps.Equal(got, want) {
		t.Fatalf("merged shards %v, whole run %v", got, want)
	}
	// Positive control: the statuses are not all alike (a pass and a skip
	// at least), so the comparison could have told them apart.
	if st := status(whole); !slices.Contains(slices.Collect(maps.Values(st)), reports.StatusPassed) || !slices.Contains(slices.Collect(maps.Values(st)), reports.StatusSkipped) {
		t.Fatalf("whole run %v: want passed and skipped cases", st)
	}
	for _, e := range a {
		if e.Shard != "1/2" || e.MatrixSHA256 == "" || e.MatrixCases != 4 {
			t.Errorf("%s: shard %q matrix %q/%d", e.CaseID, e.Shard, e.MatrixSHA256, e.MatrixCases)
		}
	}
	if _, err := reports.Merge([]reports.MergeInput{{Name: dirA, Records: a}}, "merged"); !errors.Is(err, reports.ErrMerge) {
		t.Fatalf("one shard alone merged: %v", err)
	}
}
