package certify_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/remoteengine"
	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/engine"
	"github.com/sandproof/sandproof/runner/host/runtimes"

	// npm registers its kind: the shipped manifests load.
	_ "github.com/sandproof/sandproof/runner/host/runtimes/npm"
)

// These tests run `sandproof certify` (the built CLI, as a user would)
// against a second engine that stands in for a remote host
// (internal/testsupport/remoteengine): DOCKER_HOST=tcp://127.0.0.1:PORT, with
// /tmp, /var/tmp, the caches and the checkout hidden from it, and its
// overlay dirs out of the host's reach. A run that passes there reached its
// sandboxes through the engine's API alone. The CLI rather than
// certify.Run: each run is a process of its own, so DOCKER_HOST is read
// afresh (runner/host/engine resolves it once per process).

var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
)

// sandproofCLI builds cmd/sandproof beside the test's warden and probe.
func sandproofCLI(t *testing.T) string {
	t.Helper()
	binaries(t) // makes binDir
	cliOnce.Do(func() {
		cliPath = filepath.Join(binDir, "sandproof")
		cmd := exec.Command("go", "build", "-o", cliPath, "../../../cmd/sandproof")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			cliErr = &buildError{"../../../cmd/sandproof", string(out)}
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliPath
}

// sandproof runs the CLI with env and returns its exit status and output.
func sandproof(t *testing.T, ctx context.Context, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, sandproofCLI(t), args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode(), out.String()
	}
	t.Fatalf("sandproof %v: %v\n%s", args, err, out.String())
	return 0, ""
}

// remoteFixtures are the fixture adapters that pass on the suite's images
// (the negative fixtures fake-* and the slow and glibc variants are
// certified elsewhere), on the three images: 8 passed, and
// alpine-class/miniagent-pi skipped (it declares glibc).
var remoteFixtures = []string{"miniagent-pi", "miniagent-opencode", "miniagent-daemon"}

var remoteImages = []string{"alpine-class", "debian-12", "old-python"}

func fixtureArgs(out string) []string {
	args := []string{"certify", "--network", "none", "--out", out, "--parallel", "2"}
	for _, n := range remoteFixtures {
		args = append(args, "--adapter", filepath.Join("..", "..", "..", "fixtures", "adapters", n+".yaml"))
	}
	for _, n := range remoteImages {
		args = append(args, "--image", n)
	}
	return args
}

// toolArgs names the test's warden, probe and static bash.
func toolArgs(t *testing.T) []string {
	warden, probe, _ := binaries(t)
	args := []string{"--warden", warden, "--probe", probe}
	if b := bashStatic(); b != "" {
		args = append(args, "--bash-static", b)
	}
	return args
}

// rawEvidence reads a run's evidence by case id, each record with its line
// as written (to look for what no field of today's schema holds).
func rawEvidence(t *testing.T, dir string) (map[string]*reports.Evidence, map[string]string) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, reports.EvidenceFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, raw := map[string]*reports.Evidence{}, map[string]string{}
	s := bufio.NewScanner(f)
	s.Buffer(nil, 64<<20)
	for s.Scan() {
		var ev reports.Evidence
		if err := json.Unmarshal(s.Bytes(), &ev); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		recs[ev.CaseID], raw[ev.CaseID] = &ev, s.Text()
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return recs, raw
}

// namesEngine: the record says which engine ran the case, by its address
// or its id (the schema has no field for it yet; any field will do).
func namesEngine(raw, host, id string) bool {
	return strings.Contains(raw, host) || (id != "" && strings.Contains(raw, id))
}

// checkRemoteRun checks a run's records: the statuses want gives (passed
// when absent), network none and the engine named on every case that ran.
func checkRemoteRun(t *testing.T, dir, host, engineID string, n int, want map[string]reports.Status) map[string]*reports.Evidence {
	t.Helper()
	recs, raw := rawEvidence(t, dir)
	if len(recs) != n {
		t.Errorf("%s: %d records (%v), want %d", dir, len(recs), slices.Sorted(maps.Keys(recs)), n)
	}
	for id, ev := range recs {
		w, ok := want[id]
		if !ok {
			w = reports.StatusPassed
		}
		if ev.Status != w {
			var failed []string
			for _, c := range ev.Checks {
				if c.Status != reports.StatusPassed {
					failed = append(failed, c.ID+": "+c.Detail)
				}
			}
			t.Errorf("%s: status %s, want %s; checks not passed: %v (skip: %q)", id, ev.Status, w, failed, ev.SkipReason)
		}
		if ev.Status == reports.StatusSkipped {
			continue
		}
		if ev.Sandbox == nil || ev.Sandbox.Network != "none" {
			t.Errorf("%s: sandbox %+v, want network none", id, ev.Sandbox)
		}
		if !namesEngine(raw[id], host, engineID) {
			t.Errorf("%s: the record names neither the engine's address %s nor its id %s", id, host, engineID)
		}
	}
	return recs
}

var remoteRun struct {
	once sync.Once
	dir  string
	ok   bool
}

// remoteFixtureRun certifies remoteFixtures on the second engine once per
// process and returns its run dir; false when it failed (the caller that
// ran it reported why).
func remoteFixtureRun(t *testing.T, e *remoteengine.Engine) (string, bool) {
	t.Helper()
	binaries(t) // makes binDir, which TestMain removes
	remoteRun.once.Do(func() {
		// Not t.TempDir: the run outlives the test that makes it.
		remoteRun.dir = filepath.Join(binDir, "remote-fixtures")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		code, out := sandproof(t, ctx, e.Env(os.Environ()), append(fixtureArgs(remoteRun.dir), toolArgs(t)...)...)
		remoteRun.ok = code == 0
		if code != 0 {
			t.Errorf("DOCKER_HOST=%s sandproof certify --network none (fixtures x 3 images): exit %d\n%s%s", e.Host, code, out, failedCheckDetails(remoteRun.dir))
		}
	})
	return remoteRun.dir, remoteRun.ok
}

// TestCertifyOnARemoteEngine certifies the fixture adapters on the three
// images, and Pi on debian-12, against the second engine with --network
// none: every case passes (but the fixture that declares glibc, skipped on
// alpine-class), and each record says network none and names the engine.
func TestCertifyOnARemoteEngine(t *testing.T) {
	testenv.Long(t, "certifies 10 cases on a second engine")
	e := remoteengine.Shared(t)
	t.Run("fixtures", func(t *testing.T) {
		dir, ok := remoteFixtureRun(t, e)
		if !ok {
			t.FailNow()
		}
		checkRemoteRun(t, dir, e.Host, e.ID, 9, map[string]reports.Status{"alpine-class/miniagent-pi": reports.StatusSkipped})
	})
	t.Run("pi", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		loadPi(t, ctx)
		env := e.Env(os.Environ())
		if cache, err := runtimes.DefaultCacheDir(); err == nil {
			env = append(env, runtimes.CacheEnv+"="+cache)
		}
		out := t.TempDir()
		args := append([]string{"certify", "--network", "none", "--out", out, "--adapter", filepath.Join("..", "..", "..", "adapters", "pi.yaml"), "--image", "debian-12", "--scenario", "challenge"}, toolArgs(t)...)
		if code, text := sandproof(t, ctx, env, args...); code != 0 {
			t.Fatalf("DOCKER_HOST=%s sandproof certify --network none (pi on debian-12): exit %d\n%s", e.Host, code, text)
		}
		recs := checkRemoteRun(t, out, e.Host, e.ID, 1, nil)
		if ev := recs["debian-12/pi"]; ev == nil || ev.ModelSteps == nil || ev.ModelSteps.ResultCall == 0 || ev.ModelSteps.WriteCall == 0 {
			t.Errorf("pi: %+v; want the challenge round trip", ev)
		}
	})
}

