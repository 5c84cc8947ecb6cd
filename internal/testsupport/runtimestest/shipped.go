package runtimestest

import (
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sandproof/sandproof/runner/host/adapter"
)

// ShippedFiles are the manifests in the module's adapters/ whose
// runtime.prepare.name is kind, from a test's package dir (root is the
// path up to the module, "../../../.."). A kind's test binary registers
// only its own kind, so the others' manifests are passed over before
// adapter.Load would refuse their preparer.
func ShippedFiles(t *testing.T, root, kind string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "adapters", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var peek struct {
			Runtime struct {
				Prepare struct {
					Name string `yaml:"name"`
				} `yaml:"prepare"`
			} `yaml:"runtime"`
		}
		if err := yaml.Unmarshal(b, &peek); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if peek.Runtime.Prepare.Name == kind {
			out = append(out, f)
		}
	}
	return out
}

// Shipped loads ShippedFiles.
func Shipped(t *testing.T, root, kind string) []*adapter.Manifest {
	t.Helper()
	var out []*adapter.Manifest
	for _, f := range ShippedFiles(t, root, kind) {
		m, err := adapter.Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, m)
	}
	return out
}
