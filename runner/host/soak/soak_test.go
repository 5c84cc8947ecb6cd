package soak

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/witness"
)

// binaries builds warden (with the given build tags, "" for the real one)
// and the adversary into a temp dir.
func binaries(t *testing.T, tags string) (warden, adversary string) {
	t.Helper()
	testenv.Long(t, "builds warden and runs real processes")
	if runtime.GOOS != "linux" {
		testenv.Missing(t, "Linux (this is "+runtime.GOOS+")", "warden runs on Linux only: run the tests there")
	}
	_, file, _, _ := runtime.Caller(0)
	root, err := ModuleRoot(filepath.Dir(file))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	warden, adversary, err = Build(context.Background(), root, dir)
	if err != nil {
		t.Fatal(err)
	}
	if tags != "" {
		cmd := exec.Command("go", "build", "-trimpath", "-tags", tags, "-o", warden, "./cmd/warden")
		cmd.Dir = root
		cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build warden -tags %s: %v\n%s", tags, err, out)
		}
	}
	return warden, adversary
}

// Every scenario, in warden's default tier (tier cgroup where the host
// offers a writable cgroup v2) and in the subreaper tier.
func TestSoakRealWardenEveryScenario(t *testing.T) {
	warden, adversary := binaries(t, "")
	for _, tier := range []string{"", "subreaper"} {
		t.Run("tier="+tier, func(t *testing.T) {
			sum, err := Run(context.Background(), Config{Warden: warden, Adversary: adversary,
				Cycles: len(Scenarios), Parallel: 2, Grace: 0.3, Dir: t.TempDir(), Progress: testWriter{t}, Tier: tier})
			if err != nil {
				t.Fatal(err)
			}
			if !sum.OK() {
				sum.Write(testWriter{t})
				t.Fatalf("the real warden failed the soak")
			}
			// The soak checked something: every scenario ran to a confirmed
			// receipt, and each cycle looked up at least the harness it planted.
			if sum.Latency.N != len(Scenarios) || len(sum.PerScenario) != len(Scenarios) {
				t.Fatalf("%d timed stops over %d scenarios, want %d each", sum.Latency.N, len(sum.PerScenario), len(Scenarios))
			}
			if sum.Checked < 2*len(Scenarios) {
				t.Fatalf("only %d recorded processes checked", sum.Checked)
			}
			// And in the tier it meant to: the receipts say which.
			got, want := sum.Tiers["subreaper+pidfd"]+sum.Tiers["subreaper+kill"], "a subreaper tier"
			if tier == "" && witness.WritableCgroup2() == nil {
				got, want = sum.Tiers["cgroup"], "cgroup"
			}
			if got != len(Scenarios) {
				t.Fatalf("receipts by tier %v, want %d in %s", sum.Tiers, len(Scenarios), want)
			}
		})
	}
}

// The soak's own positive control: a warden that reduces the stop to a
// process-group kill (mutant groupkill) confirms cleanup while a setsid'd
// tool runs on; the soak must report that tool as a leftover, fail, and
// then have killed it.
func TestSoakReportsLeftoversOfABrokenWarden(t *testing.T) {
	warden, adversary := binaries(t, "sandproof_mutant,mutant_groupkill")
	const cycles = 2
	// In the subreaper tier: in tier cgroup the harness's cgroup is killed
	// whole, so even a group-kill-only stop leaves no setsid'd tool.
	sum, err := Run(context.Background(), Config{Warden: warden, Adversary: adversary, Cycles: cycles, Parallel: 2,
		Grace: 0.3, Dir: t.TempDir(), Scenarios: []Scenario{{"setsid-tool", []string{"setsid-tool"}}}, Tier: "subreaper"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, l := range sum.Leftovers {
			witness.Kill(l.ID, syscall.SIGKILL)
		}
	})
	if sum.OK() {
		t.Fatal("the soak passed a warden that leaves setsid'd tools running")
	}
	tools := 0
	for _, l := range sum.Leftovers {
		if l.Role == "setsid" {
			tools++
		}
	}
	if tools != cycles {
		t.Fatalf("%d setsid tools reported as leftovers, want %d: %+v", tools, cycles, sum.Leftovers)
	}
	// The broken warden still confirmed cleanup: what the soak adds is
	// the check from /proc.
	if sum.Unconfirmed != 0 || sum.Missing != 0 {
		t.Fatalf("receipts: %d unconfirmed, %d missing; the mutant confirms cleanup", sum.Unconfirmed, sum.Missing)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, l := range sum.Leftovers {
		for running(l.ID) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if running(l.ID) {
			t.Errorf("leftover %v still runs after the soak", l.ID)
		}
	}
}

func TestPercentilesNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	p := percentiles(ds)
	if p.N != 100 || p.P50 != 50*time.Millisecond || p.P99 != 99*time.Millisecond || p.Max != 100*time.Millisecond {
		t.Fatalf("%+v", p)
	}
	if one := percentiles([]time.Duration{7}); one.P50 != 7 || one.P99 != 7 {
		t.Fatalf("%+v", one)
	}
	if (percentiles(nil) != Percentiles{}) {
		t.Fatal("empty set")
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// The drift compares the first and last DriftWindow cycles and shows each
// tenth's p50; a cycle without a confirmed receipt is in neither.
func TestDriftWindows(t *testing.T) {
	const cycles = 20
	byCycle := map[int]time.Duration{}
	for n := 0; n < cycles; n++ {
		if n != 3 { // cycle 3 had no confirmed receipt
			byCycle[n] = time.Duration(n+1) * time.Millisecond
		}
	}
	first, last, tenths := drift(byCycle, cycles)
	ms := func(ns ...int) []time.Duration {
		var ds []time.Duration
		for _, n := range ns {
			ds = append(ds, time.Duration(n)*time.Millisecond)
		}
		return ds
	}
	if want := percentiles(ms(1, 2, 3, 5, 6, 7, 8, 9, 10)); first != want {
		t.Errorf("first window %+v, want %+v (cycles 0-9 but 3)", first, want)
	}
	if want := percentiles(ms(11, 12, 13, 14, 15, 16, 17, 18, 19, 20)); last != want {
		t.Errorf("last window %+v, want %+v (cycles 10-19)", last, want)
	}
	var want []time.Duration
	for _, pair := range [][]int{{1, 2}, {3}, {5, 6}, {7, 8}, {9, 10}, {11, 12}, {13, 14}, {15, 16}, {17, 18}, {19, 20}} {
		want = append(want, percentiles(ms(pair...)).P50)
	}
	if !slices.Equal(tenths, want) {
		t.Errorf("tenths %v, want %v", tenths, want)
	}
	// With an odd count the middle cycle is in neither window.
	byCycle[20] = 21 * time.Millisecond
	if _, last, _ := drift(byCycle, 21); last != percentiles(ms(12, 13, 14, 15, 16, 17, 18, 19, 20, 21)) {
		t.Errorf("last window of 21 cycles %+v, want cycles 11-20", last)
	}
	if _, _, tenths := drift(byCycle, 9); tenths != nil {
		t.Errorf("tenths of 9 cycles %v, want none", tenths)
	}
}
