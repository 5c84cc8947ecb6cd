package reports

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// ReportSchema is the value of the "schema" field of the JSON result tree.
const ReportSchema = "sandproof.report/v1"

// ErrDuplicateCase is wrapped when two records share run_id and case_id: one
// of them would otherwise be silently dropped or counted twice.
var ErrDuplicateCase = errors.New("duplicate case")

// Report is the result tree every renderer draws from: runs, their cases,
// and each case's checks (inside its evidence).
type Report struct {
	Schema string `json:"schema"`
	// Status is unknown when there are no runs at all.
	Status  Status   `json:"status"`
	Counts  Counts   `json:"counts"`
	Sources []string `json:"sources"`
	Runs    []*Run   `json:"runs"`
}

// Counts tallies cases by status.
type Counts struct {
	Cases   int `json:"cases"`
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
	Unknown int `json:"unknown"`
}

func (c *Counts) add(s Status) {
	c.Cases++
	switch s {
	case StatusPassed:
		c.Passed++
	case StatusFailed:
		c.Failed++
	case StatusSkipped:
		c.Skipped++
	default:
		c.Unknown++
	}
}

func (c *Counts) merge(o Counts) {
	c.Cases += o.Cases
	c.Passed += o.Passed
	c.Failed += o.Failed
	c.Skipped += o.Skipped
	c.Unknown += o.Unknown
}

// Status folds the counts into one status: nothing is unknown, any failure
// fails, any unknown case keeps the whole unknown, skipped cases do not fail
// anything, and a set of only skipped cases is skipped (nothing was proven).
func (c Counts) Status() Status {
	switch {
	case c.Cases == 0:
		return StatusUnknown
	case c.Failed > 0:
		return StatusFailed
	case c.Unknown > 0:
		return StatusUnknown
	case c.Passed == 0:
		return StatusSkipped
	}
	return StatusPassed
}

// PassRate is the share of the cases that ran (skipped ones do not count:
// they were not applicable) that passed; 0 when none ran.
func (c Counts) PassRate() float64 {
	ran := c.Cases - c.Skipped
	if ran <= 0 {
		return 0
	}
	return float64(c.Passed) / float64(ran)
}

// Run is the cases of one run_id and the image x harness matrix over them.
type Run struct {
	ID         string        `json:"run_id"`
	Status     Status        `json:"status"`
	Counts     Counts        `json:"counts"`
	Provenance RunProvenance `json:"provenance"`
	// Images (matrix rows) and Harnesses (columns) are in order of first
	// appearance in the evidence, which is the order certify ran them in.
	Images    []string `json:"images"`
	Harnesses []string `json:"harnesses"`
	// Scenarios are the run's scenarios (contract §7.6 scenarios),
	// challenge first, then in order of first appearance; nil when every
	// case is a challenge case (the matrix is image x harness, as before
	// scenarios). When set, every cell holds one sub-cell per scenario:
	// the image x harness x scenario matrix, a column group per harness.
	Scenarios []string `json:"scenarios,omitempty"`
	// Matrix[i][j] is the cell of Images[i] x Harnesses[j].
	Matrix [][]Cell `json:"matrix"`
	Cases  []*Case  `json:"cases"`

	imageRow    map[string]int
	harnessCol  map[string]int
	scenarioCol map[string]int
	seen        map[string]*Case
	prov        provenanceSets
	index       int // 1-based, for anchors
}

// NetworkFlag is what a report says beside the network mode "host": the
// harness was not sandboxed from the host's network.
const NetworkFlag = "the harness shared the host's network and could reach anything the host can"

// NetworkNote returns n, followed by NetworkFlag when n is "host".
func NetworkNote(n string) string {
	if n == "host" {
		return n + " (" + NetworkFlag + ")"
	}
	return n
}

