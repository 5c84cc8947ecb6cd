package main

// The runtime kinds the product links: each registers its preparer from
// init (runtimes.Register), so the manifests naming it load. A new kind
// is one line here (docs/add-runtime-kind.md).
import (
	_ "github.com/sandproof/sandproof/runner/host/runtimes/npm"
	_ "github.com/sandproof/sandproof/runner/host/runtimes/python"
)
