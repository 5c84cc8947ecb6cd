package npm

import (
	"path/filepath"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/runtimestest"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// Every manifest in adapters/ that uses the npm preparer loads, and its
// block makes a spec for a platform it lists (no harness is known to Go:
// the manifest alone says what to fetch).
func TestShippedManifestsMakeSpecs(t *testing.T) {
	files := runtimestest.ShippedFiles(t, filepath.Join("..", "..", "..", ".."), PreparerName)
	n := 0
	for _, f := range files {
		m, err := adapter.Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		p := m.Runtime.Prepare
		if p == nil || p.Name != PreparerName {
			continue
		}
		n++
		c, errs := ParseConfig(m.Dir, p.Node)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", f, errs)
		}
		if m.Version != c.Version {
			t.Errorf("%s: manifest version %q, package version %q", f, m.Version, c.Version)
		}
		target := runtimes.Target{Arch: "amd64", Libc: "glibc"}
		if len(c.Platforms) > 0 {
			target = c.Platforms[0].Target()
		} else if c.EntryNode != "" {
			target = runtimes.HostTargetFor(runtimes.HostTarget().Arch, runtimes.HostTarget().Libc)
		}
		s, err := SpecFor(c, target)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if s.Key() == "" || s.Hash == "" || len(s.Entry) == 0 {
			t.Errorf("%s: spec %+v", f, s)
		}
	}
	if n < 2 {
		t.Fatalf("%d npm manifests in adapters/, want at least Pi's and OpenCode's", n)
	}
}
