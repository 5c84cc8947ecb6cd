package certify

import (
	"slices"
	"testing"

	"github.com/sandproof/sandproof/images"
	"github.com/sandproof/sandproof/runner/host/adapter"
)

// The manifest's vocabulary and certify's scenarios are the same names in
// the same order: a scenario added to one and not the other fails here.
func TestScenarioNamesMatchTheManifests(t *testing.T) {
	var names []string
	for _, s := range Scenarios {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, adapter.ScenarioNames) {
		t.Fatalf("certify's scenarios %v, the manifest's %v", names, adapter.ScenarioNames)
	}
}

// The challenge keeps the id it had before scenarios; the others add
// their name, and their case dirs differ from the challenge's.
func TestCaseIDKeepsTheChallenge(t *testing.T) {
	if got := CaseID("debian-12", "pi", ScenarioChallenge); got != "debian-12/pi" {
		t.Errorf("challenge id %q, want debian-12/pi", got)
	}
	if got := CaseID("debian-12", "pi", ScenarioTimeout); got != "debian-12/pi/timeout" {
		t.Errorf("timeout id %q, want debian-12/pi/timeout", got)
	}
	if caseDirName(CaseID("debian-12", "pi", "")) != "debian-12__pi" || caseDirName(CaseID("debian-12", "pi", "cancel")) != "debian-12__pi__cancel" {
		t.Error("case dir names changed")
	}
}

// Without --scenario a manifest with a scenarios key runs every scenario
// (with its own deadlines), one without runs the challenge; named
// scenarios run for every manifest. The matrix follows.
func TestScenariosFor(t *testing.T) {
	shipped := &adapter.Manifest{Name: "pi", Scenarios: map[string]adapter.ScenarioSpec{"timeout": {Deadline: 7}}}
	fixture := &adapter.Manifest{Name: "fake"}
	names := func(ss []Scenario) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return out
	}
	if got := names(scenariosFor(shipped, nil)); !slices.Equal(got, adapter.ScenarioNames) {
		t.Errorf("shipped default %v, want every scenario", got)
	}
	for _, s := range scenariosFor(shipped, nil) {
		if s.Name == ScenarioTimeout && s.Deadline != 7 {
			t.Errorf("timeout deadline %v, want the manifest's 7", s.Deadline)
		}
	}
	if got := names(scenariosFor(fixture, nil)); !slices.Equal(got, []string{ScenarioChallenge}) {
		t.Errorf("fixture default %v, want the challenge alone", got)
	}
	if got := names(scenariosFor(fixture, []string{"cancel", "timeout"})); !slices.Equal(got, []string{"timeout", "cancel"}) {
		t.Errorf("named %v, want timeout, cancel", got)
	}
	all := Shard{Index: 1, Total: 1}
	m := NewMatrix([]images.Image{{Name: "debian-12", Ref: "r"}}, []*adapter.Manifest{shipped, fixture}, nil)
	if len(m.Cases) != len(Scenarios)+1 || !m.Has(all, "debian-12/pi/borrowed") || !m.Has(all, "debian-12/fake") || m.Has(all, "debian-12/fake/timeout") {
		t.Errorf("matrix %+v", m.Cases)
	}
	unsupported := &adapter.Manifest{Name: "x", Scenarios: map[string]adapter.ScenarioSpec{"borrowed": {Unsupported: "no services"}}}
	b, _ := ScenarioByName(ScenarioBorrowed)
	if why := b.skipReason(unsupported, false); why != "scenario borrowed unsupported by adapter x: no services" {
		t.Errorf("skip reason %q", why)
	}
	tm, _ := ScenarioByName(ScenarioTimeout)
	if tm.skipReason(shipped, false) != "" || tm.skipReason(shipped, true) == "" {
		t.Error("timeout: skipped without a reason, or run against a real model")
	}
}
