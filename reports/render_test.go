package reports

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func build(t testing.TB, recs ...*Evidence) *Report {
	t.Helper()
	b := NewBuilder()
	for _, e := range recs {
		if err := b.Add("mem", e); err != nil {
			t.Fatal(err)
		}
	}
	return b.Report()
}

func TestDiff(t *testing.T) {
	old := build(t,
		okEvidence("old", "a", "debian", "pi"),
		okEvidence("old", "b", "debian", "kilo"),
		okEvidence("old", "gone", "alpine", "pi"),
	)
	broken := okEvidence("new", "b2", "debian", "kilo")
	broken.Checks[2] = Check{ID: "no_new_processes", Status: StatusFailed, Clause: "§7.4", Detail: "pid 77 sleep left"}
	cur := build(t,
		okEvidence("new", "a2", "debian", "pi"), // renamed case id: paired by image x harness
		broken,
		okEvidence("new", "added", "alpine", "opencode"),
	)
	d, err := Diff(old, cur)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Regressed() || len(d.Regressions) != 2 {
		t.Fatalf("regressions = %+v, want debian x kilo and the missing alpine x pi", d.Regressions)
	}
	kilo, gone := d.Regressions[0], d.Regressions[1]
	if kilo.Name != "debian × kilo" || kilo.New != StatusFailed || len(kilo.Checks) != 1 || kilo.Checks[0].ID != "no_new_processes" {
		t.Errorf("first regression = %+v, want debian × kilo failing no_new_processes", kilo)
	}
	if gone.Name != "alpine × pi" || gone.New != Missing {
		t.Errorf("second regression = %+v, want alpine × pi missing", gone)
	}
	if d.Unchanged != 1 || len(d.Added) != 1 || d.Added[0].Name != "alpine × opencode" {
		t.Errorf("unchanged %d, added %+v; want 1 and alpine × opencode", d.Unchanged, d.Added)
	}
	var out bytes.Buffer
	if err := WriteDiff(&out, d); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"pass rate: 100.0% -> 66.7% (-33.3 points)",
		"  debian × kilo: passed -> failed\n    no_new_processes (§7.4): passed -> failed: pid 77 sleep left\n",
		"  alpine × pi: passed -> missing\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("diff output lacks %q:\n%s", want, out.String())
		}
	}

	// Fixes alone are not a regression.
	d, err = Diff(cur, build(t, okEvidence("n", "1", "debian", "pi"), okEvidence("n", "2", "debian", "kilo"), okEvidence("n", "3", "alpine", "opencode")))
	if err != nil {
		t.Fatal(err)
	}
	if d.Regressed() || len(d.Fixes) != 1 || d.Fixes[0].Name != "debian × kilo" {
		t.Errorf("regressions %+v fixes %+v, want none and debian × kilo fixed", d.Regressions, d.Fixes)
	}
}

func TestDiffTasksPairByTaskID(t *testing.T) {
	mk := func(run, id, task string, st Status) *Evidence {
		e := okEvidence(run, id, "swe", "pi")
		e.TaskID = task
		if st == StatusFailed {
			e.Checks[0].Status = StatusFailed
		}
		return e
	}
	old := build(t, mk("o", "1", "django-1", StatusPassed), mk("o", "2", "django-2", StatusFailed))
	cur := build(t, mk("n", "1", "django-2", StatusPassed), mk("n", "2", "django-1", StatusFailed))
	d, err := Diff(old, cur)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Regressions) != 1 || d.Regressions[0].TaskID != "django-1" || len(d.Fixes) != 1 || d.Fixes[0].TaskID != "django-2" {
		t.Errorf("regressions %+v fixes %+v, want django-1 regressed and django-2 fixed", d.Regressions, d.Fixes)
	}
}

func TestDiffRefusesAmbiguousPairs(t *testing.T) {
	twice := build(t, okEvidence("r1", "a", "debian", "pi"), okEvidence("r2", "a", "debian", "pi"))
	_, err := Diff(twice, build(t, okEvidence("r", "a", "debian", "pi")))
	if err == nil || !strings.Contains(err.Error(), `"debian × pi" appears twice`) {
		t.Errorf("error %v, want the ambiguous pair named", err)
	}
}

func TestHTMLIsSelfContained(t *testing.T) {
	rep := mustReport(t, "testdata/smoke.jsonl")
	var buf bytes.Buffer
	if err := WriteHTML(&buf, rep); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	// The only URL allowed is the SVG namespace, which is never fetched.
	stripped := strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, "")
	for _, bad := range []string{"http://", "https://", "<script", "<link", "@import", "url(", "<img"} {
		if strings.Contains(stripped, bad) {
			t.Errorf("HTML contains %q: it must not fetch anything", bad)
		}
	}
	// Every matrix link resolves to a case in the page.
	for _, m := range regexp.MustCompile(`href="#([^"]+)"`).FindAllStringSubmatch(page, -1) {
		if !strings.Contains(page, `id="`+m[1]+`"`) {
			t.Errorf("link #%s has no target", m[1])
		}
	}
	if n := len(regexp.MustCompile(`<td class="cell [a-z]+"><a href="#`).FindAllString(page, -1)); n != 10 {
		t.Errorf("%d matrix links, want 10 (one per case)", n)
	}
}

