package reports

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

// The scenario rules of the reports (contract §7.6 scenarios, §9 reports):
// testdata/scenarios.jsonl is a run of 2 images x 2 adapters x 4
// scenarios, pi's model-429 unsupported by its manifest (a skipped case
// with its reason), alpine-class x opencode x timeout failed.

const unsupportedReason = "scenario model-429 unsupported by the manifest"

func scenarioReport(t testing.TB) *Report {
	t.Helper()
	return mustReport(t, "testdata/scenarios.jsonl")
}

func TestGoldenScenarios(t *testing.T) {
	rep := scenarioReport(t)
	for _, r := range []struct {
		golden string
		render func(io.Writer, *Report) error
	}{
		{"scenarios.md.golden", WriteMarkdown},
		{"scenarios.html.golden", WriteHTML},
		{"scenarios.junit.xml.golden", WriteJUnit},
		{"scenarios.json.golden", WriteJSON},
	} {
		t.Run(r.golden, func(t *testing.T) {
			var buf bytes.Buffer
			if err := r.render(&buf, rep); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, r.golden, buf.Bytes())
		})
	}
}

func caseByID(t testing.TB, rep *Report, id string) *Case {
	t.Helper()
	for _, r := range rep.Runs {
		for _, c := range r.Cases {
			if c.ID == id {
				return c
			}
		}
	}
	t.Fatalf("no case %q", id)
	return nil
}

// The matrix is image x harness x scenario: challenge first, each cell's
// sub-cells one per scenario; a run of challenge cases only keeps its
// image x harness matrix.
func TestScenarioMatrix(t *testing.T) {
	r := scenarioReport(t).Runs[0]
	if want := []string{"challenge", "timeout", "cancel", "model-429"}; !slices.Equal(r.Scenarios, want) {
		t.Fatalf("scenarios %q, want %q", r.Scenarios, want)
	}
	alpine := slices.Index(r.Images, "alpine-class")
	opencode := slices.Index(r.Harnesses, "opencode")
	pi := slices.Index(r.Harnesses, "pi")
	cell := r.Matrix[alpine][opencode]
	if len(cell.Scenarios) != 4 {
		t.Fatalf("alpine-class x opencode: %d sub-cells, want 4", len(cell.Scenarios))
	}
	var got []string
	for _, sc := range cell.Scenarios {
		got = append(got, sc.Scenario+"="+string(sc.Status))
	}
	if want := "challenge=passed timeout=failed cancel=passed model-429=passed"; strings.Join(got, " ") != want {
		t.Errorf("alpine-class x opencode sub-cells %q, want %q", strings.Join(got, " "), want)
	}
	if cell.Status != StatusFailed || cell.Counts.Cases != 4 || cell.Anchor != cell.Scenarios[1].Anchor || cell.Anchor == "" {
		t.Errorf("alpine-class x opencode cell %s over %d cases, anchor %q", cell.Status, cell.Counts.Cases, cell.Anchor)
	}
	if sc := r.Matrix[alpine][pi].Scenarios[3]; sc.Status != StatusSkipped || sc.Label != "skip" {
		t.Errorf("alpine-class x pi x model-429: %s %q, want skipped", sc.Status, sc.Label)
	}
	// Challenge leads even when another scenario's case was written
	// first (cases end in any order when they run in parallel).
	b := NewBuilder()
	cases := scenarioReport(t).Runs[0].Cases
	for i := len(cases) - 1; i >= 0; i-- {
		if err := b.Add("reversed.jsonl", cases[i].Evidence); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := b.Report().Runs[0].Scenarios, []string{"challenge", "model-429", "cancel", "timeout"}; !slices.Equal(got, want) {
		t.Errorf("reversed evidence: scenarios %q, want %q", got, want)
	}
	for _, run := range mustReport(t, "testdata/smoke.jsonl").Runs {
		if run.Scenarios != nil || run.Matrix[0][0].Scenarios != nil {
			t.Errorf("challenge-only run %s: scenarios %q, sub-cells %v", run.ID, run.Scenarios, run.Matrix[0][0].Scenarios)
		}
	}
}

// Names: a challenge case keeps its name and JUnit name; every other
// scenario's case names it, and the JUnit names of one suite are unique.
func TestScenarioNames(t *testing.T) {
	rep := scenarioReport(t)
	for id, want := range map[string][2]string{
		"debian-12/pi":                 {"debian-12 × pi", "pi"},
		"debian-12/pi/timeout":         {"debian-12 × pi × timeout", "pi/timeout"},
		"alpine-class/opencode/cancel": {"alpine-class × opencode × cancel", "opencode/cancel"},
	} {
		c := caseByID(t, rep, id)
		if c.Name != want[0] || JUnitName(c) != want[1] {
			t.Errorf("%s: name %q junit %q, want %q %q", id, c.Name, JUnitName(c), want[0], want[1])
		}
	}
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, rep); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	tests := 0
	for _, s := range doc.Suites {
		seen := map[string]bool{}
		for _, tc := range s.Cases {
			if seen[tc.Classname+"\x00"+tc.Name] {
				t.Errorf("suite %s: testcase %s twice", s.Name, tc.Name)
			}
			seen[tc.Classname+"\x00"+tc.Name] = true
			tests++
		}
	}
	if tests != 16 {
		t.Errorf("%d testcases, want 16", tests)
	}
}

