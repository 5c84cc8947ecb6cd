package python

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/host/artifact"
)

// rt37Site copies the staged interpreter tree and installs the wheel w
// (served by an httptest index) into its site-packages, as stage does.
func rt37Site(t *testing.T, w []byte) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "python")
	if out, err := exec.Command("cp", "-a", rt37Tree(t), root).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	site := filepath.Join(root, sitePackagesPath)
	if err := os.Remove(site); err != nil {
		t.Fatal(err)
	}
	tr, err := artifact.Create(site, wheelLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ix, _ := index(t, "x-1.0-py3-none-any.whl", w)
	if _, err := installWheel(context.Background(), ix, Requirement{Name: "x", Version: "1.0", Hashes: []string{sum(w)}}, cp313, t.TempDir(), tr); err != nil {
		t.Fatal(err)
	}
	return root
}

// A wheel of a few KiB whose one module is n bytes of `x=1` lines: the
// host-side compile holds its whole AST in memory.
func rt37BigSource(t *testing.T, n int) []byte {
	return wheelBytes(t, wheelFile{name: "x/__init__.py", data: ""},
		wheelFile{name: "x/big.py", data: strings.Repeat("x=1\n", n/4)})
}

// rt37Procs are the processes whose command line names root (the
// tree's interpreter and compileall's forkserver and workers, which this
// test started): pid to peak RSS (VmHWM, bytes).
func rt37Procs(root string) map[int]int64 {
	out := map[int]int64{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if !strings.Contains(string(cmd), root) {
			continue
		}
		out[pid] = 0
		st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		for _, l := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				out[pid] = kb << 10
			}
		}
	}
	return out
}

// rt37Precompile runs precompile(ctx, root) and returns what it said,
// how long it took, the highest peak RSS of one of its processes seen
// while it ran, and whether it returned within wait; when it did not,
// the processes it left are killed (by pid: they name this test's tree)
// and it is waited for.
func rt37Precompile(t *testing.T, ctx context.Context, root string, wait time.Duration) (string, time.Duration, int64, bool) {
	t.Helper()
	done := make(chan string, 1)
	start := time.Now()
	go func() { done <- precompile(ctx, root) }()
	var peak int64
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	limit := time.After(wait)
	for {
		select {
		case got := <-done:
			return got, time.Since(start), peak, true
		case <-tick.C:
			for _, rss := range rt37Procs(root) {
				peak = max(peak, rss)
			}
		case <-limit:
			took := time.Since(start)
			left := rt37Procs(root)
			t.Logf("precompile has not returned after %.1fs; %d processes of the tree left: %v", took.Seconds(), len(left), left)
			for pid := range left {
				syscall.Kill(pid, syscall.SIGKILL)
			}
			got := <-done
			return got, took, peak, false
		}
	}
}

// Class C: precompile's memory is not bounded by anything: the host's
// compile of one source holds ~460 times its size (2 MiB: ~0.9 GB,
// 8 MiB: 3.7 GB, 32 MiB: 15 GB measured), and a wheel's file may be
// 256 MiB (~120 GB; two workers at once), from a wheel of a few KiB.
func TestRT37PrecompileMemoryUnbounded(t *testing.T) {
	// Over maxCompileSource: left without bytecode, never parsed (on
	// main, 1,840 MB of RSS for this 4,344-byte wheel).
	const src = 4 << 20
	w := rt37BigSource(t, src)
	root := rt37Site(t, w)
	got, took, peak, ok := rt37Precompile(t, context.Background(), root, 5*time.Minute)
	t.Logf("wheel %d bytes, source %d bytes: %s (%.1fs); peak RSS of one compile process %d MB (%.0fx the source)", len(w), src, got, took.Seconds(), peak>>20, float64(peak)/src)
	if !ok {
		t.Fatal("precompile did not return")
	}
	if peak > 100*src || !strings.Contains(got, "1 source(s) over") {
		t.Errorf("BROKE: the host-side compile of one %d-byte module of a %d-byte wheel took %d MB (%s)", src, len(w), peak>>20, got)
	}
}

// Class C: precompile's deadline is not kept. The kill reaches the
// launcher's process only; compileall's forkserver, its resource tracker
// and its workers (-j 2) survive it, each holding the stdout pipe, and
// none ever exits (a worker holds both ends of the call queue and the
// forkserver's alive pipe), so cmd.Wait never returns: the stage hangs
// for good, and the processes stay. A wheel whose sources compile for
// longer than compileDeadline (10 min: ~200 modules of 2 MiB, a wheel of
// some hundreds of KiB) does it; here a 1.5 s deadline on one 2 MiB module.
func TestRT37PrecompileDeadlineNotKept(t *testing.T) {
	// Under the size cap, so compiled, for seconds: past the deadline.
	root := rt37Site(t, rt37BigSource(t, maxCompileSource-4096))
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	got, took, _, ok := rt37Precompile(t, ctx, root, 30*time.Second)
	t.Logf("deadline 1.5s; precompile: %s after %.1fs", got, took.Seconds())
	if !ok {
		t.Errorf("BROKE: precompile had not returned %.0fs after its 1.5s deadline (it returned only once its leftover processes were killed)", took.Seconds())
	}
	if left := rt37Procs(root); len(left) > 0 {
		t.Errorf("BROKE: %d processes of the compile left after it returned: %v", len(left), left)
	}
}
