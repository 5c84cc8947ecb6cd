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

// A path requirement is looked for as that file, by the probe's --present,
// and is missing exactly when the probe did not find it.
func TestPathRequirementIsLookedFor(t *testing.T) {
	o := ownerPathsFor(Options{TaskHome: "/home/task"}, []string{"bash", "/bin/bash"})
	if !slices.Contains(o.reqPaths, "/bin/bash") {
		t.Fatalf("reqPaths %q: the path requirement is not looked for", o.reqPaths)
	}
	missing := missingRequirements([]string{"/bin/bash"}, probe.Snapshot{}, false)
	if len(missing) != 1 || missing[0] != "/bin/bash (no such file in the image)" {
		t.Errorf("on an empty image: missing %q", missing)
	}
	there := probe.Snapshot{Present: []probe.Marker{{Path: "/bin/bash"}}}
	if missing := missingRequirements([]string{"/bin/bash"}, there, false); len(missing) != 0 {
		t.Errorf("with /bin/bash present: missing %q", missing)
	}
	gone := probe.Snapshot{Present: []probe.Marker{{Path: "/bin/bash", Missing: true}}}
	if missing := missingRequirements([]string{"/bin/bash"}, gone, false); len(missing) != 1 {
		t.Errorf("with /bin/bash missing: missing %q", missing)
	}
}
