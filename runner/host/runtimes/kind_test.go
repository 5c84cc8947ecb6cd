package runtimes_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sandproof/sandproof/internal/testsupport/runtimestest"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/artifact"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// fakeKind is a kind of one file, bin/tool, pinned by its with block's
// version; unreachable makes its stage fail as an unreachable source.
type fakeKind struct {
	name        string
	unreachable bool
}

func (k fakeKind) Name() string      { return k.name }
func (k fakeKind) PerPlatform() bool { return true }
func (k fakeKind) Check(dir string, with *yaml.Node) []adapter.FieldError {
	if with == nil {
		return []adapter.FieldError{{Key: "runtime.prepare.with", Msg: "missing"}}
	}
	return nil
}
func (k fakeKind) Pins(with map[string]string) adapter.Pins {
	return adapter.Pins{Package: "tool", Version: with["version"], Integrity: "sha512-tool"}
}
func (k fakeKind) Plan(req adapter.PrepareRequest, t runtimes.Target) (runtimes.Spec, error) {
	v := req.With["version"]
	return runtimes.Spec{
		Name: "tool", Version: v, Target: t, Package: "tool", Integrity: "sha512-tool", Hash: "h-" + v,
		Entry: []string{"bin/tool"}, VersionArgs: []string{"--version"}, Requires: []string{"libgcc"},
		Stage: func(ctx context.Context, dir string, info map[string]any) error {
			if k.unreachable {
				return fmt.Errorf("%w: no route", runtimes.ErrUnreachable)
			}
			if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "bin", "tool"), []byte("#!/bin/sh\necho tool "+v+"\n"), 0o755)
		},
		HostParts: func(rt *runtimes.Runtime) []adapter.HostPart {
			return []adapter.HostPart{{Path: "bin/tool", Name: "tool", Version: rt.Version, Source: "host"}}
		},
	}, nil
}

// The kind-neutral preparer hands on what the kind planned and the cache
// prepared: the platform, the version check (never run here), the build's
// requires and the host's parts; an unreachable source is unavailable.
func TestKindPreparerHandsOnThePlan(t *testing.T) {
	t.Setenv(runtimes.CacheEnv, t.TempDir())
	h := runtimes.HostTarget()
	req := func(k runtimes.Kind, out *adapter.Prepared) adapter.PrepareRequest {
		return adapter.PrepareRequest{With: map[string]string{"version": "1.2.3"}, GOOS: "linux", GOARCH: h.Arch, Libc: h.Libc, Dir: t.TempDir(), Out: out}
	}
	var out adapter.Prepared
	r := req(fakeKind{name: "fake"}, &out)
	if err := runtimes.Preparer(fakeKind{name: "fake"})(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(r.Dir, "bin", "tool")); err != nil || string(b) != "#!/bin/sh\necho tool 1.2.3\n" {
		t.Fatalf("the runtime is not linked into the request's dir: %q, %v", b, err)
	}
	v := out.VersionCheck
	if v == nil || !slices.Equal(v.Argv, []string{"bin/tool", "--version"}) || v.Want != "1.2.3" {
		t.Errorf("version check %+v, want bin/tool --version wanting 1.2.3", v)
	}
	want := runtimes.HostTargetFor(h.Arch, h.Libc).String()
	if out.Platform != want || !slices.Equal(out.Requires, []string{"libgcc"}) || len(out.Host) != 1 || out.Host[0].Version != "1.2.3" {
		t.Errorf("prepared %+v, want platform %s, requires [libgcc] and the kind's host part", out, want)
	}
	r = req(fakeKind{}, &adapter.Prepared{})
	r.With["version"] = "2.0.0" // not in the cache
	err := runtimes.Preparer(fakeKind{name: "fake", unreachable: true})(context.Background(), r)
	if !errors.Is(err, adapter.ErrUnavailable) {
		t.Errorf("an unreachable source: %v, want adapter.ErrUnavailable", err)
	}
	r = req(fakeKind{name: "fake"}, &adapter.Prepared{})
	r.Libc = "none"
	if err := runtimes.Preparer(fakeKind{name: "fake"})(context.Background(), r); !errors.Is(err, adapter.ErrPlatform) {
		t.Errorf("an image with no loader: %v, want adapter.ErrPlatform", err)
	}
}

// Register makes the kind the preparer of its name: a manifest naming it
// loads (its Check runs), and its runtime pins are the kind's.
func TestRegisterMakesTheKindAPreparer(t *testing.T) {
	runtimes.Register(fakeKind{name: "fake-registered"})
	m, err := adapter.Parse("x.yaml", t.TempDir(), []byte(`name: x
version: "1"
launch:
  argv: ["{runtime_dir}/bin/tool", "{prompt}"]
  deadline: 60
runtime:
  prepare:
    name: fake-registered
    with: {version: "1.2.3"}
`))
	if err != nil {
		t.Fatalf("a manifest of the registered kind: %v", err)
	}
	if p := m.RuntimePins(); p != (adapter.Pins{Package: "tool", Version: "1.2.3", Integrity: "sha512-tool"}) {
		t.Errorf("runtime pins %+v", p)
	}
	if !m.PerPlatform() {
		t.Error("the kind is per platform, the manifest says not")
	}
}

// The contract suite passes the fake kind and finds a broken one's breaks.
func TestKindContract(t *testing.T) {
	c := runtimestest.Case{Dir: t.TempDir(), With: `version: "1.2.3"`, Target: runtimes.HostTarget(), Pins: adapter.Pins{Package: "tool", Version: "1.2.3", Integrity: "sha512-tool"}}
	runtimestest.Kind(t, fakeKind{name: "fake"}, c)
	bad := runtimestest.Problems(brokenKind{fakeKind{name: ""}}, c)
	if len(bad) != 3 {
		t.Errorf("a kind with no name, accepting no with block and planning anew each time: %q, want 3 problems", bad)
	}
}

type brokenKind struct{ fakeKind }

func (brokenKind) Check(string, *yaml.Node) []adapter.FieldError { return nil }

var plans int

func (k brokenKind) Plan(req adapter.PrepareRequest, t runtimes.Target) (runtimes.Spec, error) {
	s, err := k.fakeKind.Plan(req, t)
	plans++
	s.Hash = fmt.Sprint("h", plans)
	return s, err
}

// A runtime tree holding a link is refused as the package's content.
func TestFilesOnlyRefusesALink(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "lnk")); err != nil {
		t.Fatal(err)
	}
	if err := runtimes.FilesOnly(dir); err == nil || !errors.Is(err, artifact.ErrRefused) {
		t.Errorf("a tree with a link: %v, want refused", err)
	}
}
