package certify

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/relay"
)

// The canary scan's bounds and its verdict, and the run's summary, engine-
// free (the host-path mutants, docs/mutation.md).

// The byte bound is the whole search's: three clean files of 600 KiB,
// each within a 1 MiB bound alone, stop the search together. The
// positive control: under a 2 MiB bound the same dir is searched whole
// and clean.
func TestFindCanaryBoundIsTheSearchs(t *testing.T) {
	dir := t.TempDir()
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint("f", i)), bytes.Repeat([]byte("clean line\n"), 600<<10/11), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	key := NewCanary()
	if hits, err := FindCanaryLimit(dir, key, ScanLimits{Bytes: 2 << 20}); err != nil || len(hits) != 0 {
		t.Fatalf("positive control: under 2 MiB: %v %v", hits, err)
	}
	if _, err := FindCanaryLimit(dir, key, ScanLimits{Bytes: 1 << 20}); !errors.Is(err, ErrScanBounded) {
		t.Errorf("1.8 MiB in three files under a 1 MiB bound: err %v, want ErrScanBounded", err)
	}
}

// secrets.canary passes only on a scan that read everything and found
// nothing, with no request refused for carrying the key: a scan cut at
// its bound fails (what it did not read is not known to be clean), and so
// does a refusal by the relay. The positive control: a clean scan, no
// refusal, passes.
func TestCheckCanaryRules(t *testing.T) {
	key := NewCanary()
	refused := relay.Bounds{Refused: map[string]int{relay.RefusedCanary: 1}, Canary: []string{"body, hex"}}
	for _, tc := range []struct {
		name string
		b    relay.Bounds
		scan canaryScan
		want reports.Status
	}{
		{"clean", relay.Bounds{Refused: map[string]int{}}, canaryScan{}, reports.StatusPassed},
		{"cut at its bound", relay.Bounds{Refused: map[string]int{}}, canaryScan{err: fmt.Errorf("read %q: %w: read 1 bytes", "x", ErrScanBounded)}, reports.StatusFailed},
		{"a request refused for the key", refused, canaryScan{}, reports.StatusFailed},
		{"a file holds it", relay.Bounds{Refused: map[string]int{}}, canaryScan{leaks: []string{"/run/case/x"}}, reports.StatusFailed},
	} {
		cr := &caseRun{r: &runner{key: key}, ev: &reports.Evidence{}, dir: "/run/case"}
		cr.checkCanary(tc.b, tc.scan)
		if st, detail := statusOf(cr.ev, "secrets.canary"); st != tc.want {
			t.Errorf("%s: secrets.canary %s (%s), want %s", tc.name, st, detail, tc.want)
		}
	}
}

// The case's files are searched for the model's real key too, not only
// the canary. The positive control: the file does not hold the canary.
func TestCanaryScanFindsTheModelKey(t *testing.T) {
	key, model := NewCanary(), "sk-model-real-0123456789abcdef0123456789"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "events.jsonl"), []byte(`{"auth":"`+model+`"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if hits, err := FindCanary(dir, key); err != nil || len(hits) != 0 {
		t.Fatalf("positive control: the canary is not there: %v %v", hits, err)
	}
	cr := &caseRun{r: &runner{key: key, opts: Options{APIKey: model}}, dir: dir}
	s := <-cr.startCanaryScan()
	if s.err != nil || len(s.leaks) != 1 {
		t.Errorf("scan: %v %v, want the file holding the model key", s.leaks, s.err)
	}
}

// A run with an unknown case, and none failed, is not a success: certify
// exits 1 for it (contract §9). The positive control: a run of passed
// and skipped cases is one.
func TestSummaryUnknownIsNotSuccess(t *testing.T) {
	ok := Summary{Counts: map[reports.Status]int{reports.StatusPassed: 3, reports.StatusSkipped: 1}}
	if ok.Failed() {
		t.Fatal("positive control: passed and skipped cases failed the run")
	}
	for _, st := range []reports.Status{reports.StatusUnknown, reports.StatusFailed} {
		s := Summary{Counts: map[reports.Status]int{reports.StatusPassed: 3, st: 1}}
		if !s.Failed() {
			t.Errorf("one %s case beside three passed: not failed", st)
		}
	}
}
