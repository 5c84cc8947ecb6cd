package runtimes

import (
	"path/filepath"
	"testing"

	"github.com/sandproof/sandproof/runner/adapter"
)

// The real manifests load (the npm-runtime preparer is registered by this
// package) and pin exactly what the preparer knows how to build.
func TestManifestsPinWhatThePreparerBuilds(t *testing.T) {
	for _, name := range []string{"pi", "opencode"} {
		m, err := adapter.Load(filepath.Join("..", "..", "adapters", name+".yaml"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p := m.Runtime.Prepare
		if p == nil || p.Name != PreparerName {
			t.Fatalf("%s: prepare is %+v, want %s", name, p, PreparerName)
		}
		if _, err := SpecFor(p.With["package"], p.With["version"], p.With["integrity"], Target{Arch: "amd64", Libc: "glibc"}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if m.Version != p.With["version"] {
			t.Errorf("%s: manifest version %q, package version %q", name, m.Version, p.With["version"])
		}
	}
}