// oldChallengeRun is the scenario run's challenge records as a run before
// scenarios wrote them: no scenario field, other run id.
func oldChallengeRun(t *testing.T) *Report {
	t.Helper()
	b := NewBuilder()
	rep := scenarioReport(t)
	for _, c := range rep.Runs[0].Cases {
		if c.Evidence.ScenarioName() != ScenarioChallenge {
			continue
		}
		e := *c.Evidence
		e.RunID, e.Scenario = "before-scenarios", ""
		if err := b.Add("old.jsonl", &e); err != nil {
			t.Fatal(err)
		}
	}
	return b.Report()
}

// An old evidence file (challenge cases, no scenario field) diffs cleanly
// against a new one: its cases pair with the challenge cases, the other
// scenarios' cases are new, nothing is missing or regressed.
func TestScenarioDiffIdentity(t *testing.T) {
	old, new := oldChallengeRun(t), scenarioReport(t)
	d, err := Diff(old, new)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Missing) != 0 || len(d.Regressions) != 0 || d.Unchanged != 4 || len(d.Added) != 12 {
		t.Fatalf("old -> new: %d missing, %d regressions, %d unchanged, %d added; want 0, 0, 4, 12", len(d.Missing), len(d.Regressions), d.Unchanged, len(d.Added))
	}
	for _, a := range d.Added {
		if a.Scenario == "" {
			t.Errorf("added %s without its scenario", a.Name)
		}
	}
	// A record that names challenge outright pairs with one that does
	// not name it.
	named := NewBuilder()
	for _, c := range old.Runs[0].Cases {
		e := *c.Evidence
		e.Scenario = ScenarioChallenge
		if err := named.Add("named.jsonl", &e); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := Diff(old, named.Report()); err != nil || d.Unchanged != 4 || len(d.Added)+len(d.Missing) != 0 {
		t.Fatalf("scenario \"\" vs \"challenge\": err %v, diff %+v", err, d)
	}
}

// The scenario is part of a case's diff identity: a regression in one
// scenario is that scenario's, not its challenge case's.
func TestScenarioDiffPairsByScenario(t *testing.T) {
	new := scenarioReport(t)
	b := NewBuilder()
	for _, c := range new.Runs[0].Cases {
		e := *c.Evidence
		e.RunID = "earlier"
		if c.ID == "alpine-class/opencode/timeout" || c.ID == "debian-12/pi/model-429" {
			e = *okEvidence("earlier", c.ID, c.Image, c.Harness)
			e.Scenario = c.Evidence.Scenario
		}
		if err := b.Add("earlier.jsonl", &e); err != nil {
			t.Fatal(err)
		}
	}
	d, err := Diff(b.Report(), new)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range d.Regressions {
		got = append(got, r.Name+"="+string(r.New))
	}
	slices.Sort(got)
	want := []string{"alpine-class × opencode × timeout=failed", "debian-12 × pi × model-429=skipped"}
	if !slices.Equal(got, want) {
		t.Fatalf("regressions %q, want %q", got, want)
	}
}

