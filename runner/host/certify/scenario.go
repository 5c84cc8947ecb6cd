package certify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/model"
)

// The scenarios (contract §7.6 scenarios; docs/certify.md gives each
// one's checks) are each a file, scenario_NAME.go, that holds the name,
// the scenario's data and the owner's part that only it has, and
// registers it (register): nothing else spells a scenario's name
// (runner/onehome_test.go).

const clauseScenario = "§7.6 scenarios"

// Scenario is one flow of the scripted model plus the checks that judge
// it: a case is image x adapter x scenario.
type Scenario struct {
	Name string
	// Order is the scenario's place in a run (and in --help): cases run
	// by it, lowest first.
	Order int
	// Script is the scripted model's script for the case.
	Script model.Script
	// ClosesAtStall says the owner closes the session as soon as the model
	// stalls (as an environment server closes before verification),
	// instead of waiting for the launch's deadline: the stop's receipt then
	// has timed_out false.
	ClosesAtStall bool
	// Deadline is the launch's deadline in seconds; 0 keeps the
	// manifest's launch.deadline. A manifest's scenarios.NAME.deadline
	// replaces it. In a writer scenario it is a ceiling on reaching the
	// stall: the owner stops the launch a fixed time after the stall
	// (stallStop).
	Deadline float64
	// Writer says the model has the harness's shell tool start the
	// detached writer (model.WriterCommand) before it stalls.
	Writer bool
	// Cause is the activation receipt's cause the scenario expects
	// (receipt.CauseDeadline, receipt.CauseStopped); "" means the harness
	// ends by itself.
	Cause string
	// NoDeliverable says the harness need not write the deliverable: the
	// stop scenarios judge the stop instead, the model-fault ones accept a
	// non-zero exit filed as a model error (scenario.model_fault). The
	// zero Scenario judges the deliverable, as the challenge does.
	NoDeliverable bool
	// Fault is the model fault the scenario's script answers (model-429,
	// model-400); FaultNone for the others.
	Fault model.Fault

	// The scenario's own owner steps, which the case's stages call
	// without knowing which scenario it is; nil is nothing.
	//
	// beforeSeed runs after setup, before the seed (borrowed starts its
	// service and state); an error stops the case (its check recorded).
	beforeSeed func(cr *caseRun, ctx context.Context, bx sandboxed) (sandboxed, error)
	// reads are the files the scenario's checks read after close (verify's
	// snapshot reads them as markers) and the uids whose processes that
	// snapshot details.
	reads func(taskUID int) (paths []string, uids []int)
	// verify adds the scenario's checks after verify's own, reading what
	// they need before teardown.
	verify func(cr *caseRun, ctx context.Context, in scenarioInput) error
}

// scenarioInput is what a scenario's verify reads: the model side, the
// sandbox, the activation and what verify found.
type scenarioInput struct {
	ms  modelSide
	bx  sandboxed
	act activationResult
	v   verified
}

// Scenarios are every registered scenario, in their run order (Order).
var Scenarios []Scenario

// register adds s to Scenarios, from its file's init. A name or an order
// given twice, or an empty name, is a programming error and panics;
// Scenarios stays sorted by Order, so the files' init order (their
// names') decides nothing.
func register(s Scenario) {
	if s.Name == "" || slices.ContainsFunc(Scenarios, func(o Scenario) bool { return o.Name == s.Name || o.Order == s.Order }) {
		panic(fmt.Sprintf("certify: scenario %q (order %d): no name, or its name or order registered twice", s.Name, s.Order))
	}
	Scenarios = append(Scenarios, s)
	slices.SortFunc(Scenarios, func(a, b Scenario) int { return a.Order - b.Order })
}

// ScenarioNames are the registered scenarios' names, in run order.
func ScenarioNames() []string {
	names := make([]string, len(Scenarios))
	for i, s := range Scenarios {
		names[i] = s.Name
	}
	return names
}

// ScenarioByName is the scenario of that name.
func ScenarioByName(name string) (Scenario, bool) {
	i := slices.IndexFunc(Scenarios, func(s Scenario) bool { return s.Name == name })
	if i < 0 {
		return Scenario{}, false
	}
	return Scenarios[i], true
}

// scenarioNames lists the scenarios' names, for errors and help.
func scenarioNames() string { return strings.Join(ScenarioNames(), ", ") }

