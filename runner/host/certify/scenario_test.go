package certify

import (
	// The python kind's manifests are in adapters/ too.
	_ "github.com/sandproof/sandproof/runner/host/runtimes/python"

	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/images"
	"github.com/sandproof/sandproof/runner/host/session"
	"github.com/sandproof/sandproof/runner/warden/receipt"
)

// The registry holds every scenario once, in its run order: the names
// and orders unique, the challenge first (a manifest without a scenarios
// key runs it alone), and register refuses a name or an order given
// twice.
func TestScenarioRegistry(t *testing.T) {
	want := []string{ScenarioChallenge, ScenarioTimeout, ScenarioCancel, ScenarioModel429, ScenarioModel400, ScenarioBorrowed}
	if got := ScenarioNames(); !slices.Equal(got, want) {
		t.Fatalf("ScenarioNames() = %q, want %q", got, want)
	}
	for i := 1; i < len(Scenarios); i++ {
		if Scenarios[i-1].Order >= Scenarios[i].Order {
			t.Errorf("scenarios %s and %s out of order (%d, %d)", Scenarios[i-1].Name, Scenarios[i].Name, Scenarios[i-1].Order, Scenarios[i].Order)
		}
	}
	was := slices.Clone(Scenarios)
	defer func() { Scenarios = was }()
	for _, bad := range []Scenario{{Name: ScenarioCancel, Order: 999}, {Name: "new", Order: Scenarios[0].Order}, {Order: 998}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("register(%q, order %d) did not panic", bad.Name, bad.Order)
				}
			}()
			register(bad)
		}()
	}
	register(Scenario{Name: "new", Order: 15})
	if got := ScenarioNames(); got[1] != "new" || len(got) != len(want)+1 {
		t.Errorf("a scenario of order 15 registered: %q; want it second", got)
	}
}

// A manifest's scenarios key takes any name at parse time (the names are
// certify's); certify refuses one it does not have, worded as the parser
// words an unknown key, with the line.
func TestCheckManifestScenarios(t *testing.T) {
	const good = "name: x\nversion: \"1\"\nlaunch:\n  argv: [x]\n  deadline: 60\n"
	parse := func(doc string) *adapter.Manifest {
		t.Helper()
		m, err := adapter.Parse("x.yaml", t.TempDir(), []byte(doc))
		if err != nil {
			t.Fatalf("parse: %v", err)
		}
		return m
	}
	m := parse(good + "scenarios:\n  timeout: {deadline: 20}\n  tiemout: {}\n  cancel:\n")
	err := CheckManifestScenarios(m)
	want := `x.yaml:8: unknown key "tiemout" in scenarios (known: borrowed, cancel, challenge, model-400, model-429, timeout)`
	if !errors.Is(err, adapter.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckManifestScenarios: %v; want adapter.ErrInvalid and %q", err, want)
	}
	// Positive control: the same manifest with the names certify has.
	if err := CheckManifestScenarios(parse(good + "scenarios:\n  timeout: {deadline: 20}\n  cancel:\n")); err != nil {
		t.Errorf("known names refused: %v", err)
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
	if got := names(scenariosFor(shipped, nil)); !slices.Equal(got, ScenarioNames()) {
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

// Every shipped manifest (adapters/) runs every scenario by default, each
// under a deadline: without a scenarios key a real harness would run its
// challenge alone (the fixtures' way), its stop and fault handling never
// judged and no report saying so (OpenClaw's manifest shipped that way).
func TestShippedManifestsRunEveryScenario(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "adapters", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no manifest in adapters/")
	}
	for _, f := range files {
		m, err := adapter.Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		var got []string
		for _, s := range scenariosFor(m, nil) {
			got = append(got, s.Name)
			if s.launchDeadline(m) <= 0 {
				t.Errorf("%s: scenario %s has no deadline", f, s.Name)
			}
		}
		if !slices.Equal(got, ScenarioNames()) {
			t.Errorf("%s: runs %v by default, want every scenario %v (a scenarios key: docs/adapters.md scenarios)", f, got, ScenarioNames())
		}
	}
}

// A cancelled activation has no receipt of its own (the owner ended its
// wait); its harness time is the receipt close recorded, so the case's
// overhead is not the harness's whole run. One that came back keeps its
// own; a launch that never ran has none.
func TestHarnessSecondsFromClose(t *testing.T) {
	closed := &session.CloseResult{Receipts: map[string]*receipt.Receipt{
		activation: {StartedAt: "2026-12-02T14:12:00Z", EndedAt: "2026-12-02T14:12:30.5Z"},
	}}
	if got := harnessSeconds(0, true, closed); got != 30.5 {
		t.Errorf("cancelled: harness %v s, want close's receipt's 30.5", got)
	}
	if got := harnessSeconds(12, true, closed); got != 12 {
		t.Errorf("returned: harness %v s, want the activation's own 12", got)
	}
	if got := harnessSeconds(0, false, closed); got != 0 {
		t.Errorf("never launched: harness %v s, want 0", got)
	}
	if got := harnessSeconds(0, true, &session.CloseResult{}); got != 0 {
		t.Errorf("no receipt at close: harness %v s, want 0", got)
	}
}
