package main

import (
	"slices"
	"testing"

	"github.com/sandproof/sandproof/runner/testenv"
)

// wardenDeps are the only non-standard packages warden may link: its own
// and golang.org/x/sys. warden is uploaded into every image, must stay
// static and small, and must never pull in the host side (Docker clients,
// SQLite, reports) by an innocent-looking import.
var wardenDeps = []string{
	"github.com/sandproof/sandproof/cmd/warden",
	"github.com/sandproof/sandproof/runner/atomicfile",
	"github.com/sandproof/sandproof/runner/fds",
	"github.com/sandproof/sandproof/runner/harness",
	"github.com/sandproof/sandproof/runner/launch",
	"github.com/sandproof/sandproof/runner/mutant",
	"github.com/sandproof/sandproof/runner/proc",
	"github.com/sandproof/sandproof/runner/receipt",
	"github.com/sandproof/sandproof/runner/stop",
	"github.com/sandproof/sandproof/runner/supervisor",
	"github.com/sandproof/sandproof/runner/version",
	"github.com/sandproof/sandproof/runner/wardencli",
	"golang.org/x/sys/unix",
}

func TestWardenLinksOnlyItsOwnPackagesAndXSys(t *testing.T) {
	deps := testenv.NonStandardDeps(t, ".")
	// Positive control: the listing is real (it has warden itself and the
	// one outside module it is allowed).
	for _, must := range []string{"github.com/sandproof/sandproof/cmd/warden", "golang.org/x/sys/unix"} {
		if !slices.Contains(deps, must) {
			t.Fatalf("go list -deps does not list %s: %q", must, deps)
		}
	}
	for _, d := range deps {
		if !slices.Contains(wardenDeps, d) {
			t.Errorf("warden links %s: only its own packages and golang.org/x/sys may be (cmd/warden/deps_test.go says why)", d)
		}
	}
}