// TestCertifyShardsOnTwoEngines runs --shard 1/2 on the main engine and
// --shard 2/2 on the second (both --network none), merges them with
// `report merge`, and requires the merged case set and statuses to equal
// the one-shot run's on the second engine; each shard's records name the
// engine that ran them, and merging one shard alone is refused (exit 2,
// naming the missing shard).
func TestCertifyShardsOnTwoEngines(t *testing.T) {
	testenv.Long(t, "certifies 9 cases in two shards on two engines")
	e := remoteengine.Shared(t)
	whole, ok := remoteFixtureRun(t, e)
	if !ok {
		t.Fatal("the one-shot run on the second engine failed (see TestCertifyOnARemoteEngine)")
	}
	mainEngine, err := remoteengine.MainEngine()
	if err != nil {
		testenv.NoEngine(t, err)
	}
	mi, err := mainEngine.Info()
	if err != nil {
		t.Fatal(err)
	}
	ep, err := engine.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	engines := []struct {
		name, host, id string
	}{{"main engine", ep.Host, mi.ID}, {"second engine", e.Host, e.ID}}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var dirs []string
	for i, en := range engines {
		dir := t.TempDir()
		dirs = append(dirs, dir)
		shard := fmt.Sprintf("%d/2", i+1)
		args := append(append(fixtureArgs(dir), "--shard", shard), toolArgs(t)...)
		if code, out := sandproof(t, ctx, engine.Endpoint{Host: en.host}.Env(os.Environ()), args...); code != 0 {
			t.Fatalf("DOCKER_HOST=%s sandproof certify --network none --shard %s: exit %d\n%s", en.host, shard, code, out)
		}
		recs, raw := rawEvidence(t, dir)
		if len(recs) == 0 {
			t.Fatalf("shard %s on the %s: no cases", shard, en.name)
		}
		for id, ev := range recs {
			if ev.Shard != shard {
				t.Errorf("%s: shard %q, want %s", id, ev.Shard, shard)
			}
			if ev.Status != reports.StatusSkipped && !namesEngine(raw[id], en.host, en.id) {
				t.Errorf("%s (shard %s): the record names neither the %s's address %s nor its id %s", id, shard, en.name, en.host, en.id)
			}
		}
	}

	merged := filepath.Join(t.TempDir(), "merged")
	if code, out := sandproof(t, ctx, os.Environ(), "report", "merge", "--out", merged, dirs[1], dirs[0]); code != 0 {
		t.Fatalf("report merge of both shards: exit %d\n%s", code, out)
	}
	status := func(recs map[string]*reports.Evidence) map[string]reports.Status {
		m := map[string]reports.Status{}
		for id, ev := range recs {
			m[id] = ev.Status
		}
		return m
	}
	got, _ := rawEvidence(t, merged)
	want, _ := rawEvidence(t, whole)
	if !maps.Equal(status(got), status(want)) {
		t.Errorf("merged shards %v, one-shot run %v", status(got), status(want))
	}
	// The positive control: the statuses differ between cases (a pass and
	// a skip), so the comparison could tell two runs apart.
	if st := slices.Collect(maps.Values(status(want))); !slices.Contains(st, reports.StatusPassed) || !slices.Contains(st, reports.StatusSkipped) {
		t.Errorf("one-shot run %v: want passed and skipped cases", status(want))
	}

	code, out := sandproof(t, ctx, os.Environ(), "report", "merge", "--out", filepath.Join(t.TempDir(), "half"), dirs[1])
	if code != 2 || !strings.Contains(out, "shard 1/2 missing") {
		t.Errorf("report merge of shard 2/2 alone: exit %d, %q; want 2 naming shard 1/2 missing", code, out)
	}
}

// failedCheckDetails is every failed check of every failed case of the run in
// dir, with its detail: what a failed run in CI says without its run dir.
func failedCheckDetails(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "evidence.jsonl"))
	if err != nil {
		return "\n(no evidence: " + err.Error() + ")"
	}
	var out strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev reports.Evidence
		if json.Unmarshal([]byte(line), &ev) != nil || ev.Status != reports.StatusFailed {
			continue
		}
		for _, c := range ev.Checks {
			if c.Status == reports.StatusFailed {
				fmt.Fprintf(&out, "\n  %s: %s: %s", ev.CaseID, c.ID, c.Detail)
			}
		}
	}
	return out.String()
}
