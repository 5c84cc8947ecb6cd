package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const reportTestdata = "../../reports/testdata/"

func runReport(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(&o, &e, args)
	return code, o.String(), e.String()
}

func TestReportUnknownFormatIsUsage(t *testing.T) {
	code, _, stderr := runReport(t, "report", "--format", "pdf", reportTestdata+"smoke.jsonl")
	if code != 2 || !strings.Contains(stderr, `--format: bad value "pdf"`) {
		t.Errorf("exit %d, stderr %q; want 2 naming --format and quoting the value", code, stderr)
	}
}

func TestReportNoArgsIsUsage(t *testing.T) {
	if code, _, stderr := runReport(t, "report"); code != 2 {
		t.Errorf("exit %d, stderr %q; want 2", code, stderr)
	}
	if code, _, stderr := runReport(t, "report", "diff", "only-one.jsonl"); code != 2 {
		t.Errorf("diff with one file: exit %d, stderr %q; want 2", code, stderr)
	}
}

func TestReportRejectsDuplicateWithLine(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(reportTestdata + "smoke.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := bytes.Cut(data, []byte("\n"))
	path := filepath.Join(dir, "dup.jsonl")
	if err := os.WriteFile(path, append(append(data, first...), '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runReport(t, "report", path)
	if code != 2 || !strings.Contains(stderr, path+":11: duplicate case") || stdout != "" {
		t.Errorf("exit %d, stderr %q, stdout %d bytes; want 2 (bad input), %s:11: duplicate case, nothing on stdout", code, stderr, len(stdout), path)
	}
}

func TestReportWritesOut(t *testing.T) {
	out := filepath.Join(t.TempDir(), "junit.xml")
	code, _, stderr := runReport(t, "report", "--format", "junit", "--out", out, reportTestdata+"smoke.jsonl")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(reportTestdata + "smoke.junit.xml.golden")
	if err != nil {
		t.Fatal(err)
	}
	// The golden file was rendered from inside reports/, so only the
	// source paths differ.
	got = bytes.ReplaceAll(got, []byte(reportTestdata), []byte("testdata/"))
	if !bytes.Equal(got, want) {
		t.Errorf("--out junit differs from the golden file")
	}
}

func TestReportDiffRegressionExits1(t *testing.T) {
	code, stdout, stderr := runReport(t, "report", "diff", reportTestdata+"smoke.jsonl", reportTestdata+"smoke-regressed.jsonl")
	if code != 1 {
		t.Errorf("exit %d (stderr %q), want 1", code, stderr)
	}
	if !strings.Contains(stdout, "regressions (passed -> failed, unknown, skipped or missing): 1\n  debian:bookworm-slim × kilo: passed -> failed") {
		t.Errorf("output does not name the regressed case:\n%s", stdout)
	}
}

func TestReportDiffNoRegressionExits0(t *testing.T) {
	// Either order of the two smoke runs has one regression, so compare a
	// run with itself: same failures on both sides are not regressions.
	code, stdout, stderr := runReport(t, "report", "diff", reportTestdata+"smoke.jsonl", reportTestdata+"smoke.jsonl")
	if code != 0 || !strings.Contains(stdout, "regressions: 0, fixes: 0") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s\nwant 0 and no regressions", code, stderr, stdout)
	}
}

// runDir copies an evidence file into a fresh run directory.
func runDir(t *testing.T, evidence string, drop ...string) string {
	t.Helper()
	data, err := os.ReadFile(evidence)
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, l := range strings.Split(string(data), "\n") {
		gone := false
		for _, d := range drop {
			gone = gone || strings.Contains(l, `"case_id":"`+d+`"`)
		}
		if !gone {
			keep = append(keep, l)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "evidence.jsonl"), []byte(strings.Join(keep, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// report diff takes run directories, renders GitHub tables, treats both
// directions alike, and a vanished passing case regresses unless
// --allow-missing.
func TestReportDiffRunDirsBothWays(t *testing.T) {
	a := runDir(t, reportTestdata+"smoke.jsonl")
	b := runDir(t, reportTestdata+"smoke-regressed.jsonl")
	code, md, stderr := runReport(t, "report", "diff", "--format", "md", a, b)
	if code != 1 {
		t.Fatalf("diff A B: exit %d (%s), want 1", code, stderr)
	}
	for _, want := range []string{
		"## sandproof diff: 1 regression(s)\n",
		"| | OLD | NEW |\n|---|---|---|\n",
		"### regressions (passed → failed, unknown, skipped or missing): 1\n\n| case | OLD | NEW | checks that changed |\n|---|---|---|---|\n| debian:bookworm-slim × kilo | passed | failed |",
		"### fixes (failed, unknown or skipped → passed): 1\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("md lacks %q:\n%s", want, md)
		}
	}
	// Every table row has as many cells as its header.
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "| ") && strings.Count(strings.ReplaceAll(l, `\|`, ""), "|") != 5 && strings.Count(strings.ReplaceAll(l, `\|`, ""), "|") != 4 {
			t.Errorf("table row with a stray cell: %q", l)
		}
	}
	var ab, ba struct {
		Regressions, Fixes, Added, Missing []struct{ Name string }
	}
	for _, x := range []struct {
		args []string
		into any
	}{{[]string{a, b}, &ab}, {[]string{b, a}, &ba}} {
		_, out, _ := runReport(t, append([]string{"report", "diff", "--format", "json"}, x.args...)...)
		if err := json.Unmarshal([]byte(out), x.into); err != nil {
			t.Fatalf("json: %v\n%s", err, out)
		}
	}
	names := func(v []struct{ Name string }) string {
		var n []string
		for _, x := range v {
			n = append(n, x.Name)
		}
		return strings.Join(n, ",")
	}
	if names(ab.Regressions) != names(ba.Fixes) || names(ab.Fixes) != names(ba.Regressions) || names(ab.Regressions) == "" {
		t.Errorf("not symmetric: A->B regressions %q fixes %q, B->A regressions %q fixes %q", names(ab.Regressions), names(ab.Fixes), names(ba.Regressions), names(ba.Fixes))
	}

	// A passing case gone from NEW: a regression, listed as missing too;
	// with --allow-missing only missing. The other direction lists it as new.
	gone := runDir(t, reportTestdata+"smoke.jsonl", "debian-pi")
	code, out, _ := runReport(t, "report", "diff", a, gone)
	if code != 1 || !strings.Contains(out, "missing (in OLD only): 1\n  debian:bookworm-slim × pi: passed -> missing") ||
		!strings.Contains(out, "regressions (passed -> failed, unknown, skipped or missing): 1\n") {
		t.Errorf("vanished passing case: exit %d\n%s", code, out)
	}
	if code, out, _ := runReport(t, "report", "diff", "--allow-missing", a, gone); code != 0 || !strings.Contains(out, "regressions: 0, fixes: 0, new: 0, missing: 1") {
		t.Errorf("--allow-missing: exit %d\n%s", code, out)
	}
	if code, out, _ := runReport(t, "report", "diff", gone, a); code != 0 || !strings.Contains(out, "regressions: 0, fixes: 0, new: 1, missing: 0") {
		t.Errorf("the other way: exit %d\n%s", code, out)
	}
	// A path that names nothing is a usage error, not a regression.
	if code, _, stderr := runReport(t, "report", "diff", a, filepath.Join(a, "nope")); code != 2 || !strings.Contains(stderr, "no such evidence file or run directory") {
		t.Errorf("missing path: exit %d, %q; want 2", code, stderr)
	}
}
