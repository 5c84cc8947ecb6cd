package certify_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
)

// A per-platform preparer whose build needs python3 of the image (as a
// musl build needs libstdc++): the requirement is the build's, reported in
// Prepared.Requires, not the manifest's.
func init() {
	adapter.Register("test-build-requires", adapter.PreparerSpec{PerPlatform: true, Prepare: func(ctx context.Context, req adapter.PrepareRequest) error {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(req.Dir, "bin", "miniagent"), "../cmd/miniagent")
		cmd.Dir = req.ManifestDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v: %s", err, out)
		}
		req.Out.Platform = "linux-" + req.GOARCH + "-" + req.Libc
		req.Out.Requires = []string{"python3"}
		return nil
	}})
}

// The requirements of the build a case runs are checked like the
// manifest's: debian-12 (no python3) is skipped naming it, old-python
// (python3 3.9) passes. The manifest itself requires nothing.
func TestCertifyChecksTheBuildsOwnRequirements(t *testing.T) {
	imgs := needEngine(t, "debian-12", "old-python")
	warden, probe, _ := binaries(t)
	m := fixtureVariant(t, "miniagent-pi", "build-requires", func(s string) string {
		old := "    name: go-build\n    with:\n      package: ../cmd/miniagent\n      output: bin/miniagent\n"
		if !strings.Contains(s, old) {
			t.Fatalf("miniagent-pi.yaml has no go-build block %q", old)
		}
		return strings.Replace(strings.Replace(s, old, "    name: test-build-requires\n", 1), "requires: [glibc]\n", "", 1)
	})
	if len(m.Requires) != 0 {
		t.Fatalf("the variant requires %v itself", m.Requires)
	}
	out := t.TempDir()
	var progress syncBuf
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{m}, Images: imgs, Warden: warden, Probe: probe,
		Bash: bashStatic(), Out: out, Progress: &progress}); err != nil {
		t.Fatalf("certify: %v\n%s", err, progress.String())
	}
	evs := readEvidence(t, out)
	deb, old := evs["debian-12/miniagent-pi"], evs["old-python/miniagent-pi"]
	if old == nil || old.Status != reports.StatusPassed {
		t.Fatalf("old-python (has python3): %+v, want passed\n%s", old, progress.String())
	}
	if deb == nil || deb.Status != reports.StatusSkipped || !strings.Contains(deb.SkipReason, "image debian-12 lacks python3") {
		t.Fatalf("debian-12 (no python3): %+v, want skipped naming python3\n%s", deb, progress.String())
	}
}
