package certify_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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

// glibcOnly is a per-platform preparer, as the npm one is, without the
// network: it covers glibc images only, builds the static mini-agent, and
// adds a host file with fresh random content each time, reported as the
// host's Node (so the tree's digest must leave it out to stay the same).
// failWith, when set, is its error for every platform.
var failWith error

func init() {
	adapter.Register("test-glibc-only", adapter.PreparerSpec{PerPlatform: true, Prepare: func(ctx context.Context, req adapter.PrepareRequest) error {
		if failWith != nil {
			return failWith
		}
		if req.Libc != "glibc" {
			return fmt.Errorf("%w: platform %s-%s is not covered by the test preparer", adapter.ErrPlatform, req.GOARCH, req.Libc)
		}
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(req.Dir, "bin", "miniagent"), "../cmd/miniagent")
		cmd.Dir = req.ManifestDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v: %s", err, out)
		}
		host := make([]byte, 32)
		rand.Read(host)
		if err := os.WriteFile(filepath.Join(req.Dir, "bin", "node"), host, 0o755); err != nil {
			return err
		}
		sum := sha256.Sum256(host)
		req.Out.Platform = "linux-" + req.GOARCH + "-" + req.Libc
		req.Out.Host = append(req.Out.Host, adapter.HostPart{Path: "bin/node", Name: "node", Version: "v0.0.0-test", SHA256: hex.EncodeToString(sum[:]), Interpreter: true})
		return nil
	}})
}

func platformVariant(t *testing.T) *adapter.Manifest {
	return fixtureVariant(t, "miniagent-pi", "platform", func(s string) string {
		old := "    name: go-build\n    with:\n      package: ../cmd/miniagent\n      output: bin/miniagent\n"
		if !strings.Contains(s, old) {
			t.Fatalf("miniagent-pi.yaml has no go-build block %q", old)
		}
		// No requirement: only the preparer's platform can skip alpine.
		return strings.Replace(strings.Replace(s, old, "    name: test-glibc-only\n", 1), "requires: [glibc]\n", "", 1)
	})
}

// A per-platform runtime is prepared for each image's libc, found by
// probing: the glibc image passes with the platform and the host's part
// recorded apart from the tree digest (the same on two preparations whose
// host part differs), and the musl image is skipped with the preparer's
// reason naming the platform.
func TestCertifySkipsAnUncoveredPlatform(t *testing.T) {
	imgs := needEngine(t, "debian-12", "alpine-class")
	warden, probe, _ := binaries(t)
	m := platformVariant(t)
	var trees []string
	for run := 0; run < 2; run++ {
		out := t.TempDir()
		var progress syncBuf
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		_, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{m}, Images: imgs, Warden: warden, Probe: probe,
			Bash: bashStatic(), Out: out, Progress: &progress})
		cancel()
		if err != nil {
			t.Fatalf("certify: %v\n%s", err, progress.String())
		}
		evs := readEvidence(t, out)
		deb, alp := evs["debian-12/miniagent-pi"], evs["alpine-class/miniagent-pi"]
		if deb == nil || deb.Status != reports.StatusPassed {
			t.Fatalf("debian-12: %+v, want passed\n%s", deb, progress.String())
		}
		h := deb.HarnessRuntime
		if h == nil || h.Platform != "linux-amd64-glibc" && h.Platform != "linux-arm64-glibc" || h.Node == nil || len(h.Node.SHA256) != 64 || h.Node.Version != "v0.0.0-test" || h.TreeSHA256 == "" {
			t.Fatalf("debian-12 harness runtime %+v, want the platform, the host part and the tree digest", h)
		}
		trees = append(trees, h.TreeSHA256+" "+h.Node.SHA256)
		if alp == nil || alp.Status != reports.StatusSkipped || !strings.Contains(alp.SkipReason, "-musl is not covered by the test preparer") {
			t.Fatalf("alpine-class: %+v, want skipped naming the musl platform", alp)
		}
	}
	tree0, node0, _ := strings.Cut(trees[0], " ")
	tree1, node1, _ := strings.Cut(trees[1], " ")
	if node0 == node1 {
		t.Fatalf("the host part did not change between the runs (%s): the test proves nothing", node0)
	}
	if tree0 != tree1 {
		t.Fatalf("tree digest %s then %s: the host part leaked into it", tree0, tree1)
	}
}

// A runtime that cannot be made for another reason (the registry has no
// such package) stops the run before any case starts: an error, and no
// evidence file left behind.
func TestCertifyPreparationErrorLeavesNoEvidence(t *testing.T) {
	imgs := needEngine(t, "debian-12")
	warden, probe, _ := binaries(t)
	m := platformVariant(t)
	failWith = errors.New("the registry has no such-package@1.0.0: not in the npm registry")
	defer func() { failWith = nil }()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{m}, Images: imgs, Warden: warden, Probe: probe, Out: out})
	if err == nil || !strings.Contains(err.Error(), "the registry has no such-package@1.0.0") {
		t.Fatalf("certify: %v, want the preparation error", err)
	}
	if _, err := os.Stat(filepath.Join(out, reports.EvidenceFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("evidence file after a failed preparation: %v", err)
	}
}
