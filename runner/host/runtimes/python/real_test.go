package python

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// TestPrepareFromTheRegistry prepares a shipped lock from PyPI and
// Debian's mirror, when SANDPROOF_PY_LOCK names one (a manual check of
// the real sources; certify's manifests run it in `make certify`).
func TestPrepareFromTheRegistry(t *testing.T) {
	lock := os.Getenv("SANDPROOF_PY_LOCK")
	if lock == "" {
		t.Skip("SANDPROOF_PY_LOCK not set")
	}
	with := "package: " + os.Getenv("SANDPROOF_PY_PACKAGE") + "\nversion: \"" + os.Getenv("SANDPROOF_PY_VERSION") + "\"\nlock: " + lock + "\npython: \"3.13\"\nentry: {module: " + os.Getenv("SANDPROOF_PY_MODULE") + "}\n"
	c, errs := parse(t, filepath.Dir(lock), with)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	spec, err := SpecFor(c, runtimes.Target{Arch: "amd64", Libc: "glibc"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rt, err := runtimes.Prepare(context.Background(), spec, os.Getenv(runtimes.CacheEnv))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d files, %d bytes, %.1fs (cached %v), dir %s", spec.Key(), rt.Files, rt.Bytes, time.Since(start).Seconds(), rt.Cached, rt.Dir)
}
