package certify

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/model"
	"github.com/sandproof/sandproof/runner/warden/receipt"
)

// The scenarios (contract §7.6 scenarios; docs/certify.md gives each
// one's checks), by the names adapter.ScenarioNames lists.
const (
	ScenarioChallenge = reports.ScenarioChallenge
	ScenarioTimeout   = "timeout"
	ScenarioCancel    = "cancel"
	ScenarioModel429  = "model-429"
	ScenarioModel400  = "model-400"
	ScenarioBorrowed  = "borrowed"
)

const clauseScenario = "§7.6 scenarios"

// ownerAction is what the owner does in a scenario beyond the protocol.
type ownerAction int

const (
	ownerNothing ownerAction = iota
	// ownerCancel closes the session while the model stalls (as an
	// environment server closes before verification).
	ownerCancel
	// ownerBorrowed starts a task service and task state of the owner's
	// own before the launch, outside the harness's tree, and checks both
	// after close.
	ownerBorrowed
)

// Scenario is one flow of the scripted model plus the checks that judge
// it: a case is image x adapter x scenario.
type Scenario struct {
	Name string
	// Script is the scripted model's script for the case.
	Script model.Script
	// Owner is what the owner does beyond the protocol.
	Owner ownerAction
	// Deadline is the launch's deadline in seconds, short where the
	// scenario waits for it; 0 keeps the manifest's launch.deadline. A
	// manifest's scenarios.NAME.deadline replaces it.
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
}

// stopDeadline is the launch deadline of timeout: long enough for a
// harness to start, read the challenge and run the writer on a loaded
// machine (at 20 s, Pi, OpenCode and Kilo made no model call before it
// in a run of three cases at once on a shared two-core host), short
// enough to keep the matrix small.
const stopDeadline = 40

// cancelDeadline bounds cancel's launch: the owner closes the session as
// soon as the model stalls, long before it.
const cancelDeadline = 120

// Scenarios are every scenario, in adapter.ScenarioNames' order.
var Scenarios = []Scenario{
	{Name: ScenarioChallenge},
	{Name: ScenarioTimeout, Script: model.Script{Flow: model.FlowWriterStall}, Writer: true, Deadline: stopDeadline,
		Cause: receipt.CauseDeadline, NoDeliverable: true},
	{Name: ScenarioCancel, Script: model.Script{Flow: model.FlowWriterStall}, Writer: true, Owner: ownerCancel, Deadline: cancelDeadline,
		Cause: receipt.CauseStopped, NoDeliverable: true},
	{Name: ScenarioModel429, Script: model.Script{Fault: model.Fault429, On: model.TargetTask, Only: []int{1}}, Fault: model.Fault429, NoDeliverable: true},
	{Name: ScenarioModel400, Script: model.Script{Fault: model.Fault400, On: model.TargetResult, Only: []int{1}}, Fault: model.Fault400, NoDeliverable: true},
	{Name: ScenarioBorrowed, Owner: ownerBorrowed},
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
func scenarioNames() string {
	names := make([]string, len(Scenarios))
	for i, s := range Scenarios {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
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
func (s Scenario) paths() []string {
	var out []string
	if s.Writer {
		out = append(out, writerFile)
	}
	if s.Owner == ownerBorrowed {
		out = append(out, borrowedState)
	}
	return out
}

// detailUIDs are the uids whose processes verify's snapshot gives with
// their detail, for the scenario's witnesses: the borrowed service's.
func (s Scenario) detailUIDs(taskUID int) []int {
	if s.Owner == ownerBorrowed {
		return []int{serviceUID(taskUID)}
	}
	return nil
}

// launchDeadline is the activation's deadline: the scenario's, else the
// manifest's launch.deadline.
func (s Scenario) launchDeadline(m *adapter.Manifest) float64 {
	if s.Deadline > 0 {
		return s.Deadline
	}
	return m.Launch.Deadline
}
