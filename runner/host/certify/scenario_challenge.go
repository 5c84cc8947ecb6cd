package certify

import "github.com/sandproof/sandproof/reports"

// ScenarioChallenge is the challenge (contract §7.6 scenarios): the harness
// reads the challenge file, asks the model, and writes the deliverable the
// model derives from it; verify's and the proof's checks judge it. Its name
// is the evidence's default (a record written before scenarios means it)
// and its case keeps the id it had before scenarios (CaseID). A manifest
// without a scenarios key runs it alone.
const ScenarioChallenge = reports.ScenarioChallenge

func init() { register(Scenario{Name: ScenarioChallenge, Order: 10}) }
