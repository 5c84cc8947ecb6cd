package reports

import (
	"bytes"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
)

// twoRuns is the same matrix run twice: different run ids, times and
// digests, one case failed by a missing glibc symbol in the second.
func twoRuns() (a, b []*Evidence) {
	mk := func(run string, at time.Time) []*Evidence {
		var out []*Evidence
		for _, img := range []string{"debian-12", "alpine-class"} {
			for _, h := range []string{"pi", "opencode"} {
				e := okEvidence(run, img+"/"+h, img, h)
				e.StartedAt, e.EndedAt, e.Seconds = at, at.Add(1500*time.Millisecond), 1.5
				e.WardenSHA256 = "sha-" + run
				out = append(out, e)
			}
		}
		return out
	}
	a = mk("run-1", time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	b = mk("run-2", time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	f := b[3] // alpine-class/opencode
	f.Status, f.Passed = StatusFailed, false
	f.Checks = append(f.Checks, Check{ID: "activation.result", Status: StatusFailed, Clause: "§7.2 seed and activation", Detail: "response_status failed from events (0 records, exit 1)"})
	f.HarnessStderrTail = []string{"opencode: starting", "/usr/lib/opencode: /lib/libc.so.6: version `GLIBC_2.34' not found (required by opencode)"}
	f.CaseDir = "cases/alpine-class__opencode"
	return a, b
}

func junitOf(t *testing.T, rep *Report) ([]byte, junitSuites) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, rep); err != nil {
		t.Fatal(err)
	}
	var got junitSuites
	if err := xml.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("junit does not parse: %v\n%s", err, buf.String())
	}
	return buf.Bytes(), got
}

// identities lists every testcase as suite / classname / name.
func identities(s junitSuites) []string {
	var out []string
	for _, su := range s.Suites {
		for _, c := range su.Cases {
			out = append(out, su.Name+" / "+c.Classname+" / "+c.Name)
		}
	}
	return out
}

// TestJUnitStableNames: two runs of one matrix give the same testcase
// identities (CI keeps each test's history), every testcase and suite has
// a time, and the failed case's <failure> and <system-err> hold the
// harness's own error line.
func TestJUnitStableNames(t *testing.T) {
	a, b := twoRuns()
	_, ja := junitOf(t, build(t, a...))
	raw, jb := junitOf(t, build(t, b...))
	ia, ib := identities(ja), identities(jb)
	if len(ia) != 4 || !slices.Equal(ia, ib) {
		t.Fatalf("testcase identities differ between runs:\n%q\n%q", ia, ib)
	}
	if ia[0] != "debian-12 / sandproof.debian-12 / pi" {
		t.Errorf("first testcase %q, want suite = image, classname = sandproof.<image>, name = adapter", ia[0])
	}
	if bytes.Contains(raw, []byte(`classname="run-2`)) || !bytes.Contains(raw, []byte(`<property name="run_id" value="run-2">`)) {
		t.Errorf("the run id must be a property, never part of a name:\n%s", raw)
	}
	for _, su := range jb.Suites {
		if su.Time == "" || su.Tests != len(su.Cases) {
			t.Errorf("suite %s: time %q, tests %d of %d cases", su.Name, su.Time, su.Tests, len(su.Cases))
		}
		for _, c := range su.Cases {
			if c.Time != "1.500" {
				t.Errorf("%s/%s: time %q, want 1.500", su.Name, c.Name, c.Time)
			}
		}
	}
	var failed *junitCase
	for i := range jb.Suites[1].Cases {
		if c := &jb.Suites[1].Cases[i]; c.Failure != nil {
			failed = c
		}
	}
	if failed == nil || failed.Name != "opencode" || jb.Failures != 1 {
		t.Fatalf("want alpine-class/opencode failed, the one failure:\n%s", raw)
	}
	const line = "version `GLIBC_2.34' not found"
	for what, text := range map[string]string{"failure": failed.Failure.Text, "system-err": failed.SystemErr} {
		if !strings.Contains(text, line) {
			t.Errorf("<%s> lacks the harness's error line: %q", what, text)
		}
	}
	if !strings.Contains(failed.Failure.Text, "cases/alpine-class__opencode/") || !strings.Contains(failed.Failure.Message, "activation.result failed") {
		t.Errorf("<failure> message %q / body %q: want the failing check and the case's files", failed.Failure.Message, failed.Failure.Text)
	}
}

// TestJUnitValidatesAgainstXSD checks junit.xml of the smoke evidence and
// of a failed case against the common JUnit schema, with xmllint; a
// document that breaks the schema is refused first (positive control).
func TestJUnitValidatesAgainstXSD(t *testing.T) {
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		testenv.Package(t, "xmllint", "libxml2-utils")
	}
	xsd, err := filepath.Abs(filepath.Join("testdata", "junit.xsd"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	validate := func(name string, doc []byte) error {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, doc, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(xmllint, "--noout", "--schema", xsd, p).CombinedOutput()
		if err != nil {
			return &xmlErr{string(out)}
		}
		return nil
	}
	bad := []byte(`<?xml version="1.0"?><testsuites><testsuite name="x" tests="1"><testcase name="a" classname="c"/></testsuite></testsuites>`)
	if validate("bad.xml", bad) == nil {
		t.Fatal("the schema accepts a testcase and suite without time: it checks nothing")
	}
	_, b := twoRuns()
	b[0].Status, b[0].SkipReason = StatusSkipped, "image debian-12 lacks musl"
	b[1].Checks = nil // unknown: an <error>
	docs := map[string]*Report{"smoke.xml": mustReport(t, "testdata/smoke.jsonl"), "failed.xml": build(t, b...), "empty.xml": build(t)}
	for name, rep := range docs {
		raw, _ := junitOf(t, rep)
		if err := validate(name, raw); err != nil {
			t.Errorf("%s breaks the JUnit schema: %v\n%s", name, err, raw)
		}
	}
}

type xmlErr struct{ out string }

func (e *xmlErr) Error() string { return strings.TrimSpace(e.out) }
