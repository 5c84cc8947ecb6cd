package certify_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/host/runtimes"
	"github.com/sandproof/sandproof/runner/host/runtimes/npm"
)

// TestCertifyPiNamesWhatWasCertified certifies the real Pi on debian-12:
// it passes through the challenge round trip, and its evidence names the
// npm package, version and integrity, the runtime tree's digest, Pi's own
// --version output (its case's, and its version check's, run in a sandbox),
// the platform and the host's Node (apart from the tree).
func TestCertifyPiNamesWhatWasCertified(t *testing.T) {
	testenv.Long(t, "prepares Pi's npm runtime and runs it")
	runtimeCache(t) // first: a parallel test's deadlines start once it runs
	imgs := needEngine(t, "debian-12")
	warden, probe, _ := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	m := loadPi(t, ctx)
	with := m.Runtime.Prepare.With
	out := t.TempDir()
	if _, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{m}, Images: imgs, Warden: warden, Probe: probe,
		Bash: bashStatic(), Out: out, Scenarios: []string{certify.ScenarioChallenge}}); err != nil {
		t.Fatal(err)
	}
	ev := readEvidence(t, out)["debian-12/pi"]
	if ev == nil || ev.Status != reports.StatusPassed || ev.ModelSteps == nil || ev.ModelSteps.ResultCall == 0 || ev.ModelSteps.WriteCall == 0 {
		t.Fatalf("pi: %+v; want passed with the challenge round trip", ev)
	}
	h := ev.HarnessRuntime
	if h == nil || h.Package != "@mariozechner/pi-coding-agent" || h.Version != with["version"] || h.Integrity != with["integrity"] ||
		!regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(h.TreeSHA256) || h.TreeFiles < 100 || h.CLIVersion != with["version"] ||
		h.Node == nil || !regexp.MustCompile(`^v\d+\.`).MatchString(h.Node.Version) || len(h.Node.SHA256) != 64 || h.Platform == "" {
		t.Fatalf("pi harness runtime %+v; want the package, version %s, integrity, tree digest, --version output, platform and the host's Node", h, with["version"])
	}
	// Its version_args check ran in a sandbox before the case.
	if !h.VersionChecked || h.VersionOutput != with["version"] {
		t.Fatalf("pi version check: checked %v, output %q; want %s from the sandbox", h.VersionChecked, h.VersionOutput, with["version"])
	}
}

// loadPi loads adapters/pi.yaml, ending t (through testenv) when the npm
// registry its runtime comes from does not answer.
func loadPi(t *testing.T, ctx context.Context) *adapter.Manifest {
	t.Helper()
	m, err := adapter.Load(filepath.Join("..", "..", "..", "adapters", "pi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	with := m.Runtime.Prepare.With
	if err := npm.RegistryReachable(ctx, with["package"], with["version"]); errors.Is(err, runtimes.ErrUnreachable) {
		testenv.Missing(t, fmt.Sprintf("the npm registry (%v)", err), "give this host npm and access to registry.npmjs.org")
	}
	return m
}

// runtimeCache has the real harnesses' runtimes prepared in the user's
// cache (runtimes.DefaultCacheDir), where earlier runs left them. That is
// where Prepare goes when runtimes.CacheEnv is unset (as in `make test`):
// then the test runs in parallel (t.Parallel), since it waits on real
// harnesses and timeout deadlines far more than it computes; only a
// caller's other cache needs t.Setenv, which keeps the test serial.
func runtimeCache(t *testing.T) {
	t.Helper()
	cache, err := runtimes.DefaultCacheDir()
	if err != nil {
		return
	}
	if v := os.Getenv(runtimes.CacheEnv); v != "" && v != cache {
		t.Setenv(runtimes.CacheEnv, cache)
		return
	}
	t.Parallel()
}
