package certify_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/runtimes"
	"github.com/sandproof/sandproof/runner/host/runtimes/npm"
)

// TestNewHarnessWalkthrough runs docs/new-harness.sh, which runs every sh
// block of docs/new-harness.md: a harness sandproof does not ship
// (grok-cli) goes from `npm view` to certified on the three images with a
// manifest and a lock file alone. The page's own checks decide (grok
// passes on debian-12 and old-python, alpine-class is skipped naming its
// platform); the test adds that the run left the evidence it names.
func TestNewHarnessWalkthrough(t *testing.T) {
	testenv.Long(t, "fetches an npm harness and certifies it on three images")
	needEngine(t, "debian-12", "alpine-class", "old-python")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	if err := npm.RegistryReachable(ctx, "@vibe-kit/grok-cli", "0.0.34"); errors.Is(err, runtimes.ErrUnreachable) {
		testenv.Missing(t, fmt.Sprintf("the npm registry (%v)", err), "give this host npm and access to registry.npmjs.org")
	} else if err != nil {
		t.Fatal(err)
	}
	warden, probe, _ := binaries(t)
	// The page runs from a directory holding bin/ as `make build` leaves it.
	root := t.TempDir()
	arch := filepath.Join(root, "bin", "linux-"+runtime.GOARCH)
	if err := os.MkdirAll(arch, 0o755); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(filepath.Dir(probe), "sandagent") // binaries builds it beside the probe
	for src, dst := range map[string]string{warden: "warden", probe: "probe", agent: "sandagent"} {
		if err := os.Symlink(src, filepath.Join(arch, dst)); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(root, "bin", "sandproof"), "../../../cmd/sandproof")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build sandproof: %v: %s", err, out)
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "..", "docs", "new-harness.sh"))
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(root, "work")
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "WORK="+work)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docs/new-harness.sh: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "grok 0.0.34 certified") {
		t.Fatalf("the walkthrough did not reach its end:\n%s", out)
	}
	for _, f := range []string{"grok.yaml", "grok.package-lock.json", "cert/evidence.jsonl", "cert/report.md"} {
		if _, err := os.Stat(filepath.Join(work, f)); err != nil {
			t.Errorf("the walkthrough left no %s: %v", f, err)
		}
	}
	t.Logf("%s", out[max(0, len(out)-1500):])
}