func TestHTMLTimelineToScale(t *testing.T) {
	e := okEvidence("r", "c", "debian", "pi")
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	e.Stages = []Stage{
		{Name: StageSetup, StartedAt: t0, Seconds: 1},
		{Name: StageSeed, StartedAt: t0.Add(time.Second), Seconds: 3},
		{Name: StageActivation, StartedAt: t0.Add(4 * time.Second), Seconds: 6},
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, build(t, e)); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`<rect class="bar-(setup|seed|activation|close|verify|teardown)" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"`)
	bars := re.FindAllStringSubmatch(buf.String(), -1)
	if len(bars) != 3 {
		t.Fatalf("found %d bars, want 3:\n%s", len(bars), buf.String())
	}
	f := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	w1, w2, w3 := f(bars[0][3]), f(bars[1][3]), f(bars[2][3])
	if w2 != 3*w1 || w3 != 6*w1 {
		t.Errorf("bar widths %v %v %v, want proportional to 1, 3, 6 seconds", w1, w2, w3)
	}
	// Positions follow start times: seed starts where setup ends.
	if x1, x2 := f(bars[0][2]), f(bars[1][2]); x2 != x1+w1 {
		t.Errorf("seed starts at %v, want %v", x2, x1+w1)
	}
}

func TestMarkdownHasNoHTMLAndEscapes(t *testing.T) {
	e := okEvidence("r", "c", "debian", "pi")
	e.Checks[0] = Check{ID: "deliverable", Status: StatusFailed, Clause: "§7.4", Detail: "<script>x</script> | *bold* [l](u)"}
	var buf bytes.Buffer
	if err := WriteMarkdown(&buf, build(t, e)); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	if regexp.MustCompile(`<[a-zA-Z/]`).MatchString(md) {
		t.Errorf("markdown contains an HTML tag:\n%s", md)
	}
	if !strings.Contains(md, `&lt;script&gt;x&lt;/script&gt; \| \*bold\* \[l\](u)`) {
		t.Errorf("detail not escaped:\n%s", md)
	}
	// The record said passed; the report says failed and says why.
	if !strings.Contains(md, "- status: **failed** (record says passed)") || !strings.Contains(md, "- note: record says passed, but failed check(s): deliverable") {
		t.Errorf("override of the record not explained:\n%s", md)
	}
	// The failed cell links to the case's heading slug.
	if !strings.Contains(md, "[fail 12 s](#debian--pi)") || !strings.Contains(md, "#### debian × pi\n") {
		t.Errorf("matrix cell does not link to the case heading:\n%s", md)
	}
}

func TestSlugger(t *testing.T) {
	var s slugger
	for _, tc := range []struct{ in, want string }{
		{"alpine:3.20 × opencode", "alpine320--opencode"},
		{"Cases", "cases"},
		{"Cases", "cases-1"},
		{"swebench/django:3.0 × pi · task_1", "swebenchdjango30--pi--task_1"},
	} {
		if got := s.add(tc.in); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestJUnitCounts(t *testing.T) {
	rep := mustReport(t, "testdata/smoke-regressed.jsonl")
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, rep); err != nil {
		t.Fatal(err)
	}
	var got junitSuites
	if err := xml.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("junit does not parse: %v", err)
	}
	// Counts are cases, as in report.md: debian x kilo fails, alpine x
	// codex is skipped; one suite per image.
	c := rep.Counts
	if got.Tests != c.Cases || got.Failures != c.Failed || got.Skipped != c.Skipped || got.Errors != c.Unknown || len(got.Suites) != len(rep.Runs[0].Images) || c.Failed != 1 || c.Skipped != 1 {
		t.Errorf("tests %d failures %d skipped %d errors %d suites %d; want the report's counts %+v and %d suites",
			got.Tests, got.Failures, got.Skipped, got.Errors, len(got.Suites), c, len(rep.Runs[0].Images))
	}

	// A case passed by its record but without checks shows as an error, a
	// case failed by its record alone as a failure: never an empty suite.
	noChecks := okEvidence("r", "none", "debian", "pi")
	noChecks.Checks = nil
	failedRecord := okEvidence("r", "rec", "debian", "kilo")
	failedRecord.Status = StatusFailed
	buf.Reset()
	if err := WriteJUnit(&buf, build(t, noChecks, failedRecord)); err != nil {
		t.Fatal(err)
	}
	got = junitSuites{} // Unmarshal appends to slices
	if err := xml.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Errors != 1 || got.Failures != 1 || len(got.Suites) != 1 || got.Suites[0].Cases[0].Error == nil || got.Suites[0].Cases[1].Failure == nil {
		t.Errorf("junit = %s\nwant one error (no checks) and one failure (record says failed)", buf.String())
	}
}