// CheckManifestScenarios refuses a manifest whose scenarios key names a
// scenario certify does not have, as the manifest's own parser refuses an
// unknown key (adapter.ErrInvalid; FILE:LINE: unknown key "NAME" in
// scenarios (known: ...), the known names sorted): the parser takes any
// name, since the scenarios are this package's.
func CheckManifestScenarios(m *adapter.Manifest) error {
	known := slices.Sorted(slices.Values(ScenarioNames()))
	var errs []error
	for name, sp := range m.Scenarios {
		if _, ok := ScenarioByName(name); !ok {
			errs = append(errs, fmt.Errorf("%s:%d: unknown key %q in scenarios (known: %s)", m.Path, sp.Line, name, strings.Join(known, ", ")))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return fmt.Errorf("%w:\n%w", adapter.ErrInvalid, errors.Join(errs...))
}

// CaseID names the case of an image, an adapter and a scenario: the
// challenge keeps the id it had before scenarios (IMAGE/ADAPTER), so its
// histories continue; every other is IMAGE/ADAPTER/SCENARIO (contract
// §7.6 scenarios).
func CaseID(image, adapterName, scenario string) string {
	if scenario == "" || scenario == ScenarioChallenge {
		return image + "/" + adapterName
	}
	return image + "/" + adapterName + "/" + scenario
}

// checkScenarios refuses a --scenario that names no scenario, or one
// given twice.
func checkScenarios(names []string) error {
	seen := map[string]bool{}
	for _, n := range names {
		if _, ok := ScenarioByName(n); !ok {
			return badValue("--scenario", n, "one of "+scenarioNames())
		}
		if seen[n] {
			return &UsageError{Flag: "--scenario", Value: n, Reason: fmt.Sprintf("%q given twice", n)}
		}
		seen[n] = true
	}
	return nil
}

// scenariosFor are the scenarios an adapter's cases run: those named
// (Options.Scenarios) when any are; else every scenario for a manifest
// with a scenarios key (every shipped adapter has one), and the
// challenge alone for one without (the fixtures: each is a fake built
// for one rule of the challenge, docs/certify.md scenarios).
func scenariosFor(m *adapter.Manifest, named []string) []Scenario {
	var out []Scenario
	for _, s := range Scenarios {
		switch {
		case len(named) > 0 && !slices.Contains(named, s.Name):
			continue
		case len(named) == 0 && m.Scenarios == nil && s.Name != ScenarioChallenge:
			continue
		}
		out = append(out, s.forManifest(m))
	}
	return out
}

// forManifest is s with the manifest's own deadline for it.
func (s Scenario) forManifest(m *adapter.Manifest) Scenario {
	if sp, ok := m.Scenarios[s.Name]; ok && sp.Deadline > 0 {
		s.Deadline = sp.Deadline
	}
	return s
}

// unsupported is why the manifest says its harness cannot run s ("" when
// it can).
func (s Scenario) unsupported(m *adapter.Manifest) string {
	if sp, ok := m.Scenarios[s.Name]; ok && sp.Unsupported != "" {
		return fmt.Sprintf("scenario %s unsupported by adapter %s: %s", s.Name, m.Name, sp.Unsupported)
	}
	return ""
}

// skipReason is why a case of s cannot run: the manifest marks it
// unsupported, or the run's model is a real one (realModel), which no
// scenario but the challenge can script. "" runs it.
func (s Scenario) skipReason(m *adapter.Manifest, realModel bool) string {
	if why := s.unsupported(m); why != "" {
		return why
	}
	if realModel && s.Name != ScenarioChallenge {
		return fmt.Sprintf("scenario %s needs the scripted model (--model names a real one)", s.Name)
	}
	return ""
}

// paths are the files the scenario's checks read after close.
func (s Scenario) paths(taskUID int) []string {
	if s.reads == nil {
		return nil
	}
	paths, _ := s.reads(taskUID)
	return paths
}

// detailUIDs are the uids whose processes verify's snapshot gives with
// their detail, for the scenario's witnesses (borrowed's service's).
func (s Scenario) detailUIDs(taskUID int) []int {
	if s.reads == nil {
		return nil
	}
	_, uids := s.reads(taskUID)
	return uids
}

// launchDeadline is the activation's deadline: the scenario's, else the
// manifest's launch.deadline.
func (s Scenario) launchDeadline(m *adapter.Manifest) float64 {
	if s.Deadline > 0 {
		return s.Deadline
	}
	return m.Launch.Deadline
}