// A scenario the manifest marks unsupported is a skipped case whose reason
// every report shows: md, html, JUnit, JSON, and the diff that lists it.
func TestScenarioUnsupportedReasonInEveryReport(t *testing.T) {
	rep := scenarioReport(t)
	for _, r := range []struct {
		name   string
		render func(io.Writer, *Report) error
	}{{"md", WriteMarkdown}, {"html", WriteHTML}, {"junit", WriteJUnit}, {"json", WriteJSON}} {
		var buf bytes.Buffer
		if err := r.render(&buf, rep); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(buf.String(), unsupportedReason); n < 2 {
			t.Errorf("%s: the unsupported reason appears %d time(s), want one per skipped case (2)", r.name, n)
		}
	}
	b := NewBuilder()
	for _, c := range rep.Runs[0].Cases {
		e := *c.Evidence
		if c.Status == StatusSkipped {
			e = *okEvidence(e.RunID, c.ID, c.Image, c.Harness)
			e.Scenario = c.Evidence.Scenario
		}
		if err := b.Add("passed.jsonl", &e); err != nil {
			t.Fatal(err)
		}
	}
	d, err := Diff(b.Report(), rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name  string
		write func(io.Writer, *DiffResult) error
	}{{"diff text", WriteDiff}, {"diff md", WriteDiffMarkdown}, {"diff json", WriteDiffJSON}} {
		var buf bytes.Buffer
		if err := w.write(&buf, d); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(buf.String(), unsupportedReason); n != 2 {
			t.Errorf("%s: the unsupported reason appears %d time(s), want 2 (one per regressed case)\n%s", w.name, n, buf.String())
		}
	}
}

// The stage bars mark where the launch deadline fell (timeout) and where
// the owner's close began (cancel); a challenge case has no mark.
func TestScenarioTimelineMarks(t *testing.T) {
	rep := scenarioReport(t)
	marks := func(id string) []timelineMark { return newTimeline(caseByID(t, rep, id).Evidence).Marks }
	tm := marks("debian-12/pi/timeout")
	if len(tm) != 2 || tm[0].Label != "deadline" || tm[1].Label != "close" {
		t.Fatalf("timeout marks %+v, want deadline then close", tm)
	}
	// The stages span 39.5 s from setup's start; the launch started 24.3 s
	// in (the receipt's started_at) and its deadline is 8 s.
	e := caseByID(t, rep, "debian-12/pi/timeout").Evidence
	tl := newTimeline(e)
	wantX := round1(tlLabelWidth + (24.3+8)*tlChartWidth/tl.Total)
	if tm[0].X != wantX {
		t.Errorf("deadline mark at x %v, want %v (total %v s)", tm[0].X, wantX, tl.Total)
	}
	closeX := round1(tlLabelWidth + 33.4*tlChartWidth/tl.Total)
	if tm[1].X != closeX {
		t.Errorf("close mark at x %v, want %v", tm[1].X, closeX)
	}
	cm := marks("debian-12/pi/cancel")
	if len(cm) != 1 || cm[0].Label != "close" {
		t.Errorf("cancel marks %+v, want the close only (its 60 s deadline is past the case's end)", cm)
	}
	if ch := marks("debian-12/pi"); len(ch) != 0 {
		t.Errorf("challenge marks %+v, want none", ch)
	}
	// Without a receipt's started_at the deadline counts from the
	// activation stage's start.
	noRC := *e
	noRC.ActivationReceipt = &Receipt{CleanupConfirmed: true}
	if m := newTimeline(&noRC).Marks; len(m) == 0 || m[0].X != round1(tlLabelWidth+(24+8)*tlChartWidth/tl.Total) || !strings.Contains(m[0].Detail, "activation stage") {
		t.Errorf("deadline from the activation stage: %+v", m)
	}
	// A record without launch_deadline_seconds (written before the field)
	// marks where its timed-out receipt's stop began: ended_at (24.3 s +
	// 8.9 s in) less stop_seconds (0.6 s).
	old := *e
	old.LaunchDeadlineSeconds = 0
	if m := newTimeline(&old).Marks; len(m) == 0 || m[0].Label != "deadline" || m[0].X != round1(tlLabelWidth+(24+9.2-0.6)*tlChartWidth/tl.Total) {
		t.Errorf("deadline from the receipt's stop: %+v", m)
	}
	notTimedOut := old
	// The same receipt's times, but no deadline passed (a stop of cancel).
	stopped := *e.ActivationReceipt
	stopped.TimedOut, stopped.Cause = false, "stopped"
	notTimedOut.ActivationReceipt = &stopped
	if m := newTimeline(&notTimedOut).Marks; len(m) != 1 || m[0].Label != "close" {
		t.Errorf("a receipt that did not time out marks no deadline: %+v", m)
	}
	svg := string(tl.SVG())
	if strings.Count(svg, `<line class="mark"`) != 2 || !strings.Contains(svg, "launch deadline 8.0 s after the receipt") {
		t.Errorf("timeline svg lacks its marks:\n%s", svg)
	}
}

