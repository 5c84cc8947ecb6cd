package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/certify"
)

// The values certify.Options.Validate owns reach the CLI as usage errors:
// exit 2, the flag named and the value quoted, before any manifest is read
// (none.yaml does not exist). The static builds exist, so each case fails
// on its own flag.
func TestCertifyLibraryValidationsExitUsage(t *testing.T) {
	dir := t.TempDir()
	bin := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	warden, probe, agent := bin("warden"), bin("probe"), bin("sandagent")
	missing := filepath.Join(dir, "missing")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--parallel", "0"}, `--parallel: bad value "0" (want >= 1)`},
		{[]string{"--parallel", "-3"}, `--parallel: bad value "-3" (want >= 1)`},
		{[]string{"--baseline", "-1"}, `--baseline: bad value "-1" (want >= 0)`},
		{[]string{"--capture-entries", "0"}, `--capture-entries: bad value "0" (want >= 1)`},
		{[]string{"--network", ""}, `--network: bad value "" (want none or host)`},
		{[]string{"--network", "bridge"}, `--network: bad value "bridge" (want none or host)`},
		{[]string{"--provider", "kubernetes"}, `--provider: bad value "kubernetes" (want one of docker)`},
		{[]string{"--provider", ""}, `--provider: bad value "" (want one of docker)`},
		{[]string{"--warden", missing}, `--warden: "` + missing + `" not found`},
		{[]string{"--probe", missing}, `--probe: "` + missing + `" not found`},
		{[]string{"--agent", missing}, `--agent: "` + missing + `" not found`},
		{[]string{"--scenario", "timeuot"}, `--scenario: bad value "timeuot" (want one of challenge, timeout, cancel, model-429, model-400, borrowed)`},
		{[]string{"--scenario", "cancel", "--scenario", "cancel"}, `--scenario: "cancel" given twice`},
		// --agent defaults to the sandagent beside --probe.
		{[]string{"--probe", filepath.Join(dir, "sub", "probe"), "--agent", ""}, `--probe: "` + filepath.Join(dir, "sub", "probe") + `" not found`},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		args := append([]string{"certify", "--adapter", "none.yaml", "--out", t.TempDir(),
			"--warden", warden, "--probe", probe, "--agent", agent}, tt.args...)
		code := run(&out, &errb, args)
		if code != exitUsage || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("sandproof %s: exit %d, stderr %q; want 2 and %q", strings.Join(tt.args, " "), code, errb.String(), tt.want)
		}
	}
	// Positive control: with every value good, the run gets as far as the
	// manifest, which does not exist.
	var out, errb bytes.Buffer
	code := run(&out, &errb, []string{"certify", "--adapter", "none.yaml", "--out", t.TempDir(), "--warden", warden, "--probe", probe, "--agent", agent})
	if code != exitUsage || !strings.Contains(errb.String(), "none.yaml") {
		t.Errorf("good values: exit %d, stderr %q; want 2 naming the missing manifest", code, errb.String())
	}
	// A manifest that names a scenario certify does not have is a usage
	// error, with its file and line (the names are certify's registry's,
	// not the manifest parser's).
	bad := filepath.Join(dir, "bad.yaml")
	doc := "name: x\nversion: \"1\"\nlaunch:\n  argv: [x]\n  deadline: 60\nscenarios:\n  tiemout: {}\n"
	if err := os.WriteFile(bad, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	code = run(&out, &errb, []string{"certify", "--adapter", bad, "--out", t.TempDir(), "--warden", warden, "--probe", probe, "--agent", agent})
	if want := bad + `:7: unknown key "tiemout" in scenarios (known: borrowed, cancel`; code != exitUsage || !strings.Contains(errb.String(), want) {
		t.Errorf("an unknown scenario in the manifest: exit %d, stderr %q; want 2 and %q", code, errb.String(), want)
	}
}

// The sandagent beside --probe is the default --agent: without one there,
// the CLI names --agent.
func TestCertifyAgentDefaultsBesideProbe(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"warden", "probe"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	want := `--agent: "` + filepath.Join(dir, "sandagent") + `" not found`
	code := run(&out, &errb, []string{"certify", "--adapter", "none.yaml", "--out", t.TempDir(),
		"--warden", filepath.Join(dir, "warden"), "--probe", filepath.Join(dir, "probe")})
	if code != exitUsage || !strings.Contains(errb.String(), want) {
		t.Errorf("exit %d, stderr %q; want 2 and %q", code, errb.String(), want)
	}
}

// The summary puts the part of the overhead that a bare run does too
// (the container's create, start and removal) beside the ratio, over the
// passed cases only.
func TestPrintSummarySplitsTheContainersPart(t *testing.T) {
	s := &certify.Summary{RunID: "r", Counts: map[reports.Status]int{reports.StatusPassed: 3},
		Baselines: []certify.Baseline{{Image: "img", Median: 0.2, Seconds: []float64{0.2}}},
		Timings: []certify.CaseTiming{
			{CaseID: "img/a", Image: "img", Status: reports.StatusPassed, Overhead: 0.5, Container: 0.2},
			{CaseID: "img/b", Image: "img", Status: reports.StatusPassed, Overhead: 0.6, Container: 0.25},
			{CaseID: "img/c", Image: "img", Status: reports.StatusPassed, Overhead: 0.9, Container: 0.3},
			{CaseID: "img/d", Image: "img", Status: reports.StatusFailed, Overhead: 9, Container: 9},
		}}
	var b strings.Builder
	printSummary(&b, s, "out")
	for _, want := range []string{
		"overhead of 3 passed case(s): median 0.60s, median 3.00x the bare run",
		"of it the container's create, start and removal (a bare run's work too): median 0.25s; the rest: median 0.35s",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}
