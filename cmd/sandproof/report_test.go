package main

import (
	"bytes"
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
	if !strings.Contains(stdout, "pass->fail (regressions, including cases missing from NEW): 1\n  debian:bookworm-slim × kilo: passed -> failed") {
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
