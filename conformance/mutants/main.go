// Command mutants proves the conformance suite has teeth: it builds variants
// of warden that each break one guarantee (runner/warden/mutant, build tags only),
// runs the specs of the contract clause each mutant declares against it, and
// prints the kill matrix. Every mutant must be killed by a spec of its
// clause, and the real warden by none, in every one of --runs runs; no spec
// is retried. Run it with `make mutants`.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sandproof/sandproof/conformance/framework"
	"github.com/sandproof/sandproof/runner/warden/mutant"
)

// Mutant is one broken warden and the clause whose specs must catch it.
type Mutant struct {
	Name   mutant.Name
	Clause string
	Breaks string
}

// Catalog lists every mutant runner/warden/mutant knows.
var Catalog = []Mutant{
	{mutant.GroupKill, "2 stop rules", "stop reduced to a process-group kill"},
	{mutant.NoMarker, "2 stop rules", "no WARDEN_LAUNCH marker scan"},
	{mutant.NoSubreaper, "2 stop rules", "no child subreaper, so adopted orphans are not reached"},
	{mutant.NoStartCheck, "2 stop rules", "no start-time re-check before signalling (hits a reused pid)"},
	{mutant.NoParentCheck, "2 stop rules", "the kernel walk takes a listed pid's stat without checking its parent: a pid reaped and reused by an unrelated process between a children list and the stat is signalled as a descendant"},
	{mutant.GroupReuse, "2 stop rules", "a group signalled after its id was taken by another leader"},
	{mutant.NoCont, "2 stop rules", "no SIGCONT to stopped processes"},
	{mutant.NoKill, "2 stop rules", "never escalates to KILL after the grace"},
	{mutant.NoReap, "2 stop rules", "adopted orphans never reaped (zombies left)"},
	{mutant.MadeUpZero, "3 receipt", "return_code 0 made up when unknown"},
	{mutant.InPlaceReceipt, "3 receipt", "receipt written in place, not atomically"},
	{mutant.NoSubCentisecond, "2 flags", "no receipt for a sub-centisecond deadline (the --deadline specs)"},
	{mutant.CallerGroup, "2 launch rules", "supervisor left in the caller's process group"},
	{mutant.NoLease, "2 flags", "lease lapse ignored (the --lease specs)"},
	{mutant.NonJSONStop, "5 events mode", "runner stops recording at a non-JSON line"},
	{mutant.QuadraticCR, "5 events mode", "CR handling quadratic in the line length"},
	{mutant.FDLeak, "5 descriptors", "runner descriptors leaked to the CLI"},
	{mutant.ExitCodes, "5 exit statuses", "126 and 127 confused"},
	{mutant.LateDeadline, "2 deadline", "deadline timer armed late, by the grace"},
	{mutant.DeadlineExtends, "2 deadline", "renew --deadline takes a later deadline too: the launch's --deadline no longer a ceiling"},
	{mutant.SupFDLeak, "2 descriptors", "descriptors the caller leaked passed on to the harness under supervise"},
	{mutant.ConfirmExit, "4 exit statuses", "foreground supervise exits 0 on an unconfirmed cleanup when the harness returned 0"},
	{mutant.ClaimRace, "2 launch claim", "launch claim taken by look-then-rename, not an exclusive create"},
	{mutant.WaitNoRenew, "4 wait", "wait never renews the lease"},
	{mutant.RelPath, "5 path search", "argv[0] looked up in relative and empty PATH entries too"},
	{mutant.ParamsMarker, "5 params", "params may set WARDEN_LAUNCH"},
	{mutant.JSONBraces, "5 events mode", "a line in braces taken for JSON without validation"},
	{mutant.GraceWait, "2 stop rules", "the grace waited out for every reached process, even after the harness has exited: a tool that ignores TERM holds the stop for the whole grace"},
	{mutant.ScanWait, "2 stop rules", "a stop waits for the background scan that pins the host's older processes: an early stop on a busy host pays for the whole scan"},
	{mutant.FenceAll, "2 stop rules", "the birth fence never compares a /proc entry's ctime: every process outside the tree counts as older than the launch, so one carrying the marker is left running"},
	{mutant.NoHold, "2 hold", "no SIGSTOP hold before KILL: a hopper or a fork bomb can outrun the stop"},
	{mutant.NoKernelWalk, "2 kernel confirms", "cleanup confirmed from the last /proc scan, without the kernel's children lists"},
	{mutant.ServiceEnv, "2 services by identity", "a process that sets WARDEN_SERVICE to the launch id is kept as a service"},
	{mutant.NoThreads, "2 hold", "no OS threads reserved before the harness: a bomb at the pids limit kills the supervisor"},
	{mutant.NoCgroupKill, "2 kernel confirms", "tier cgroup freezes the harness's cgroup but never writes cgroup.kill"},
	{mutant.CgroupBlind, "2 stop rules", "at grace 0 tier cgroup does not record the members its kill of the harness's cgroup ended: the receipt lists none of the processes it ended"},
	{mutant.CgroupOnly, "2 stop rules", "at grace 0 tier cgroup takes its cgroup's kill for the whole stop: a process outside the cgroup that carries the marker is left running under a confirmed receipt"},
	{mutant.CgroupNoThaw, "2 stop rules", "with a grace, tier cgroup never thaws the harness's cgroup after the walk-free first TERM to its frozen members: the harness cannot act on its TERM, and the stop waits out the grace"},
	{mutant.CgroupTermAll, "2 stop rules", "with a grace, tier cgroup's walk-free first TERM goes to every process the cgroup lists, without the check that it is of the launch's tree: a process that joined the cgroup from outside is TERMed and listed as reached"},
	{mutant.ZSkip, "2 kernel confirms", "a Z leader counts as dead whatever its threads: a tool that called pthread_exit in main writes on after a confirmed receipt"},
	{mutant.ServicePID, "2 services by identity", "a declared service named by its pid alone: a harness process that reuses a dead service's pid is kept"},
}

