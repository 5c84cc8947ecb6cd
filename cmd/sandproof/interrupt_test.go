package main

import (
	"bufio"
	"context"
	"encoding/xml"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/images"
)

// buildTools builds the sandproof CLI and the static warden and probe
// into dir, so the test signals the real binary, not a goroutine.
func buildTools(t *testing.T, dir string) (sandproof, warden, probe string) {
	t.Helper()
	// sandagent goes beside the probe, where certify looks for it.
	for _, b := range []struct{ out, pkg string }{{"sandproof", "."}, {"warden", "../warden"}, {"probe", "../probe"}, {"sandagent", "../sandagent"}} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b.out), b.pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", b.pkg, err, out)
		}
	}
	return filepath.Join(dir, "sandproof"), filepath.Join(dir, "warden"), filepath.Join(dir, "probe")
}

// needImages ends the test without an engine or without the images.
func needImages(t *testing.T, names ...string) {
	t.Helper()
	testenv.Docker(t)
	e := images.Engine{}
	if _, err := e.Ping(context.Background()); err != nil {
		testenv.OptedInEngine(t, err)
	}
	all, err := images.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range all {
		for _, n := range names {
			if img.Name == n {
				if _, found, err := e.Inspect(context.Background(), img.Ref); err != nil || !found {
					testenv.NoImage(t, n, img.Ref)
				}
			}
		}
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// exitCode is the status of a finished command (0 when err is nil).
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if err == nil {
		return 0
	}
	if !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return ee.ExitCode()
}

// statuses is the case set of a run directory's report: case id -> status.
func statuses(t *testing.T, dir string) map[string]reports.Status {
	t.Helper()
	rep, err := reports.ReadFiles(filepath.Join(dir, reports.EvidenceFile))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]reports.Status{}
	for _, r := range rep.Runs {
		for _, c := range r.Cases {
			out[c.ID] = c.Status
		}
	}
	return out
}

