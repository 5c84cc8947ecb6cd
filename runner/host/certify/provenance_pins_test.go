package certify

import (
	"context"
	"testing"

	"github.com/sandproof/sandproof/runner/host/adapter"
)

// The evidence's package, version and integrity are what the manifest's
// preparer says it pins (adapter.PreparerSpec.Pins), for any kind: certify
// names none. A preparer that pins nothing leaves them empty.
func TestRuntimeProvenanceRecordsThePreparersPins(t *testing.T) {
	adapter.Register("pins-test", adapter.PreparerSpec{
		Prepare: func(context.Context, adapter.PrepareRequest) error { return nil },
		Pins: func(with map[string]string) adapter.Pins {
			return adapter.Pins{Package: "pkg-" + with["p"], Version: with["v"], Integrity: "sha512-" + with["v"]}
		},
	})
	adapter.Register("no-pins-test", adapter.PreparerSpec{Prepare: func(context.Context, adapter.PrepareRequest) error { return nil }})
	with := map[string]string{"p": "tool", "v": "1.2.3", "package": "not-this", "version": "0"}
	for name, want := range map[string][3]string{"pins-test": {"pkg-tool", "1.2.3", "sha512-1.2.3"}, "no-pins-test": {}} {
		m := &adapter.Manifest{}
		m.Runtime.Prepare = &adapter.Prepare{Name: name, With: with}
		h, err := runtimeProvenance(m, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := [3]string{h.Package, h.Version, h.Integrity}; got != want || h.Preparer != name {
			t.Errorf("%s: harness_runtime package, version, integrity %q (preparer %q), want %q", name, got, h.Preparer, want)
		}
	}
}