func main() {
	if err := run(os.Stdout, os.Stderr, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "mutants: %v\n", err)
		var u usage
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usage struct{ error }

type result struct {
	name, clause string
	killedRuns   int
	failing      map[string]bool // spec texts that failed, in any run
	inClause     map[string]bool // those citing the declared clause
	err          string
}

func run(stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("mutants", flag.ContinueOnError)
	fs.SetOutput(stderr)
	runs := fs.Int("runs", 3, "runs in a row each mutant must be killed in")
	only := fs.String("only", "", "comma-separated mutant names (default: all)")
	procs := fs.Int("procs", 2, "parallel Ginkgo processes")
	if err := fs.Parse(args); err != nil {
		return usage{err}
	}
	if *runs < 1 {
		return usage{fmt.Errorf("--runs: %d, want >= 1", *runs)}
	}
	selected, err := selectMutants(*only)
	if err != nil {
		return usage{err}
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "sandproof-mutants-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	if err := realWardenPasses(root, work, selected, *runs, *procs, stderr); err != nil {
		return err
	}
	var results []result
	for _, m := range selected {
		results = append(results, killMutant(root, work, m, *runs, *procs, stderr))
	}
	return printMatrix(stdout, results, *runs)
}

// selectMutants is the catalogue, or the mutants only names (comma
// separated), each of which must be in it.
func selectMutants(only string) ([]Mutant, error) {
	if only == "" {
		return Catalog, nil
	}
	var selected []Mutant
	for _, n := range strings.Split(only, ",") {
		found := false
		for _, m := range Catalog {
			if string(m.Name) == n {
				selected = append(selected, m)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("--only: unknown mutant %q", n)
		}
	}
	return selected, nil
}

// realWardenPasses runs the specs of the selected mutants' clauses on the
// real warden, runs times: every spec the mutants use must pass on it
// first, or no kill means anything.
func realWardenPasses(root, work string, selected []Mutant, runs, procs int, stderr io.Writer) error {
	clauses := map[string]bool{}
	for _, m := range selected {
		clauses[m.Clause] = true
	}
	var labels []string
	for c := range clauses {
		labels = append(labels, framework.ClauseLabel(c))
	}
	sort.Strings(labels)
	filter := "(" + strings.Join(labels, " || ") + ") && !docker"
	fmt.Fprintf(stderr, "mutants: real warden, %d runs of %s\n", runs, filter)
	base, err := prepare(root, work, "real", "")
	if err != nil {
		return err
	}
	for r := 1; r <= runs; r++ {
		failed, err := runSuite(root, base, filter, procs, false, filepath.Join(work, fmt.Sprintf("real-%d.json", r)))
		if err != nil {
			return fmt.Errorf("real warden, run %d: %w", r, err)
		}
		if len(failed) > 0 {
			// Every failure's message and line, so a flaky spec seen once in
			// CI can be diagnosed from CI's log alone.
			for _, name := range keys(failed) {
				fmt.Fprintf(stderr, "mutants: real warden, run %d failed: %s\n  at %s\n%s\n", r, name, failed[name].location, indent(failed[name].message))
			}
			return fmt.Errorf("real warden, run %d: %d specs failed: %s", r, len(failed), strings.Join(keys(failed), "; "))
		}
	}
	return nil
}

// killMutant builds warden with mutant m and runs its clause's specs runs
// times: it is killed in a run when a spec of its clause fails.
func killMutant(root, work string, m Mutant, runs, procs int, stderr io.Writer) result {
	res := result{name: string(m.Name), clause: m.Clause, failing: map[string]bool{}, inClause: map[string]bool{}}
	t0 := time.Now()
	b, err := prepare(root, work, string(m.Name), "sandproof_mutant,mutant_"+string(m.Name))
	if err != nil {
		res.err = err.Error()
		return res
	}
	label := framework.ClauseLabel(m.Clause)
	for r := 1; r <= runs; r++ {
		failed, err := runSuite(root, b, label+" && !docker", procs, true, filepath.Join(work, fmt.Sprintf("%s-%d.json", m.Name, r)))
		if err != nil {
			res.err = err.Error()
			break
		}
		killed := false
		for spec, specLabels := range failed {
			res.failing[spec] = true
			if specLabels.labels[label] {
				res.inClause[spec] = true
				killed = true
			}
		}
		if killed {
			res.killedRuns++
		}
	}
	fmt.Fprintf(stderr, "mutants: %-16s killed in %d/%d runs (%d specs failed) %.0fs\n", m.Name, res.killedRuns, runs, len(res.failing), time.Since(t0).Seconds())
	return res
}

func keys(m map[string]failedSpec) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// binaries are one variant's warden and compiled suite.
type binaries struct{ warden, suite string }

func prepare(root, work, name, tags string) (binaries, error) {
	b := binaries{warden: filepath.Join(work, "warden-"+name), suite: filepath.Join(work, "suite-"+name+".test")}
	build := []string{"build", "-o", b.warden}
	test := []string{"test", "-c", "-o", b.suite}
	if tags != "" {
		build = append(build, "-tags", tags)
		test = append(test, "-tags", tags)
	}
	for _, args := range [][]string{append(build, "./cmd/warden"), append(test, "./conformance")} {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return b, nil
}

// runSuite runs the compiled suite against a warden and returns the failed
// specs with their labels. A suite that fails to run at all is an error.
//
// failFast ends the run at its first failed spec (Ginkgo's --fail-fast), as
// a mutant's runs do: one failing spec of the clause is the kill, and the
// specs a mutant makes wait out their deadlines (nokill, nolease, ...) need
// not all be waited for (nokill 53 -> 13 s, gracewait 41 -> 5 s a run;
// make mutants was 44 of a loaded CI run's 82 minutes without it). A spec another parallel process interrupted because of that
// first failure ("Interrupted by Other Ginkgo Process") is not a failure of
// its own and is not returned. The real warden's runs never fail fast, so
// every spec it fails is listed.
func runSuite(root string, b binaries, filter string, procs int, failFast bool, report string) (map[string]failedSpec, error) {
	args := []string{"run", "github.com/onsi/ginkgo/v2/ginkgo", "--label-filter=" + filter,
		"--json-report=" + filepath.Base(report), "--output-dir=" + filepath.Dir(report), "--timeout=20m"}
	if failFast {
		args = append(args, "--fail-fast")
	}
	if procs > 1 {
		args = append(args, "-p", fmt.Sprintf("--procs=%d", procs))
	}
	args = append(args, b.suite)
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join(root, "conformance")
	cmd.Env = append(os.Environ(), "SANDPROOF_WARDEN="+b.warden)
	out, runErr := cmd.CombinedOutput()
	data, err := os.ReadFile(report)
	if err != nil {
		return nil, fmt.Errorf("no report (%v): %v\n%s", runErr, err, tail(out))
	}
	failed, err := failedSpecs(data)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", report, err)
	}
	return failed, nil
}

// failedSpec is one failed spec of a run: its labels, and where and why it
// failed.
type failedSpec struct {
	labels   map[string]bool
	location string // file:line of the failure
	message  string
}

// failedSpecs reads a Ginkgo JSON report and returns the specs that failed
// (failed, panicked, timed out, aborted or interrupted), each with its
// labels. A spec interrupted only because another parallel process aborted
// the run after its own failure is left out.
func failedSpecs(data []byte) (map[string]failedSpec, error) {
	var reports []struct {
		SuiteSucceeded bool `json:"SuiteSucceeded"`
		SpecReports    []struct {
			ContainerHierarchyTexts []string `json:"ContainerHierarchyTexts"`
			LeafNodeText            string   `json:"LeafNodeText"`
			LeafNodeLabels          []string `json:"LeafNodeLabels"`
			State                   string   `json:"State"`
			Failure                 struct {
				Message  string `json:"Message"`
				Location struct {
					FileName   string `json:"FileName"`
					LineNumber int    `json:"LineNumber"`
				} `json:"Location"`
			} `json:"Failure"`
		} `json:"SpecReports"`
	}
	if err := json.Unmarshal(data, &reports); err != nil {
		return nil, err
	}
	failed := map[string]failedSpec{}
	for _, r := range reports {
		for _, s := range r.SpecReports {
			switch s.State {
			case "failed", "panicked", "timedout", "aborted", "interrupted":
			default:
				continue
			}
			if s.State == "interrupted" && s.Failure.Message == interruptedByOther {
				continue // stopped by another process's failure (--fail-fast), not failed
			}
			name := strings.TrimSpace(strings.Join(append(s.ContainerHierarchyTexts, s.LeafNodeText), " "))
			if name == "" {
				name = "(suite setup)"
			}
			ls := map[string]bool{}
			for _, l := range s.LeafNodeLabels {
				ls[l] = true
			}
			loc := s.Failure.Location
			failed[name] = failedSpec{labels: ls, message: s.Failure.Message,
				location: fmt.Sprintf("%s:%d", filepath.Base(loc.FileName), loc.LineNumber)}
		}
	}
	return failed, nil
}

// interruptedByOther is Ginkgo's failure message for a spec that one
// parallel process stopped when another aborted the run (--fail-fast).
const interruptedByOther = "Interrupted by Other Ginkgo Process"

// indent sets a failure message off from the lines around it in a log.
func indent(msg string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(msg, "\n"), "\n", "\n    ")
}

func tail(b []byte) string {
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

func printMatrix(w io.Writer, results []result, runs int) error {
	fmt.Fprintf(w, "\n%-16s  %-16s  %-7s  %s\n", "mutant", "clause", "killed", "failing specs of its clause (first 3)")
	survivors := 0
	for _, r := range results {
		var specs []string
		for s := range r.inClause {
			specs = append(specs, s)
		}
		sort.Strings(specs)
		if len(specs) > 3 {
			specs = append(specs[:3], fmt.Sprintf("... %d more", len(r.inClause)-3))
		}
		status := fmt.Sprintf("%d/%d", r.killedRuns, runs)
		if r.err != "" {
			status = "error"
			specs = []string{r.err}
		}
		if r.killedRuns < runs || r.err != "" {
			survivors++
		}
		fmt.Fprintf(w, "%-16s  %-16s  %-7s  %s\n", r.name, r.clause, status, strings.Join(specs, " | "))
	}
	fmt.Fprintf(w, "\n%d mutants, %d killed in every run, %d survived\n", len(results), len(results)-survivors, survivors)
	if survivors > 0 {
		return fmt.Errorf("%d mutants survived", survivors)
	}
	return nil
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
