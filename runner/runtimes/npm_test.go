package runtimes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// npmOrSkip skips when the registry cannot be reached at all, and fails
// when it answers but not as expected.
func npmOrSkip(t *testing.T, pkg, version string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := RegistryReachable(ctx, pkg, version); err != nil {
		if errors.Is(err, ErrUnreachable) {
			t.Skipf("npm registry unreachable: %v", err)
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
	if testing.Short() {
		t.Skip("downloads hundreds of MB")
	}
	npmOrSkip(t, spec.Package, spec.Version)
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
		t.Skipf("host cannot build pi: %v", err)
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