// A launch deadline is a duration: a negative one is refused like a
// negative seconds.
func TestScenarioDeadlineValidated(t *testing.T) {
	e := okEvidence("r", "img/a/timeout", "img", "a")
	e.Scenario, e.LaunchDeadlineSeconds = "timeout", -1
	if err := e.Validate(); !errors.Is(err, ErrInvalidEvidence) || !strings.Contains(err.Error(), "launch_deadline_seconds") {
		t.Fatalf("negative deadline: %v", err)
	}
}

// report merge keeps scenario cases apart: a case's challenge and timeout
// runs in two shards stay two cases, each with its scenario; attempts of
// one case id in two scenarios are refused, not folded into one case.
func TestMergeKeepsScenariosApart(t *testing.T) {
	shard := func(run, shard string, scenario string) MergeInput {
		id := "img/a"
		if scenario != "" {
			id += "/" + scenario
		}
		e := okEvidence(run, id, "img", "a")
		e.Scenario, e.Shard, e.MatrixSHA256, e.MatrixCases = scenario, shard, "m", 2
		return MergeInput{Name: run, Records: []*Evidence{e}}
	}
	out, err := Merge([]MergeInput{shard("run1", "1/2", ""), shard("run2", "2/2", "timeout")}, "merged")
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].ScenarioName() != ScenarioChallenge || out[1].ScenarioName() != "timeout" {
		t.Fatalf("merged %d records: %+v", len(out), out)
	}
	rep := NewBuilder()
	for _, e := range out {
		if err := rep.Add("merged", e); err != nil {
			t.Fatal(err)
		}
	}
	if r := rep.Report().Runs[0]; len(r.Cases) != 2 || !slices.Equal(r.Scenarios, []string{"challenge", "timeout"}) {
		t.Fatalf("merged report: %d cases, scenarios %q", len(r.Cases), r.Scenarios)
	}

	mixed := shard("run1", "1/1", "")
	mixed.Records[0].MatrixCases = 1
	again := *mixed.Records[0]
	again.Scenario, again.Attempt = "cancel", 2
	mixed.Records = append(mixed.Records, &again)
	if _, err := Merge([]MergeInput{mixed}, "merged"); !errors.Is(err, ErrMerge) || !strings.Contains(err.Error(), "scenario challenge and as cancel") {
		t.Fatalf("one case id in two scenarios: %v", err)
	}
}

// The JSON report names a non-challenge case's scenario and leaves a
// challenge case as it was.
func TestScenarioJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJSON(&buf, scenarioReport(t)); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs []struct {
			Cases []map[string]json.RawMessage `json:"cases"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range doc.Runs[0].Cases {
		var id string
		json.Unmarshal(c["case_id"], &id)
		_, has := c["scenario"]
		if challenge := strings.Count(id, "/") == 1; has == challenge {
			t.Errorf("case %s: scenario field present %v", id, has)
		}
	}
}

// A report refuses one case id recorded in two scenarios, as merge does:
// the later attempt would otherwise replace a case of another scenario.
func TestBuilderRefusesACaseIDInTwoScenarios(t *testing.T) {
	b := NewBuilder()
	one := okEvidence("r", "img/a", "img", "a")
	if err := b.Add("e.jsonl", one); err != nil {
		t.Fatal(err)
	}
	again := *one
	again.Scenario, again.Attempt = "timeout", 2
	err := b.Add("e.jsonl", &again)
	if !errors.Is(err, ErrDuplicateCase) || !strings.Contains(err.Error(), "scenario challenge and as timeout") {
		t.Fatalf("a case id in two scenarios: %v", err)
	}
	// The same scenario's later attempt still replaces the case.
	same := *one
	same.Attempt = 2
	if err := b.Add("e.jsonl", &same); err != nil {
		t.Fatalf("a later attempt of the same scenario: %v", err)
	}
}
