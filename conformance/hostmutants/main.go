// Command hostmutants is `make mutants` for the host path: it applies each
// one-line mutation of its catalogue (catalog.go) to the verdict-path file
// it names, through `go test -overlay` (the tree is never written), runs
// the engine-free unit tests of that file's package, and reports per
// package how many mutants the tests killed, how many survived and how many
// timed out. A survivor is a verdict rule no test guards, unless the
// catalogue marks it equivalent with a one-line reason. Run it with
// `make mutants-host`; docs/mutation.md says why it is not gremlins.
//
// Engine-free: SANDPROOF_DOCKER and SANDPROOF_STRICT are removed from the
// tests' environment and DOCKER_HOST points at a socket that does not
// exist, so a test that wants an engine skips; -short skips the long ones.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	if err := run(os.Stdout, os.Stderr, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "hostmutants: %v\n", err)
		var u usage
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usage struct{ error }

// Outcomes of one mutant.
const (
	Killed   = "killed"
	Survived = "survived"
	TimedOut = "timed out"
	// Flaky: killed by a test that also fails without the mutant.
	Flaky = "killed by a flaky test"
)

type result struct {
	m       Mutant
	outcome string
	by      string // the first failing test, for a kill
	secs    float64
}

func run(stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("hostmutants", flag.ContinueOnError)
	fs.SetOutput(stderr)
	only := fs.String("only", "", "comma-separated mutant names (default: all)")
	pkgs := fs.String("pkg", "", "comma-separated packages, as in the catalogue (default: all)")
	jobs := fs.Int("jobs", 2, "mutants tested side by side")
	out := fs.String("out", "", "also write the report (markdown) to this file")
	timeout := fs.Duration("timeout", 0, "per mutant (default: 4 x the package's unmutated run, at least 60s)")
	list := fs.Bool("list", false, "print the catalogue and exit")
	runOnly := fs.String("run", "", "only the tests matching this pattern (go test -run): to show that one test kills a mutant")
	if err := fs.Parse(args); err != nil {
		return usage{err}
	}
	if *jobs < 1 {
		return usage{fmt.Errorf("--jobs: %d, want >= 1", *jobs)}
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	// The catalogue is checked whole before anything runs: an entry whose
	// line moved away is a catalogue bug, not a kill.
	if err := checkCatalog(root, Catalog); err != nil {
		return err
	}
	if *list {
		for _, m := range Catalog {
			fmt.Fprintf(stdout, "%-24s %-8s %s: %s\n", m.Name, m.Pkg, m.File, m.Rule)
		}
		return nil
	}
	selected, err := selectMutants(*only, *pkgs)
	if err != nil {
		return usage{err}
	}
	work, err := os.MkdirTemp("", "sandproof-hostmutants-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	start := time.Now()
	limits, err := unmutatedLimits(root, selected, *runOnly, *timeout, stderr)
	if err != nil {
		return err
	}
	results := runMutants(root, work, selected, *runOnly, limits, *jobs, stderr)
	if err := recheckKills(root, selected, results, limits, stderr); err != nil {
		return err
	}
	wall := time.Since(start)

	var buf bytes.Buffer
	bad := writeReport(&buf, results, wall, *jobs)
	stdout.Write(buf.Bytes())
	if *out != "" {
		if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d mutant(s) survived, timed out or did not build without a reason in the catalogue", bad)
	}
	return nil
}

// unmutatedLimits runs the selected packages' tests unmutated first: every
// package must pass, and its time sets its mutants' timeout (4 x, at least
// a minute; timeout, when > 0, instead).
func unmutatedLimits(root string, selected []Mutant, runOnly string, timeout time.Duration, stderr io.Writer) (map[string]time.Duration, error) {
	limits := map[string]time.Duration{}
	for _, p := range packagesOf(selected) {
		t0 := time.Now()
		failed, res, err := goTest(root, p, "", runOnly, 20*time.Minute)
		if err != nil {
			return nil, fmt.Errorf("unmutated %s: %w", p, err)
		}
		if failed != "" || res != Survived {
			return nil, fmt.Errorf("unmutated %s: the tests do not pass (%s %s)", p, res, failed)
		}
		d := time.Since(t0)
		limits[p] = max(4*d, time.Minute)
		if timeout > 0 {
			limits[p] = timeout
		}
		fmt.Fprintf(stderr, "hostmutants: %-8s unmutated tests pass in %.1fs\n", p, d.Seconds())
	}
	return limits, nil
}

// runMutants tests each selected mutant against its package's tests, jobs
// side by side, and returns their results in the selection's order.
func runMutants(root, work string, selected []Mutant, runOnly string, limits map[string]time.Duration, jobs int, stderr io.Writer) []result {
	results := make([]result, len(selected))
	var wg sync.WaitGroup
	sem := make(chan struct{}, jobs)
	var mu sync.Mutex
	for i, m := range selected {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t0 := time.Now()
			r := result{m: m}
			overlay, err := writeOverlay(root, work, i, m)
			if err == nil {
				r.by, r.outcome, err = goTest(root, m.Pkg, overlay, runOnly, limits[m.Pkg])
			}
			if err != nil {
				r.outcome, r.by = "error", err.Error()
			}
			r.secs = time.Since(t0).Seconds()
			results[i] = r
			mu.Lock()
			fmt.Fprintf(stderr, "hostmutants: %-24s %-9s %5.1fs %s\n", m.Name, r.outcome, r.secs, r.by)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return results
}

// recheckKills counts a kill only if the killing test passes, three times,
// on the unmutated package: a test that fails by itself (a deadline a
// loaded machine misses) proves nothing about the mutant, and its kills
// become Flaky in results.
func recheckKills(root string, selected []Mutant, results []result, limits map[string]time.Duration, stderr io.Writer) error {
	for _, p := range packagesOf(selected) {
		killers := map[string]bool{}
		for _, r := range results {
			if r.m.Pkg == p && r.outcome == Killed && !strings.HasPrefix(r.by, "(") {
				killers[r.by] = true
			}
		}
		if len(killers) == 0 {
			continue
		}
		names := make([]string, 0, len(killers))
		for n := range killers {
			names = append(names, regexp.QuoteMeta(n))
		}
		sort.Strings(names)
		flaky, out, err := failingTests(root, p, "^("+strings.Join(names, "|")+")$", limits[p])
		if err != nil {
			return fmt.Errorf("recheck the killing tests of %s: %w", p, err)
		}
		if len(flaky) > 0 {
			// What the flaky test said, to tell a loaded machine from a
			// test that cannot pass.
			fmt.Fprintf(stderr, "hostmutants: %s: the unmutated recheck failed:\n%s\n", p, failureText(out))
		}
		for i := range results {
			if results[i].m.Pkg == p && results[i].outcome == Killed && flaky[results[i].by] {
				results[i].outcome = Flaky
				fmt.Fprintf(stderr, "hostmutants: %-24s killed by %s, which fails on the unmutated package too\n", results[i].m.Name, results[i].by)
			}
		}
	}
	return nil
}

func selectMutants(only, pkgs string) ([]Mutant, error) {
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	wantPkg := map[string]bool{}
	for _, p := range strings.Split(pkgs, ",") {
		if p != "" {
			if _, ok := Packages[p]; !ok {
				return nil, fmt.Errorf("--pkg: unknown package %q", p)
			}
			wantPkg[p] = true
		}
	}
	var out []Mutant
	known := map[string]bool{}
	for _, m := range Catalog {
		known[m.Name] = true
		if (len(want) == 0 || want[m.Name]) && (len(wantPkg) == 0 || wantPkg[m.Pkg]) {
			out = append(out, m)
		}
	}
	for n := range want {
		if !known[n] {
			return nil, fmt.Errorf("--only: unknown mutant %q", n)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no mutant selected")
	}
	return out, nil
}

func packagesOf(ms []Mutant) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		if !seen[m.Pkg] {
			seen[m.Pkg] = true
			out = append(out, m.Pkg)
		}
	}
	return out
}

// checkCatalog refuses a catalogue whose entries cannot be applied: a
// duplicate name, an unknown package, a file outside its package, or an
// Old text that does not occur exactly once in its file.
func checkCatalog(root string, cat []Mutant) error {
	names := map[string]bool{}
	var errs []error
	for _, m := range cat {
		if names[m.Name] {
			errs = append(errs, fmt.Errorf("mutant %q: named twice", m.Name))
		}
		names[m.Name] = true
		dir, ok := Packages[m.Pkg]
		if !ok {
			errs = append(errs, fmt.Errorf("mutant %q: unknown package %q", m.Name, m.Pkg))
			continue
		}
		if filepath.Dir(m.File) != dir.Dir || strings.HasSuffix(m.File, "_test.go") {
			errs = append(errs, fmt.Errorf("mutant %q: file %q is not a source file of %s", m.Name, m.File, dir.Dir))
			continue
		}
		if m.Old == m.New || m.Rule == "" {
			errs = append(errs, fmt.Errorf("mutant %q: changes nothing or names no rule", m.Name))
		}
		data, err := os.ReadFile(filepath.Join(root, m.File))
		if err != nil {
			errs = append(errs, fmt.Errorf("mutant %q: %w", m.Name, err))
			continue
		}
		if n := strings.Count(string(data), m.Old); n != 1 {
			errs = append(errs, fmt.Errorf("mutant %q: %q occurs %d times in %s, want once (the line moved: update the catalogue)", m.Name, m.Old, n, m.File))
		}
	}
	return errors.Join(errs...)
}

// writeOverlay writes the mutated file and the overlay that puts it in
// place of the original for one go test.
func writeOverlay(root, work string, i int, m Mutant) (string, error) {
	orig := filepath.Join(root, m.File)
	data, err := os.ReadFile(orig)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(work, fmt.Sprintf("%03d-%s", i, m.Name))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	mutated := filepath.Join(dir, filepath.Base(m.File))
	if err := os.WriteFile(mutated, []byte(strings.Replace(string(data), m.Old, m.New, 1)), 0o644); err != nil {
		return "", err
	}
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {orig: mutated}})
	path := filepath.Join(dir, "overlay.json")
	return path, os.WriteFile(path, ov, 0o644)
}