// RunProvenance gathers the provenance of a run's records. A run should have
// one warden digest and one per adapter; more than one is shown, not hidden.
type RunProvenance struct {
	WardenSHA256 []string `json:"warden_sha256"`
	// AdapterSHA256 pairs each harness with its adapter digest.
	AdapterSHA256 []Digest `json:"adapter_sha256"`
	// Harnesses gives each harness's runtime provenance (package,
	// version, integrity, tree digest, CLI version), once per distinct
	// value; nil when no record carried one.
	Harnesses []HarnessDigest `json:"harnesses,omitempty"`
	// ImageIDs pairs each image with its image id.
	ImageIDs      []Digest `json:"image_ids"`
	SuiteVersions []string `json:"suite_versions"`
	Hosts         []string `json:"hosts"`
	// Networks lists the sandboxes' network modes ("none", "host"), and
	// Engines where they ran; a "host" is flagged wherever it is shown.
	Networks  []string  `json:"networks,omitempty"`
	Engines   []string  `json:"engines,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
}

// HarnessDigest pairs a harness with its runtime provenance.
type HarnessDigest struct {
	Name    string         `json:"name"`
	Runtime HarnessRuntime `json:"runtime"`
}

// Digest pairs a name (harness, image) with a digest.
type Digest struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type provenanceSets struct {
	seen map[string]bool
}

// once reports whether key is new, remembering it.
func (p *provenanceSets) once(key string) bool {
	if p.seen == nil {
		p.seen = make(map[string]bool)
	}
	if p.seen[key] {
		return false
	}
	p.seen[key] = true
	return true
}

// Cell is one image x harness square of the matrix. With a task set or
// scenarios it covers many cases; Anchor points at the one most worth
// reading.
type Cell struct {
	Image   string `json:"image"`
	Harness string `json:"harness"`
	// Scenario names a sub-cell's scenario; empty in a cell of the image x
	// harness matrix.
	Scenario string `json:"scenario,omitempty"`
	Status   Status `json:"status"`
	Counts   Counts `json:"counts"`
	// Label is the cell text: "pass 51 s", "fail 12 s", "skip", "unknown",
	// "fail 358/731 passed" for many cases, "none" for an empty cell.
	Label string `json:"label"`
	// Anchor is the case to link to; empty for an empty cell.
	Anchor string `json:"anchor,omitempty"`
	// Scenarios are the cell's sub-cells, one per Run.Scenarios entry in
	// that order; nil when the run has no scenario but challenge.
	Scenarios []Cell `json:"scenarios,omitempty"`
}

// Case is one image x harness x scenario [x task] case with its verdict.
type Case struct {
	ID      string `json:"case_id"`
	Name    string `json:"name"`
	Image   string `json:"image"`
	Harness string `json:"harness"`
	// Scenario is the case's scenario when it is not challenge; empty for
	// a challenge case (as in the evidence, where empty reads as
	// challenge), so a challenge case reads as it did before scenarios.
	Scenario string `json:"scenario,omitempty"`
	TaskID   string `json:"task_id,omitempty"`
	// Status is the report's verdict; RecordStatus is what the record said.
	Status       Status `json:"status"`
	RecordStatus Status `json:"record_status"`
	// Reasons explain a verdict that is not a plain pass: why the report
	// overrode the record, or why it cannot call the case passed.
	Reasons []string `json:"reasons,omitempty"`
	// Attempts counts the records of the case read; the case is its last
	// attempt (the highest attempt number).
	Attempts int       `json:"attempts"`
	Anchor   string    `json:"anchor"`
	Source   string    `json:"source"`
	Line     int       `json:"line"`
	Evidence *Evidence `json:"evidence"`
}

// Judge applies the status rules to one record and says why when the
// verdict is not a plain pass:
//   - a failed check fails the case whatever the record says;
//   - a record that says failed, skipped or unknown keeps that status;
//   - a record that says passed passes only with at least one passed check,
//     no unknown check, and its passed field true; with no checks it is
//     unknown, never passed.
func Judge(e *Evidence) (Status, []string) {
	var failed, unknown []string
	passed := 0
	for _, c := range e.Checks {
		switch c.Status {
		case StatusFailed:
			failed = append(failed, c.ID)
		case StatusUnknown:
			unknown = append(unknown, c.ID)
		case StatusPassed:
			passed++
		}
	}
	if len(failed) > 0 {
		if e.Status != StatusFailed {
			return StatusFailed, []string{fmt.Sprintf("record says %s, but failed check(s): %s", e.Status, strings.Join(failed, ", "))}
		}
		return StatusFailed, nil
	}
	switch e.Status {
	case StatusFailed:
		why := "record says failed"
		if e.ErrorType != nil {
			why += " (error_type " + *e.ErrorType + ")"
		}
		return StatusFailed, []string{why + " though no check failed"}
	case StatusSkipped:
		return StatusSkipped, nil
	case StatusUnknown:
		return StatusUnknown, []string{"record says unknown"}
	}
	switch {
	case len(e.Checks) == 0:
		return StatusUnknown, []string{"record says passed, but it has no checks"}
	case !e.Passed:
		return StatusFailed, []string{"record says passed, but its passed field is false"}
	case len(unknown) > 0:
		return StatusUnknown, []string{"check(s) with unknown status: " + strings.Join(unknown, ", ")}
	case passed == 0:
		return StatusUnknown, []string{"record says passed, but no check passed (all skipped)"}
	}
	return StatusPassed, nil
}

// Builder folds records into a Report. Records of one run may come from
// several files; the same (run_id, case_id) twice is rejected.
type Builder struct {
	runs    []*Run
	byID    map[string]*Run
	sources []string
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder {
	return &Builder{byID: make(map[string]*Run)}
}

// Add validates e and adds it as a case; source names where it came from
// (a file name) for error messages and the report.
func (b *Builder) Add(source string, e *Evidence) error {
	if err := e.Validate(); err != nil {
		return &LineError{File: source, Line: e.Line, Err: err}
	}
	r := b.byID[e.RunID]
	if r == nil {
		r = &Run{ID: e.RunID, imageRow: map[string]int{}, harnessCol: map[string]int{}, scenarioCol: map[string]int{}, seen: map[string]*Case{}, index: len(b.runs) + 1}
		b.byID[e.RunID] = r
		b.runs = append(b.runs, r)
	}
	first := r.seen[e.CaseID]
	if first != nil && first.Evidence.ScenarioName() != e.ScenarioName() {
		// Each scenario's case has an id of its own (§7.6 scenarios): a
		// later attempt of another scenario would replace a case it is not.
		return &LineError{File: source, Line: e.Line, Err: fmt.Errorf("%w: run_id %q case_id %q is recorded as scenario %s and as %s, first at %s:%d",
			ErrDuplicateCase, e.RunID, e.CaseID, first.Evidence.ScenarioName(), e.ScenarioName(), first.Source, first.Line)}
	}
	if first != nil {
		// A later attempt of the case (--resume ran it again) replaces
		// the earlier one in place; anything else is a duplicate.
		if e.AttemptNumber() == first.Evidence.AttemptNumber() {
			return &LineError{File: source, Line: e.Line, Err: fmt.Errorf("%w: run_id %q case_id %q attempt %d, first at %s:%d", ErrDuplicateCase, e.RunID, e.CaseID, e.AttemptNumber(), first.Source, first.Line)}
		}
		if e.AttemptNumber() < first.Evidence.AttemptNumber() {
			first.Attempts++
			return nil
		}
	}
	st, why := Judge(e)
	c := &Case{
		ID: e.CaseID, Name: caseName(e.Image, e.Harness, caseScenario(e), e.TaskID),
		Image: e.Image, Harness: e.Harness, Scenario: caseScenario(e), TaskID: e.TaskID,
		Status: st, RecordStatus: e.Status, Reasons: why, Attempts: 1,
		Anchor: fmt.Sprintf("r%d-c%d-%s", r.index, len(r.Cases)+1, slug(e.CaseID)),
		Source: source, Line: e.Line, Evidence: e,
	}
	if first != nil {
		c.Anchor, c.Attempts = first.Anchor, first.Attempts+1
		*first = *c
		r.addProvenance(e)
		return nil
	}
	r.seen[e.CaseID] = c
	r.Cases = append(r.Cases, c)
	if _, ok := r.imageRow[e.Image]; !ok {
		r.imageRow[e.Image] = len(r.Images)
		r.Images = append(r.Images, e.Image)
	}
	if _, ok := r.harnessCol[e.Harness]; !ok {
		r.harnessCol[e.Harness] = len(r.Harnesses)
		r.Harnesses = append(r.Harnesses, e.Harness)
	}
	if _, ok := r.scenarioCol[e.ScenarioName()]; !ok {
		r.scenarioCol[e.ScenarioName()] = len(r.scenarioCol)
	}
	r.addProvenance(e)
	return nil
}

// caseScenario is the scenario a Case names: empty for challenge.
func caseScenario(e *Evidence) string {
	if s := e.ScenarioName(); s != ScenarioChallenge {
		return s
	}
	return ""
}

// addHarness lists a harness's runtime once per distinct runtime and CLI
// version; a record without a version (a skipped case) adds nothing when
// the same runtime is listed, and a later version fills an entry without
// one.
func (r *Run) addHarness(name string, h *HarnessRuntime) {
	p := &r.Provenance
	same := func(o *HarnessRuntime) bool {
		return o.TreeSHA256 == h.TreeSHA256 && o.Integrity == h.Integrity && o.Package == h.Package && o.Version == h.Version
	}
	for i := range p.Harnesses {
		o := &p.Harnesses[i]
		if o.Name != name || !same(&o.Runtime) {
			continue
		}
		switch {
		case h.CLIVersion == "" && h.CLIVersionError == "", o.Runtime.CLIVersion == h.CLIVersion && o.Runtime.CLIVersionError == h.CLIVersionError:
			return
		case o.Runtime.CLIVersion == "" && o.Runtime.CLIVersionError == "":
			o.Runtime = *h
			return
		}
	}
	p.Harnesses = append(p.Harnesses, HarnessDigest{name, *h})
}

func (r *Run) addProvenance(e *Evidence) {
	p := &r.Provenance
	if e.WardenSHA256 != "" && r.prov.once("w\x00"+e.WardenSHA256) {
		p.WardenSHA256 = append(p.WardenSHA256, e.WardenSHA256)
	}
	if e.AdapterSHA256 != "" && r.prov.once("a\x00"+e.Harness+"\x00"+e.AdapterSHA256) {
		p.AdapterSHA256 = append(p.AdapterSHA256, Digest{e.Harness, e.AdapterSHA256})
	}
	if h := e.HarnessRuntime; h != nil {
		r.addHarness(e.Harness, h)
	}
	if e.ImageID != "" && r.prov.once("i\x00"+e.Image+"\x00"+e.ImageID) {
		p.ImageIDs = append(p.ImageIDs, Digest{e.Image, e.ImageID})
	}
	if e.SuiteVersion != "" && r.prov.once("v\x00"+e.SuiteVersion) {
		p.SuiteVersions = append(p.SuiteVersions, e.SuiteVersion)
	}
	if e.Host != "" && r.prov.once("h\x00"+e.Host) {
		p.Hosts = append(p.Hosts, e.Host)
	}
	if sb := e.Sandbox; sb != nil {
		if sb.Network != "" && r.prov.once("n\x00"+sb.Network) {
			p.Networks = append(p.Networks, sb.Network)
		}
		if sb.Engine != "" && r.prov.once("e\x00"+sb.Engine) {
			p.Engines = append(p.Engines, sb.Engine)
		}
	}
	if !e.StartedAt.IsZero() && (p.StartedAt.IsZero() || e.StartedAt.Before(p.StartedAt)) {
		p.StartedAt = e.StartedAt
	}
	end := e.EndedAt
	if end.IsZero() {
		end = e.StartedAt
	}
	if end.After(p.EndedAt) {
		p.EndedAt = end
	}
}

// Read adds every record of an evidence.jsonl stream; errors name source
// and the line.
func (b *Builder) Read(source string, r io.Reader) error {
	b.sources = append(b.sources, source)
	for e, err := range ReadEvidence(r) {
		if err != nil {
			var le *LineError
			if errors.As(err, &le) {
				le.File = source
			}
			return err
		}
		if err := b.Add(source, e); err != nil {
			return err
		}
	}
	return nil
}

// ReadFile adds every record of the evidence file at path.
func (b *Builder) ReadFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open evidence: %w", err)
	}
	defer f.Close()
	return b.Read(path, f)
}

// Report finishes the tree: statuses, counts and matrices. The Builder may
// be used again afterwards; the Report reflects what was added so far.
func (b *Builder) Report() *Report {
	rep := &Report{Schema: ReportSchema, Sources: b.sources, Runs: b.runs}
	if rep.Sources == nil {
		rep.Sources = []string{}
	}
	if rep.Runs == nil {
		rep.Runs = []*Run{}
	}
	for _, r := range b.runs {
		r.finish()
		rep.Counts.merge(r.Counts)
	}
	rep.Status = rep.Counts.Status()
	return rep
}

func (r *Run) finish() {
	r.Counts = Counts{}
	r.Scenarios = r.scenarioOrder()
	r.Matrix = make([][]Cell, len(r.Images))
	for i, img := range r.Images {
		r.Matrix[i] = make([]Cell, len(r.Harnesses))
		for j, h := range r.Harnesses {
			r.Matrix[i][j] = Cell{Image: img, Harness: h}
			for _, sc := range r.Scenarios {
				r.Matrix[i][j].Scenarios = append(r.Matrix[i][j].Scenarios, Cell{Image: img, Harness: h, Scenario: sc})
			}
		}
	}
	// worst remembers, per cell, the case its anchor points at: the first
	// failed case, else the first unknown, else the first case.
	worst := make(map[*Cell]*Case)
	tally := func(cell *Cell, c *Case) {
		cell.Counts.add(c.Status)
		if w := worst[cell]; w == nil || rank(c.Status) > rank(w.Status) {
			worst[cell] = c
		}
	}
	col := make(map[string]int, len(r.Scenarios))
	for k, sc := range r.Scenarios {
		col[sc] = k
	}
	for _, c := range r.Cases {
		r.Counts.add(c.Status)
		cell := &r.Matrix[r.imageRow[c.Image]][r.harnessCol[c.Harness]]
		tally(cell, c)
		if r.Scenarios != nil {
			tally(&cell.Scenarios[col[c.Evidence.ScenarioName()]], c)
		}
	}
	label := func(cell *Cell) {
		cell.Status = cell.Counts.Status()
		w := worst[cell]
		if w == nil {
			cell.Label = "none"
			return
		}
		cell.Anchor = w.Anchor
		cell.Label = cellLabel(cell, w)
	}
	for i := range r.Matrix {
		for j := range r.Matrix[i] {
			label(&r.Matrix[i][j])
			for k := range r.Matrix[i][j].Scenarios {
				label(&r.Matrix[i][j].Scenarios[k])
			}
		}
	}
	r.Status = r.Counts.Status()
}

// scenarioOrder lists the run's scenarios, challenge first and the others
// in order of first appearance; nil when challenge is the only one, so a
// run from before scenarios keeps its image x harness matrix.
func (r *Run) scenarioOrder() []string {
	if len(r.scenarioCol) == 0 {
		return nil
	}
	if _, only := r.scenarioCol[ScenarioChallenge]; only && len(r.scenarioCol) == 1 {
		return nil
	}
	out := make([]string, len(r.scenarioCol))
	for sc, k := range r.scenarioCol {
		out[k] = sc
	}
	slices.SortStableFunc(out, func(a, b string) int {
		return cmpBool(b == ScenarioChallenge, a == ScenarioChallenge)
	})
	return out
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// rank orders statuses by how much a reader needs to see them.
func rank(s Status) int {
	switch s {
	case StatusFailed:
		return 3
	case StatusUnknown:
		return 2
	case StatusPassed:
		return 1
	}
	return 0
}

// ShortStatus is the word a matrix cell uses for s.
func ShortStatus(s Status) string {
	switch s {
	case StatusPassed:
		return "pass"
	case StatusFailed:
		return "fail"
	case StatusSkipped:
		return "skip"
	}
	return "unknown"
}

func cellLabel(cell *Cell, only *Case) string {
	word := ShortStatus(cell.Status)
	if cell.Counts.Cases > 1 {
		return fmt.Sprintf("%s %d/%d passed", word, cell.Counts.Passed, cell.Counts.Cases)
	}
	switch cell.Status {
	case StatusPassed, StatusFailed:
		return fmt.Sprintf("%s %s", word, FormatSeconds(only.Evidence.Seconds))
	}
	return word
}

// FormatSeconds rounds to whole seconds the way the hand-made tables did
// ("51 s"), keeping one decimal under ten seconds so short cases do not all
// read "0 s".
func FormatSeconds(s float64) string {
	if s < 9.95 {
		return fmt.Sprintf("%.1f s", s)
	}
	return fmt.Sprintf("%.0f s", math.Round(s))
}

// caseName reads as the case's place in the matrix: image × harness,
// × scenario for every scenario but challenge (whose cases keep the name
// they had before scenarios), then · task.
func caseName(image, harness, scenario, task string) string {
	n := image + " × " + harness
	if scenario != "" {
		n += " × " + scenario
	}
	if task != "" {
		n += " · " + task
	}
	return n
}

// slug keeps an anchor readable and safe in any of the output formats.
func slug(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 48 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// ReadFiles builds the report of the evidence files at paths.
func ReadFiles(paths ...string) (*Report, error) {
	b := NewBuilder()
	for _, p := range paths {
		if err := b.ReadFile(p); err != nil {
			return nil, err
		}
	}
	return b.Report(), nil
}
