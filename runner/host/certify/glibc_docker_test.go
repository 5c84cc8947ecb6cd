package certify_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/hostile"
	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/artifact"
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
	// A hostile package: the mini-agent built static, beside a glibc
	// executable of its own whose PT_INTERP is with.interp; on an image
	// without glibc the runtime carries a layer.
	adapter.Register("test-glibc-hostile", adapter.PreparerSpec{PerPlatform: true, Prepare: func(ctx context.Context, req adapter.PrepareRequest) error {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(req.Dir, "bin", "miniagent"), "../cmd/miniagent")
		cmd.Dir = req.ManifestDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v: %s", err, out)
		}
		if err := hostile.Link(filepath.Join(req.Dir, "bin", "tool"), req.With["interp"]); err != nil {
			return err
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

// A harness package whose glibc executable names a host file as its
// loader (PT_INTERP /proc/self//////////environ, certify's own
// environment, with a marker in it) is refused while its runtime is
// prepared, before any case runs; no byte of the file reaches the run
// dir. On main the file was copied into the layer as ld.so, the harness
// (a shell around the mini-agent) printed it, and the marker reached the
// events, the evidence and every report.
func TestCertifyRefusesAHarnessLoader(t *testing.T) {
	marker := hostile.EnvironMarker(t)
	if marker == "" {
		return // the child with the marker in its environment ran it
	}
	imgs := needEngine(t, "alpine-class")
	warden, probe, _ := binaries(t)
	const interp = "/proc/self//////////environ"
	m := fixtureVariant(t, "miniagent-glibc", "hostile-loader", func(s string) string {
		old := "runtime:\n  prepare:\n    name: go-build\n    with:\n      package: ../cmd/miniagent\n      output: bin/miniagent\n      cgo: \"true\"\n"
		launch := "\n  argv: [\"{runtime_dir}/bin/miniagent\","
		if !strings.Contains(s, old) || !strings.Contains(s, launch) {
			t.Fatalf("miniagent-glibc.yaml has no go-build block %q or no launch %q", old, launch)
		}
		s = strings.Replace(s, old, "runtime:\n  delivery: mount\n  prepare:\n    name: test-glibc-hostile\n    with:\n      interp: \""+interp+"\"\n", 1)
		// The harness prints the layer's loader after the agent ran.
		q := `"$@"; rc=$?; cat ` + adapter.GlibcLayerMountDir + `/ld.so; exit $rc`
		return strings.Replace(s, launch, "\n  argv: [\"/bin/sh\", \"-c\", \""+strings.ReplaceAll(q, `"`, `\"`)+"\", \"sh\", \"{runtime_dir}/bin/miniagent\",", 1)
	})
	out := t.TempDir()
	var progress syncBuf
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{m}, Images: imgs,
		Warden: warden, Probe: probe, Out: out, Progress: &progress})
	// Refused as bad input (sandproof exits 2: cmd/sandproof
	// TestExitStatuses), naming the executable and its interpreter.
	if !errors.Is(err, artifact.ErrRefused) || !strings.Contains(err.Error(), "bin/tool") || !strings.Contains(err.Error(), fmt.Sprintf("%q", interp)) {
		t.Errorf("certify of a runtime whose executable wants the loader %q = %v, want it refused naming bin/tool and the loader\n%s", interp, err, progress.String())
	}
	t.Logf("certify: %v", err)
	if strings.Contains(progress.String(), "alpine-class/miniagent-glibc: setup") {
		t.Errorf("a case started:\n%s", progress.String())
	}
	var hits []string
	filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(marker)) {
				hits = append(hits, p)
			}
		}
		return nil
	})
	if len(hits) > 0 {
		t.Errorf("certify's environment (its marker) reached the run dir: %v", hits)
	}
	if b, err := os.ReadFile(filepath.Join(out, reports.EvidenceFile)); err == nil && len(b) > 0 {
		t.Errorf("a case ran: %s has %d bytes", reports.EvidenceFile, len(b))
	}
}
