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
	"github.com/sandproof/sandproof/runner/host/glibc"
)

// withLayer is a per-platform preparer, as the npm one with glibc_layer
// is, without the network: it builds the mini-agent linked against the
// host's glibc (cgo) and, for an image without glibc, carries the host's
// glibc in a layer.
func init() {
	adapter.Register("test-glibc-layer", adapter.PreparerSpec{PerPlatform: true, Prepare: func(ctx context.Context, req adapter.PrepareRequest) error {
		cmd := exec.CommandContext(ctx, "go", "build", "-ldflags=-linkmode=external", "-o", filepath.Join(req.Dir, "bin", "miniagent"), "../cmd/miniagent")
		cmd.Dir = req.ManifestDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v: %s", err, out)
		}
		req.Out.Platform = "linux-" + req.GOARCH + "-glibc"
		if req.Libc == "glibc" {
			return nil
		}
		l, err := glibc.Build(glibc.Options{Root: req.Dir, Dir: "glibc", SandboxDir: adapter.GlibcLayerMountDir, LibDirs: glibc.HostLibDirs(req.GOARCH)})
		if err != nil {
			return err
		}
		req.Out.Platform += "-layer"
		req.Out.GlibcLayer, req.Out.Provides = l, []string{"glibc"}
		return nil
	}})
}

// The glibc-linked mini-agent, which fails on alpine-class without a
// layer (TestCertifyUndeclaredGlibcFails), passes there carrying the
// host's glibc: its requires: [glibc] is met by the runtime, the layer is
// mounted at its loader's path, and the evidence names the layer. With
// delivery: upload the layer cannot be placed, and the case is skipped,
// named.
func TestCertifyRunsAGlibcHarnessThroughItsLayer(t *testing.T) {
	imgs := needEngine(t, "alpine-class")
	warden, probe, _ := binaries(t)
	variant := func(name, delivery string) *adapter.Manifest {
		return fixtureVariant(t, "miniagent-glibc", name, func(s string) string {
			old := "runtime:\n  prepare:\n    name: go-build\n    with:\n      package: ../cmd/miniagent\n      output: bin/miniagent\n      cgo: \"true\"\n"
			if !strings.Contains(s, old) || !strings.Contains(s, "requires: [glibc]\n") {
				t.Fatalf("miniagent-glibc.yaml has no go-build block %q or no requires: [glibc]", old)
			}
			return strings.Replace(s, old, "runtime:\n  delivery: "+delivery+"\n  prepare:\n    name: test-glibc-layer\n", 1)
		})
	}
	for _, delivery := range []string{"mount", "upload"} {
		out := t.TempDir()
		var progress syncBuf
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		_, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{variant("layer-"+delivery, delivery)}, Images: imgs,
			Warden: warden, Probe: probe, Out: out, Progress: &progress})
		cancel()
		if err != nil {
			t.Fatalf("certify: %v\n%s", err, progress.String())
		}
		ev := readEvidence(t, out)["alpine-class/miniagent-glibc"]
		if delivery == "upload" {
			if ev == nil || ev.Status != reports.StatusSkipped || !strings.Contains(ev.SkipReason, "needs runtime.delivery: mount") {
				t.Fatalf("upload: %+v, want skipped naming the delivery", ev)
			}
			continue
		}
		if ev == nil || ev.Status != reports.StatusPassed {
			t.Fatalf("alpine-class with the layer: %+v, want passed\n%s", ev, progress.String())
		}
		l := ev.HarnessRuntime.GlibcLayer
		if l == nil || l.Loader != adapter.GlibcLayerMountDir+"/ld.so" || len(l.Patched) != 1 || l.Patched[0].Path != "bin/miniagent" {
			t.Fatalf("evidence's glibc layer %+v, want the loader and bin/miniagent patched", l)
		}
		libc := false
		for _, f := range l.Files {
			if len(f.SHA256) != 64 || f.Source == "" {
				t.Errorf("layer file %+v: want its source and sha256", f)
			}
			libc = libc || f.Path == "glibc/libc.so.6"
		}
		if !libc {
			t.Errorf("layer files %+v: no libc.so.6", l.Files)
		}
	}
}