func TestWriteAll(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("testdata/smoke.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, EvidenceFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := WriteAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != StatusFailed {
		t.Errorf("status %q, want failed", rep.Status)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "evidence.jsonl junit.xml report.html report.md" {
		t.Errorf("run dir holds %q, want the evidence and three reports, no temporary files", got)
	}
	md, err := os.ReadFile(filepath.Join(dir, MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(md, []byte("# sandproof report: failed\n")) {
		t.Errorf("report.md starts %q", md[:min(len(md), 60)])
	}

	// Rejected evidence leaves no report behind.
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, EvidenceFile), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteAll(bad); err == nil || !strings.Contains(err.Error(), "evidence.jsonl:1: invalid evidence") {
		t.Errorf("error %v, want the rejected line named", err)
	}
	if _, err := os.Stat(filepath.Join(bad, HTMLFile)); !os.IsNotExist(err) {
		t.Errorf("report.html written for rejected evidence (stat: %v)", err)
	}
}

// A case's page explains the verdict from the evidence alone: the model
// steps (which call asked for the challenge, brought it back, wrote the
// deliverable, or which step is missing) and what harness was certified.
func TestCasePagesShowModelStepsAndHarness(t *testing.T) {
	e := okEvidence("r", "c", "debian", "pi")
	e.Checks[0] = Check{ID: "verify.challenge_round_trip", Status: StatusFailed, Clause: "§7.4 verify", Detail: "no tool result"}
	e.ModelCalls = 1
	e.ModelSteps = &ModelSteps{Model: "scripted", SandboxAuth: map[string]int{"canary": 1}, AskCall: 1, Missing: "tool result carrying the challenge",
		Steps: []ModelStep{{Seq: 1, Status: 200, Stream: true, ToolCalls: []string{"read"}}}}
	e.HarnessRuntime = &HarnessRuntime{Package: "@mariozechner/pi-coding-agent", Version: "0.73.1", Integrity: "sha512-x", TreeSHA256: "abc123", TreeFiles: 9, CLIVersion: "0.73.1"}
	rep := build(t, e)
	var md, html bytes.Buffer
	if err := WriteMarkdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&html, rep); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"md": md.String(), "html": html.String()} {
		for _, want := range []string{"1 model calls to scripted", "call 1 asked for the challenge", "missing: tool result carrying the challenge",
			"call 1: HTTP 200, called read", "@mariozechner/pi-coding-agent@0.73.1", "runtime tree sha256 abc123 (9 files)"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q", name, want)
			}
		}
	}
	// Without the new fields, nothing is claimed.
	var plain bytes.Buffer
	WriteMarkdown(&plain, build(t, okEvidence("r", "c", "debian", "pi")))
	if strings.Contains(plain.String(), "model steps") {
		t.Error("a record without model_steps shows model steps")
	}
}

// A harness is listed once per runtime: a skipped case's record (no CLI
// version) adds nothing, a different CLI version adds a line.
func TestRunProvenanceListsEachHarnessRuntimeOnce(t *testing.T) {
	rt := HarnessRuntime{Package: "p", Version: "1", Integrity: "sha512-x", TreeSHA256: "t"}
	skipped, a, b, c := okEvidence("r", "a", "alpine", "pi"), okEvidence("r", "b", "debian", "pi"), okEvidence("r", "c", "old", "pi"), okEvidence("r", "d", "other", "pi")
	skipped.HarnessRuntime = &rt
	withV := rt
	withV.CLIVersion = "1"
	a.HarnessRuntime, b.HarnessRuntime = &withV, &withV
	otherV := rt
	otherV.CLIVersion = "2"
	c.HarnessRuntime = &otherV
	got := build(t, skipped, a, b, c).Runs[0].Provenance.Harnesses
	if len(got) != 2 || got[0].Runtime.CLIVersion != "1" || got[1].Runtime.CLIVersion != "2" {
		t.Fatalf("harnesses = %+v; want versions 1 and 2 once each", got)
	}
}

// A run whose sandboxes shared the host's network says so in every
// report; one with network none names it without the flag.
func TestReportsFlagHostNetwork(t *testing.T) {
	for _, tc := range []struct {
		network string
		flagged bool
	}{{"none", false}, {"host", true}} {
		e := okEvidence("r", "a", "debian", "pi")
		e.Sandbox = &Sandbox{Network: tc.network, Provider: "docker", Engine: "tcp://127.0.0.1:2377"}
		rep := build(t, e)
		for _, f := range Formats {
			var b bytes.Buffer
			if err := f.Render(&b, rep); err != nil {
				t.Fatalf("%s: %v", f.Name, err)
			}
			out := b.String()
			if !strings.Contains(out, "tcp://127.0.0.1:2377") {
				t.Errorf("network %s, %s: the engine is not named", tc.network, f.Name)
			}
			if f.Name == "json" {
				continue
			}
			if got := strings.Contains(out, "could reach anything the host can"); got != tc.flagged {
				t.Errorf("network %s, %s: flagged %t, want %t", tc.network, f.Name, got, tc.flagged)
			}
		}
	}
}
