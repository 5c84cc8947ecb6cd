package bench

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
)

// tierReceipt is what the tier benchmark reads from a receipt.
type tierReceipt struct {
	CleanupConfirmed bool               `json:"cleanup_confirmed"`
	Tier             string             `json:"tier"`
	Reached          []json.RawMessage  `json:"reached"`
	StopSeconds      float64            `json:"stop_seconds"`
	Phases           map[string]float64 `json:"-"`
}

// killStop launches proctree with args under warden --grace 0 (the stop
// goes straight to the kill: tier cgroup's freeze and cgroup.kill, or the
// subreaper tier's SIGSTOP hold and KILLs) in tier (auto or subreaper),
// and returns the wall time of `warden stop --wait` and the receipt.
func killStop(tb testing.TB, tier string, args ...string) (time.Duration, tierReceipt) {
	ready := filepath.Join(tb.TempDir(), "tree.ready")
	state := filepath.Join(tb.TempDir(), "state")
	argv := append([]string{"supervise", "--detach", "--state", state, "--deadline", "600", "--grace", "0", "--tier", tier, "--", bin.proctree}, args...)
	argv = append(argv, "--ready", ready)
	if out, err := exec.Command(bin.warden, argv...).CombinedOutput(); err != nil {
		tb.Fatalf("supervise: %v\n%s", err, out)
	}
	waitReady(tb, ready)
	t0 := time.Now()
	out, err := exec.Command(bin.warden, "stop", "--state", state, "--wait", "60").Output()
	elapsed := time.Since(t0)
	var r tierReceipt
	if jerr := json.Unmarshal(out, &r); err != nil || jerr != nil || !r.CleanupConfirmed {
		tb.Fatalf("stop: %v %v, receipt %s", err, jerr, out)
	}
	r.Phases = stopPhases(state)
	return elapsed, r
}

// BenchmarkTierKillStop: a stop that must kill (grace 0), in tier cgroup
// (freeze, cgroup.kill, populated 0) and in the subreaper tier (SIGSTOP
// hold, a KILL per process), side by side in every iteration: the small
// tree (harness, setsid'd tool, double-forked daemon) and the 1,100-process
// tree (half in sessions of their own). Medians, from stop request to
// confirmed receipt, and each phase's share of the big tree's stops (the
// walk's is scan-share); a figure for the tiers' costs, no target.
func BenchmarkTierKillStop(b *testing.B) {
	if _, r := killStop(b, "auto", "small"); r.Tier != "cgroup" {
		testenv.Missing(b, "a writable cgroup v2 for tier cgroup (warden chose "+r.Tier+")",
			"run as root on a host with cgroup2 mounted (not in a container)")
	}
	var smallCg, smallSr, bigCg, bigSr []time.Duration
	phCg, phSr := phaseSums{}, phaseSums{}
	check := func(r tierReceipt, want string, min int) {
		if !strings.HasPrefix(r.Tier, want) || len(r.Reached) < min {
			b.Fatalf("receipt tier %q with %d reached, want %q and >= %d", r.Tier, len(r.Reached), want, min)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, r := killStop(b, "auto", "small")
		check(r, "cgroup", 3)
		smallCg = append(smallCg, d)
		d, r = killStop(b, "subreaper", "small")
		check(r, "subreaper+", 3)
		smallSr = append(smallSr, d)
		d, r = killStop(b, "auto", "many", "--n", "1100", "--setsid-half")
		check(r, "cgroup", 1100)
		bigCg = append(bigCg, d)
		phCg.add(d, r.Phases)
		d, r = killStop(b, "subreaper", "many", "--n", "1100", "--setsid-half")
		check(r, "subreaper+", 1100)
		bigSr = append(bigSr, d)
		phSr.add(d, r.Phases)
	}
	b.StopTimer()
	ms := func(ds []time.Duration) float64 { return float64(median(ds).Microseconds()) / 1000 }
	b.ReportMetric(ms(smallCg), "small-cgroup-ms")
	b.ReportMetric(ms(smallSr), "small-subreaper-ms")
	b.ReportMetric(ms(bigCg), "big-cgroup-ms")
	b.ReportMetric(ms(bigSr), "big-subreaper-ms")
	b.ReportMetric(ms(bigSr)/ms(bigCg), "big-subreaper/cgroup")
	phCg.report(b, "big-cgroup-")
	phSr.report(b, "big-subreaper-")
}
