package certify

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/probe"
)

// Every requirement a manifest may declare (adapter.Requirements) is one
// certify knows how to look for in an image, and certify looks for none a
// manifest cannot declare: against an empty image each is missing, with
// what was looked for.
func TestEveryRequirementIsLookedFor(t *testing.T) {
	for _, q := range adapter.Requirements {
		missing := missingRequirements([]string{q}, probe.Snapshot{}, false)
		if len(missing) != 1 || !strings.HasPrefix(missing[0], q+" (") || strings.HasSuffix(missing[0], "(none of )") {
			t.Errorf("requirement %q on an empty image: missing %q, want one entry saying what was looked for", q, missing)
		}
	}
	for q := range requirementPaths {
		if !slices.Contains(adapter.Requirements, q) {
			t.Errorf("requirementPaths has %q, which adapter.Requirements does not list (no manifest can declare it)", q)
		}
	}
}