var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: ([^\s/]+)`)

// failingTests runs the tests matching run on the unmutated package p
// three times and returns those that failed, and what the run printed.
func failingTests(root, p, run string, limit time.Duration) (map[string]bool, []byte, error) {
	pk := Packages[p]
	args := []string{"test", "-count=3", "-short", "-run=" + run, fmt.Sprintf("-timeout=%s", 3*limit), "./" + pk.Dir}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = engineFree(os.Environ())
	out, err := cmd.CombinedOutput()
	failed := map[string]bool{}
	for _, m := range failLine.FindAllSubmatch(out, -1) {
		failed[string(m[1])] = true
	}
	if err != nil && len(failed) == 0 {
		return nil, nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, tail(out))
	}
	return failed, out, nil
}

// goTest runs the engine-free tests of package p (with overlay, when not
// "", and only those matching runOnly, when not "") and says whether they failed (with the first failing test), passed
// (Survived) or ran out of time. A build failure is an error.
func goTest(root, p, overlay, runOnly string, limit time.Duration) (by, outcome string, err error) {
	pk := Packages[p]
	// No vet and no symbol tables: make vet checks the tree once, and a
	// test binary built per mutant needs neither (about a tenth of each
	// build's CPU, the run's largest part).
	args := []string{"test", "-count=1", "-short", "-failfast", "-vet=off", "-ldflags=-s -w", fmt.Sprintf("-timeout=%s", limit)}
	if overlay != "" {
		args = append(args, "-overlay="+overlay)
	}
	if runOnly != "" {
		args = append(args, "-run="+runOnly)
	}
	if pk.Skip != "" {
		args = append(args, "-skip="+pk.Skip)
	}
	args = append(args, "./"+pk.Dir)
	ctx, cancel := context.WithTimeout(context.Background(), limit+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = engineFree(os.Environ())
	out, runErr := cmd.CombinedOutput()
	switch {
	case runErr == nil:
		return "", Survived, nil
	case ctx.Err() != nil || bytes.Contains(out, []byte("panic: test timed out")):
		return "", TimedOut, nil
	case bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")):
		return "", "", fmt.Errorf("go %s: does not build:\n%s", strings.Join(args, " "), tail(out))
	}
	if m := failLine.FindSubmatch(out); m != nil {
		return string(m[1]), Killed, nil
	}
	// A failure outside any test (TestMain, a panic in init) kills too.
	return "(package: " + strings.TrimSpace(lastLine(out)) + ")", Killed, nil
}

// engineFree is the environment without the switches that let a test use
// a Docker engine, and with an engine address nothing answers at.
func engineFree(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "SANDPROOF_DOCKER", "SANDPROOF_STRICT", "DOCKER_HOST", "DOCKER_CONTEXT":
			continue
		}
		out = append(out, kv)
	}
	return append(out, "DOCKER_HOST=unix:///nonexistent/sandproof-hostmutants.sock")
}

func tail(b []byte) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// failureText is up to 20 lines of out from its first failed test on.
func failureText(out []byte) string {
	if i := bytes.Index(out, []byte("--- FAIL")); i >= 0 {
		out = out[i:]
	}
	lines := strings.SplitN(string(out), "\n", 21)
	return strings.Join(lines[:min(len(lines), 20)], "\n")
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return lines[len(lines)-1]
}

// writeReport prints the per-package table and each mutant's outcome, and
// returns how many outcomes are not accepted (a survivor or a timeout with
// no equivalence reason, or an error).
func writeReport(w io.Writer, results []result, wall time.Duration, jobs int) int {
	type counts struct{ killed, survived, timedOut, flaky, equivalent, errs int }
	per := map[string]*counts{}
	bad := 0
	for _, r := range results {
		c := per[r.m.Pkg]
		if c == nil {
			c = &counts{}
			per[r.m.Pkg] = c
		}
		switch {
		case r.outcome == Killed:
			c.killed++
		case r.outcome == Survived && r.m.Equivalent != "":
			c.equivalent++
		case r.outcome == Survived:
			c.survived++
			bad++
		case r.outcome == TimedOut:
			c.timedOut++
			bad++
		case r.outcome == Flaky:
			c.flaky++
			bad++
		default:
			c.errs++
			bad++
		}
	}
	var names []string
	for p := range per {
		names = append(names, p)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "# Host-path mutants\n\n%d mutants, %d side by side, in %.0fs wall.\n\n", len(results), jobs, wall.Seconds())
	fmt.Fprintf(w, "| package | mutants | killed | survived | timed out | killed by a flaky test | equivalent | score |\n|---|---|---|---|---|---|---|---|\n")
	var tk, tn int
	for _, p := range names {
		c := per[p]
		n := c.killed + c.survived + c.timedOut + c.flaky + c.equivalent + c.errs
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %s |\n", p, n, c.killed, c.survived, c.timedOut, c.flaky, c.equivalent, score(c.killed, n-c.equivalent))
		tk += c.killed
		tn += n - c.equivalent
	}
	fmt.Fprintf(w, "| all | %d | %d | | | | | %s |\n\n", len(results), tk, score(tk, tn))
	fmt.Fprintf(w, "Score: killed / (mutants - equivalent).\n\n| mutant | package | outcome | by | rule |\n|---|---|---|---|---|\n")
	for _, r := range results {
		by := r.by
		if r.outcome == Survived && r.m.Equivalent != "" {
			by = "equivalent: " + r.m.Equivalent
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", r.m.Name, r.m.Pkg, r.outcome, strings.ReplaceAll(by, "|", "/"), r.m.Rule)
	}
	return bad
}

func score(k, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*float64(k)/float64(n))
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("find module root: not inside the sandproof module")
	}
	return filepath.Dir(mod), nil
}