// TestCertifyInterruptAndResume sends SIGINT to a real `sandproof certify`
// of six cases while its first case's harness runs: no case may start
// after it, the run exits 130 with that case written as unknown (its
// launch stopped through the session, receipt kept), and --resume then
// finishes the run so that it matches an uninterrupted run of the same
// matrix (the fake-noloop cases fail in both: exit 1).
func TestCertifyInterruptAndResume(t *testing.T) {
	testenv.Long(t, "three certify runs of six cases against Docker")
	needImages(t, "debian-12", "old-python")
	tmp := t.TempDir()
	sandproof, warden, probe := buildTools(t, tmp)
	args := func(out string, more ...string) []string {
		a := []string{"certify", "--warden", warden, "--probe", probe, "--out", out,
			"--adapter", filepath.Join("..", "..", "fixtures", "adapters", "miniagent-slow.yaml"),
			"--adapter", filepath.Join("..", "..", "fixtures", "adapters", "miniagent-opencode.yaml"),
			"--adapter", filepath.Join("..", "..", "fixtures", "adapters", "fake-noloop.yaml"),
			"--image", "debian-12", "--image", "old-python"}
		return append(a, more...)
	}

	// The uninterrupted run: the reference.
	ref := filepath.Join(tmp, "ref")
	out, err := exec.Command(sandproof, args(ref)...).CombinedOutput()
	if code := exitCode(t, err); code != exitFailed {
		t.Fatalf("uninterrupted run: exit %d, want 1 (fake-noloop fails)\n%s", code, out)
	}
	want := statuses(t, ref)
	if len(want) != 6 {
		t.Fatalf("uninterrupted run: %d cases, want 6: %v", len(want), want)
	}

	// The interrupted run: SIGINT once the first case's harness runs,
	// which its progress line says.
	run := filepath.Join(tmp, "run")
	cmd := exec.Command(sandproof, args(run)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	running := make(chan int, 1) // the index of the activation line
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			if strings.Contains(sc.Text(), "debian-12/miniagent-slow: activation ...") {
				select {
				case running <- len(lines) - 1:
				default:
				}
			}
			mu.Unlock()
		}
	}()
	var at int
	select {
	case at = <-running:
	case <-done:
		cmd.Wait()
		t.Fatalf("the run ended before its first activation:\n%s", strings.Join(lines, "\n"))
	case <-time.After(5 * time.Minute):
		cmd.Process.Kill()
		t.Fatal("no activation within 5 minutes")
	}
	// The harness runs once the model got its first call: the relay's
	// transcript has a line (the harness then sleeps 3 s before its next
	// turn, so the signal finds it running).
	relay := filepath.Join(run, "cases", "debian-12__miniagent-slow", "model_relay.jsonl")
	if !waitFor(5*time.Minute, func() bool { fi, err := os.Stat(relay); return err == nil && fi.Size() > 0 }) {
		cmd.Process.Kill()
		t.Fatalf("no model call in %s within 5 minutes", relay)
	}
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-done
	code := exitCode(t, cmd.Wait())
	// A figure, not a verdict: how long the stop through the session, the
	// teardown and the reports took.
	t.Logf("SIGINT to exit %d: %.2fs", code, time.Since(sent).Seconds())
	all := strings.Join(lines, "\n")
	if code != exitSIGINT {
		t.Fatalf("interrupted run: exit %d, want 130\n%s", code, all)
	}
	for _, l := range lines[at+1:] {
		if strings.Contains(l, ": setup ...") {
			t.Errorf("a case started after SIGINT: %q", l)
		}
	}
	f, err := os.Open(filepath.Join(run, reports.EvidenceFile))
	if err != nil {
		t.Fatal(err)
	}
	var evs []*reports.Evidence
	for ev, err := range reports.ReadEvidence(f) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	f.Close()
	if len(evs) != 1 {
		t.Fatalf("interrupted run wrote %d records, want the one running case:\n%s", len(evs), all)
	}
	ev := evs[0]
	if ev.CaseID != "debian-12/miniagent-slow" || ev.Status != reports.StatusUnknown || ev.Attempt != 1 || !strings.HasPrefix(ev.Interrupted, "SIGINT") {
		t.Fatalf("interrupted case: %s status %s attempt %d interrupted %q, want debian-12/miniagent-slow unknown, attempt 1, SIGINT", ev.CaseID, ev.Status, ev.Attempt, ev.Interrupted)
	}
	// Stopped through its session while it ran (the slow harness sleeps
	// 3 s between its turns, so it cannot have finished): no activation
	// receipt of its own, and the close's receipt is warden's stop of it,
	// cleanup confirmed.
	if ev.Interrupted != "SIGINT during activation" || ev.ActivationReceipt != nil {
		t.Errorf("interrupted case: interrupted %q, activation receipt %+v; want the activation cut short", ev.Interrupted, ev.ActivationReceipt)
	}
	if r := ev.CloseReceipt; r == nil || !r.CleanupConfirmed || r.Cause != "stopped" {
		t.Errorf("interrupted case: close receipt %+v, want warden's confirmed stop (cause stopped)", r)
	}
	for _, name := range []string{reports.MarkdownFile, reports.HTMLFile, reports.JUnitFile} {
		if _, err := os.Stat(filepath.Join(run, name)); err != nil {
			t.Errorf("reports of the interrupted run: %v", err)
		}
	}

	// --resume finishes it: the interrupted case again (attempt 2) and
	// the five never started.
	out, err = exec.Command(sandproof, args(run, "--resume")...).CombinedOutput()
	if code := exitCode(t, err); code != exitFailed {
		t.Fatalf("resumed run: exit %d, want 1 (fake-noloop fails)\n%s", code, out)
	}
	got := statuses(t, run)
	if len(got) != len(want) {
		t.Errorf("resumed run: cases %v, uninterrupted %v", got, want)
	}
	for id, st := range want {
		if got[id] != st {
			t.Errorf("%s: %s after resume, %s uninterrupted", id, got[id], st)
		}
	}
	rep, err := reports.ReadFiles(filepath.Join(run, reports.EvidenceFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Runs[0].Cases {
		if c.ID == "debian-12/miniagent-slow" && (c.Attempts != 2 || c.Evidence.Attempt != 2) {
			t.Errorf("resumed case: %d records, attempt %d; want its second attempt", c.Attempts, c.Evidence.Attempt)
		}
	}

	// Two runs of one matrix: the same JUnit testcase identities.
	if a, b := junitIdentities(t, ref), junitIdentities(t, run); len(a) != 6 || strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("JUnit identities differ between two runs of the matrix:\n%q\n%q", a, b)
	}
	// And report diff of the two run directories: no regression, tables.
	out, err = exec.Command(sandproof, "report", "diff", "--format", "md", ref, run).CombinedOutput()
	if code := exitCode(t, err); code != 0 || !strings.Contains(string(out), "## sandproof diff: no regression\n\n| | OLD | NEW |\n|---|---|---|\n") {
		t.Errorf("report diff --format md REF RUN: exit %d\n%s", code, out)
	}
}

