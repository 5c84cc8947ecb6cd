package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/warden/proc"
)

var bin struct{ warden, proctree string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wardenbench-")
	if err != nil {
		panic(err)
	}
	bin.warden = os.Getenv("SANDPROOF_WARDEN")
	build := func(out, pkg string) {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = "../../.."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			panic(fmt.Sprintf("go build %s: %v\n%s", pkg, err, out))
		}
	}
	if bin.warden == "" {
		bin.warden = filepath.Join(dir, "warden")
		build(bin.warden, "./cmd/warden")
	}
	bin.proctree = filepath.Join(dir, "proctree")
	build(bin.proctree, "./fixtures/cmd/proctree")
	// No subreaper here: orphans go to init, which reaps them, so zombies
	// never pile up in the process table the benchmarks scan.
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// waitReady waits for proctree's ready file and returns the pids in it.
func waitReady(tb testing.TB, path string) []int {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		data, err := os.ReadFile(path)
		if err == nil {
			var pids []int
			for _, f := range strings.Fields(string(data)) {
				p, _ := strconv.Atoi(f)
				pids = append(pids, p)
			}
			return pids
		}
		time.Sleep(5 * time.Millisecond)
	}
	tb.Fatalf("no ready file %s after 60 s", path)
	return nil
}

// startUnrelated starts n sleeping processes outside any launch: the busy host.
func startUnrelated(tb testing.TB, n int) func() {
	ready := filepath.Join(tb.TempDir(), "busy.ready")
	cmd := exec.Command(bin.proctree, "many", "--n", strconv.Itoa(n), "--ready", ready)
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	pids := waitReady(tb, ready)
	return func() {
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
		cmd.Process.Kill()
		cmd.Wait()
		// Orphans are reaped by whoever adopted them, in its own time: wait
		// (bounded) until their /proc entries are gone, so the next
		// measurement does not scan thousands of zombies.
		deadline := time.Now().Add(60 * time.Second)
		for _, p := range pids {
			for {
				if _, err := os.Stat("/proc/" + strconv.Itoa(p)); err != nil || time.Now().After(deadline) {
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
}

type receiptView struct {
	CleanupConfirmed bool              `json:"cleanup_confirmed"`
	Reached          []json.RawMessage `json:"reached"`
	StopSeconds      float64           `json:"stop_seconds"`
	// Phases are the stop's phases from warden's log (stopPhases).
	Phases map[string]float64 `json:"-"`
}

// launchAndStop starts harness argv under warden --detach, waits for its
// ready file, lets it run for ran (a harness is usually stopped long after
// it started; zero stops it at once), and returns the wall time of
// `warden stop --wait`, from the request to the confirmed receipt.
func launchAndStop(tb testing.TB, ready string, ran time.Duration, argv ...string) (time.Duration, receiptView) {
	return launchAndStopGrace(tb, "5", ready, ran, argv...)
}

// launchAndStopGrace is launchAndStop with --grace grace (seconds).
func launchAndStopGrace(tb testing.TB, grace, ready string, ran time.Duration, argv ...string) (time.Duration, receiptView) {
	state := filepath.Join(tb.TempDir(), "state")
	args := append([]string{"supervise", "--detach", "--state", state, "--deadline", "600", "--grace", grace, "--"}, argv...)
	if out, err := exec.Command(bin.warden, args...).CombinedOutput(); err != nil {
		tb.Fatalf("supervise: %v\n%s", err, out)
	}
	waitReady(tb, ready)
	time.Sleep(ran) // the scenario: how long the harness ran, not a wait for a condition
	t0 := time.Now()
	out, err := exec.Command(bin.warden, "stop", "--state", state, "--wait", "60").Output()
	elapsed := time.Since(t0)
	var r receiptView
	if jerr := json.Unmarshal(out, &r); err != nil || jerr != nil || !r.CleanupConfirmed {
		tb.Fatalf("stop: %v %v, receipt %s", err, jerr, out)
	}
	r.Phases = stopPhases(state)
	return elapsed, r
}

func report(b *testing.B, name string, total time.Duration, n int) float64 {
	ms := float64(total.Microseconds()) / 1000 / float64(n)
	b.ReportMetric(ms, name+"-ms")
	return ms
}

// BenchmarkBusyHostStop: a forced stop of a small harness tree (harness, a
// setsid'd tool, a double-forked daemon) with 1,100 unrelated processes on
// the host, from stop request to confirmed receipt, next to the same stop on
// the idle host. "busy" stops a harness that ran for a second (the usual
// case: the supervisor has pinned the older processes by then); "busy-cold"
// stops it the moment it is ready. Target: under 25 ms (the field's bash
// supervisor took 0.55 s).
func BenchmarkBusyHostStop(b *testing.B) {
	small := func(ran time.Duration) time.Duration { return smallStop(b, ran) }
	var idle, busy, cold time.Duration
	for i := 0; i < b.N; i++ {
		idle += small(time.Second)
	}
	cleanup := startUnrelated(b, 1100)
	defer cleanup()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		busy += small(time.Second)
		cold += small(0)
	}
	b.StopTimer()
	i := report(b, "idle", idle, b.N)
	bz := report(b, "busy", busy, b.N)
	c := report(b, "busy-cold", cold, b.N)
	b.ReportMetric(bz/i, "busy/idle")
	b.ReportMetric(c/i, "busy-cold/idle")
	b.ReportMetric(bz/25, "busy/target25ms")
	b.ReportMetric(bz/550, "busy/bash550ms")
}

// smallStop launches the small harness tree (harness, a setsid'd tool, a
// double-forked daemon), lets it run for ran, and returns the time of its
// forced stop, from request to confirmed receipt.
func smallStop(b *testing.B, ran time.Duration) time.Duration {
	ready := filepath.Join(b.TempDir(), "small.ready")
	d, r := launchAndStop(b, ready, ran, bin.proctree, "small", "--ready", ready)
	if len(r.Reached) < 3 {
		b.Fatalf("stop reached %d processes, want >= 3", len(r.Reached))
	}
	return d
}

// BenchmarkHostProcessScaling: does the stop's cost grow with the host's
// process count? The median small-tree stop with 1,000 unrelated processes
// on the host and with 5,000, measured side by side in every iteration
// (1,000 running; stop; 4,000 more started; stop; those 4,000 ended).
// Target: the 5,000 median within 1.5x of the 1,000 one.
func BenchmarkHostProcessScaling(b *testing.B) {
	base := startUnrelated(b, 1000)
	defer base()
	var with1k, with5k []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		with1k = append(with1k, smallStop(b, time.Second))
		more := startUnrelated(b, 4000)
		with5k = append(with5k, smallStop(b, time.Second))
		b.StopTimer()
		more()
		b.StartTimer()
	}
	b.StopTimer()
	m1, m5 := median(with1k), median(with5k)
	b.ReportMetric(float64(m1.Microseconds())/1000, "host1000-median-ms")
	b.ReportMetric(float64(m5.Microseconds())/1000, "host5000-median-ms")
	b.ReportMetric(float64(m5)/float64(m1), "5000/1000")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkBigTreeStop: warden stopping a 1,100-process harness tree (half
// in sessions of their own) against the floor measured in the same run: a
// bare SIGKILL of the same 1,100 processes and their reaping, with each
// phase's share of warden's time (the walk's is scan-share, the TERM
// phase's term-share). Target (issue 39, warden's own policy): no worse
// than 2x the floor.
func BenchmarkBigTreeStop(b *testing.B) {
	var wardenT, floorT time.Duration
	phases := phaseSums{}
	defer phases.report(b, "")
	for i := 0; i < b.N; i++ {
		ready := filepath.Join(b.TempDir(), "big.ready")
		d, r := launchAndStop(b, ready, 0, bin.proctree, "many", "--n", "1100", "--setsid-half", "--ready", ready)
		if len(r.Reached) < 1100 {
			b.Fatalf("stop reached %d processes, want >= 1100", len(r.Reached))
		}
		wardenT += d
		phases.add(d, r.Phases)
		floorT += bareKill(b)
	}
	w := report(b, "warden", wardenT, b.N)
	f := report(b, "floor", floorT, b.N)
	b.ReportMetric(w/f, "warden/floor")
}

// bareKill starts the same tree directly, SIGKILLs all 1,100 sleepers and
// waits until their parent has reaped every one.
func bareKill(b *testing.B) time.Duration {
	ready := filepath.Join(b.TempDir(), "floor.ready")
	cmd := exec.Command(bin.proctree, "many", "--n", "1100", "--setsid-half", "--ready", ready)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	pids := waitReady(b, ready)
	fs := proc.NewFS("")
	t0 := time.Now()
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGKILL)
	}
	for _, p := range pids {
		for {
			if _, err := fs.Stat(p); err != nil {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	d := time.Since(t0)
	cmd.Process.Kill()
	cmd.Wait()
	return d
}

// BenchmarkScan: one full scan of the process table (1,100 extra
// processes) against `ps -e -o pid,ppid,pgid,sid,lstart` over the same
// table. Target: at most half of ps.
func BenchmarkScan(b *testing.B) {
	cleanup := startUnrelated(b, 1100)
	defer cleanup()
	fs := proc.NewFS("")
	var ours, ps time.Duration
	n := 0
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		stats, err := fs.Scan()
		ours += time.Since(t0)
		if err != nil || len(stats) < 1100 {
			b.Fatalf("scan: %d processes, %v", len(stats), err)
		}
		n = len(stats)
		t0 = time.Now()
		if err := exec.Command("ps", "-e", "-o", "pid,ppid,pgid,sid,lstart").Run(); err != nil {
			b.Fatalf("ps: %v", err)
		}
		ps += time.Since(t0)
	}
	o := report(b, "scan", ours, b.N)
	p := report(b, "ps", ps, b.N)
	b.ReportMetric(float64(n), "processes")
	b.ReportMetric(o/p, "scan/ps")
}

// BenchmarkRespawnerStop: a forced stop (grace 2 s) of a harness that exits
// on TERM beside a setsid'd tool that ignores TERM and respawns its own
// setsid'd sleeper (proctree respawner), from request to confirmed receipt,
// next to the small tree whose every process obeys TERM, in the same run.
// Target (issue 24): under 100 ms, where waiting out the grace took 2 s.
func BenchmarkRespawnerStop(b *testing.B) {
	var resp, small time.Duration
	for i := 0; i < b.N; i++ {
		ready := filepath.Join(b.TempDir(), "resp.ready")
		d, r := launchAndStopGrace(b, "2", ready, time.Second, bin.proctree, "respawner", "--ready", ready)
		if len(r.Reached) < 2 {
			b.Fatalf("stop reached %d processes, want >= 2", len(r.Reached))
		}
		resp += d
		ready = filepath.Join(b.TempDir(), "small.ready")
		d, _ = launchAndStopGrace(b, "2", ready, time.Second, bin.proctree, "small", "--ready", ready)
		small += d
	}
	rs := report(b, "respawner", resp, b.N)
	sm := report(b, "small-tree", small, b.N)
	b.ReportMetric(rs/sm, "respawner/small")
	b.ReportMetric(rs/100, "respawner/target100ms")
	b.ReportMetric(rs/2000, "respawner/grace")
}

// atOnce runs `warden supervise` in the foreground over a harness that
// exits at once (/bin/true) and returns the receipt's time from the
// supervisor's start to the receipt (ended_at - started_at: the harness's
// fork and exit, then its stop) and the stop's own stop_seconds.
func atOnce(tb testing.TB) (toReceipt, stop time.Duration) {
	state := filepath.Join(tb.TempDir(), "state")
	if out, err := exec.Command(bin.warden, "supervise", "--state", state, "--deadline", "600", "--grace", "5", "--", "/bin/true").CombinedOutput(); err != nil {
		tb.Fatalf("supervise: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(state, "receipt.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var r struct {
		CleanupConfirmed bool    `json:"cleanup_confirmed"`
		StartedAt        string  `json:"started_at"`
		EndedAt          string  `json:"ended_at"`
		StopSeconds      float64 `json:"stop_seconds"`
	}
	if err := json.Unmarshal(data, &r); err != nil || !r.CleanupConfirmed {
		tb.Fatalf("receipt %s: %v", data, err)
	}
	t0, err0 := time.Parse(time.RFC3339Nano, r.StartedAt)
	t1, err1 := time.Parse(time.RFC3339Nano, r.EndedAt)
	if err0 != nil || err1 != nil {
		tb.Fatalf("receipt times %q %q", r.StartedAt, r.EndedAt)
	}
	return t1.Sub(t0), time.Duration(r.StopSeconds * float64(time.Second))
}

// BenchmarkAtOnceExit: a harness that exits at once on a host with 1,000
// and with 5,000 unrelated processes, side by side in every iteration: the
// receipt's start to end (medians) and the stop's own stop_seconds. The
// stop comes before the background pinning of the host's older processes
// is done. Targets (issue 24): the 5,000 figure within 1.5x of the 1,000
// one, and under 50 ms.
func BenchmarkAtOnceExit(b *testing.B) {
	base := startUnrelated(b, 1000)
	defer base()
	var r1k, r5k, s1k, s5k []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, s := atOnce(b)
		r1k, s1k = append(r1k, r), append(s1k, s)
		b.StopTimer()
		more := startUnrelated(b, 4000)
		b.StartTimer()
		r, s = atOnce(b)
		r5k, s5k = append(r5k, r), append(s5k, s)
		b.StopTimer()
		more()
		b.StartTimer()
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	m1, m5 := median(r1k), median(r5k)
	b.ReportMetric(ms(m1), "host1000-receipt-ms")
	b.ReportMetric(ms(m5), "host5000-receipt-ms")
	b.ReportMetric(float64(m5)/float64(m1), "5000/1000")
	b.ReportMetric(ms(median(s1k)), "host1000-stop-ms")
	b.ReportMetric(ms(median(s5k)), "host5000-stop-ms")
	b.ReportMetric(ms(m5)/50, "host5000/target50ms")
}
