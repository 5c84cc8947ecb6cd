package runtimes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/testenv"
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

func prepareTwice(t *testing.T, spec Spec) {
	testenv.Long(t, "downloads hundreds of MB")
	needNpm(t, spec.Package, spec.Version)
	dir := cacheDir(t)
	ctx := context.Background()
	cold, err := Prepare(ctx, spec, dir)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	t.Logf("%s: cached=%v %.1fs, %d files, %d bytes, packages sha256:%s tree sha256:%s version %q info %v",
		spec.Key(), cold.Cached, cold.Seconds, cold.Files, cold.Bytes, cold.PackagesSHA256, cold.TreeSHA256, cold.VersionOutput, cold.Info)
	if !cold.VersionChecked {
		t.Fatalf("version not checked on a host that can run %s", spec.Target)
	}
	warm, err := Prepare(ctx, spec, dir)
	if err != nil {
		t.Fatalf("prepare again: %v", err)
	}
	if !warm.Cached || warm.TreeSHA256 != cold.TreeSHA256 || warm.Dir != cold.Dir {
		t.Fatalf("second prepare: cached=%v tree %s (was %s) dir %s (was %s)", warm.Cached, warm.TreeSHA256, cold.TreeSHA256, warm.Dir, cold.Dir)
	}
	t.Logf("%s: reused in %.2fs", spec.Key(), warm.Seconds)
	if spec.PackagesSHA256 == "" {
		t.Errorf("%s: packages sha256 not pinned; this build made sha256:%s", spec.Key(), cold.PackagesSHA256)
	}
	if _, err := os.Stat(filepath.Join(cold.Dir, StampFile)); err != nil {
		t.Fatal(err)
	}
}

func TestPreparePi(t *testing.T) {
	spec, err := Pi(HostTarget())
	if errors.Is(err, ErrUnsupported) {
		testenv.Missing(t, fmt.Sprintf("a host that can build Pi (%v)", err), fmt.Sprintf("install Node >= %d.%d.%d for this architecture (Debian 12's nodejs is 18; NodeSource's nodejs 20 works)", MinNode[0], MinNode[1], MinNode[2]))
	}
	if err != nil {
		t.Fatal(err)
	}
	prepareTwice(t, spec)
}

func TestPrepareOpenCode(t *testing.T) {
	spec, err := OpenCode(HostTarget())
	if err != nil {
		t.Fatal(err)
	}
	prepareTwice(t, spec)
}