// junitIdentities lists a run directory's junit.xml testcases as
// suite / classname / name.
func junitIdentities(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, reports.JUnitFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Suites []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name      string `xml:"name,attr"`
				Classname string `xml:"classname,attr"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			out = append(out, s.Name+" / "+c.Classname+" / "+c.Name)
		}
	}
	return out
}

// TestCertifySIGINTInSeedThenResume is the case of issue 25 through the
// real binary: SIGINT sent as soon as the first case's seed begins (its
// progress line), before any launch. The case must be written unknown
// with the stage in its reason and no failed check, and --resume must
// finish the run with exit 0 (the three fixture adapters pass on
// debian-12). Before the fix the case was written failed on
// close.receipts (no launch, so no receipt) and --resume exited 1.
func TestCertifySIGINTInSeedThenResume(t *testing.T) {
	testenv.Long(t, "two certify runs against Docker")
	needImages(t, "debian-12")
	tmp := t.TempDir()
	sandproof, warden, probe := buildTools(t, tmp)
	run := filepath.Join(tmp, "run")
	args := []string{"certify", "--warden", warden, "--probe", probe, "--out", run,
		"--adapter", filepath.Join("..", "..", "fixtures", "adapters", "miniagent-opencode.yaml"),
		"--adapter", filepath.Join("..", "..", "fixtures", "adapters", "miniagent-pi.yaml"),
		"--adapter", filepath.Join("..", "..", "fixtures", "adapters", "miniagent-daemon.yaml"),
		"--image", "debian-12"}
	cmd := exec.Command(sandproof, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	const first = "debian-12/miniagent-opencode"
	var lines []string
	seeding := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.HasSuffix(sc.Text(), first+": seed ...") {
				close(seeding)
			}
		}
	}()
	select {
	case <-seeding:
	case <-done:
		cmd.Wait()
		t.Fatalf("the run ended before %s's seed:\n%s", first, strings.Join(lines, "\n"))
	case <-time.After(5 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("no seed of %s within 5 minutes", first)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-done
	if code := exitCode(t, cmd.Wait()); code != exitSIGINT {
		t.Fatalf("interrupted run: exit %d, want 130\n%s", code, strings.Join(lines, "\n"))
	}
	f, err := os.Open(filepath.Join(run, reports.EvidenceFile))
	if err != nil {
		t.Fatal(err)
	}
	var evs []*reports.Evidence
	for ev, err := range reports.ReadEvidence(f) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	f.Close()
	if len(evs) != 1 || evs[0].CaseID != first {
		t.Fatalf("interrupted run wrote %d records, want %s's alone:\n%s", len(evs), first, strings.Join(lines, "\n"))
	}
	ev := evs[0]
	// The signal lands while seed runs: a seed is an engine round trip at
	// least, far longer than the pipe's hop. Where it landed is read from
	// the record, not assumed, and must be seed or later.
	if ev.Status != reports.StatusUnknown || !strings.HasPrefix(ev.Interrupted, "SIGINT during ") {
		t.Errorf("interrupted case: status %s, interrupted %q; want unknown, SIGINT during a stage", ev.Status, ev.Interrupted)
	}
	t.Logf("interrupted case: %s, %q", ev.Status, ev.Interrupted)
	for _, c := range ev.Checks {
		if c.Status == reports.StatusFailed {
			t.Errorf("interrupted case: check %s failed: %s", c.ID, c.Detail)
		}
	}
	out, err := exec.Command(sandproof, append(args, "--resume")...).CombinedOutput()
	if code := exitCode(t, err); code != exitOK {
		t.Fatalf("resumed run: exit %d, want 0\n%s", code, out)
	}
	for id, st := range statuses(t, run) {
		if st != reports.StatusPassed {
			t.Errorf("%s: %s after --resume, want passed", id, st)
		}
	}
}
