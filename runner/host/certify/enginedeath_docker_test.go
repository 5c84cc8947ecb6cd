package certify_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dc "github.com/ory/dockertest/v3/docker"

	"github.com/sandproof/sandproof/internal/testsupport/remoteengine"
	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/images"
)

// The incident of issue 35 on an engine of the test's own (the shared one
// is never touched): the engine dies while a case's activation runs. The
// case is unknown with the engine's word (it does not answer), never
// failed; the reports are written; the run exits 3; and --resume, against
// an engine that answers (a fresh one: a crashed engine's containers are
// gone with it), runs the case again, which passes.
//
// The harness is miniagent-gated: its launch waits for /task/.gate, which
// only this test writes, so the activation cannot end before the test
// lets it, and the kill, sent when certify says the activation began,
// always lands in it.
func TestEngineKilledMidActivationIsUnknown(t *testing.T) {
	testenv.Long(t, "two certify runs of one case on engines of their own, one killed under the case")
	const id, caseDir = "debian-12/miniagent-gated", "debian-12__miniagent-gated"
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ref := loadedEngineImage(t, "debian-12")
	args := func(out string, more ...string) []string {
		a := []string{"certify", "--network", "none", "--out", out, "--image", "debian-12",
			"--adapter", filepath.Join("..", "..", "..", "fixtures", "adapters", "miniagent-gated.yaml")}
		return append(append(a, toolArgs(t)...), more...)
	}
	out := t.TempDir()

	// The first run: the engine is killed once the activation began.
	e1 := remoteengine.Start(t)
	loadInto(t, ctx, e1, ref)
	var killErr error
	code, text := certifyActing(t, ctx, e1.Env(os.Environ()), id+": activation ...", func() { killErr = e1.Kill() }, args(out)...)
	if killErr != nil {
		t.Fatalf("kill the engine: %v", killErr)
	}
	// Positive control: the engine was dead for the rest of the run.
	if err := e1.Client.Ping(); err == nil {
		t.Fatalf("%s answers after its kill", e1.Host)
	}
	recs, raw := rawEvidence(t, out)
	ev := recs[id]
	if ev == nil {
		t.Fatalf("no record of %s (exit %d)\n%s", id, code, text)
	}
	st, _ := reports.Judge(ev)
	act := checkNamed(ev, "activation.provider")
	t.Logf("killed mid-activation: exit %d, %s (the report: %s), activation.provider %s: %s", code, ev.Status, st, act.Status, act.Detail)
	if ev.Status != reports.StatusUnknown || st != reports.StatusUnknown {
		t.Errorf("the case is %s (the report: %s), want unknown: the engine, not the harness, failed it\n%s", ev.Status, st, raw[id])
	}
	if act.Status != reports.StatusUnknown || !strings.Contains(act.Detail, "does not answer") {
		t.Errorf("activation.provider %s %q; want unknown, with the engine's word that it does not answer", act.Status, act.Detail)
	}
	if !strings.Contains(raw[id], `"infrastructure":"the engine at `+e1.Host+` does not answer`) || !strings.Contains(raw[id], `"error_type":"infrastructure"`) {
		t.Errorf("the record does not carry the engine's word as its infrastructure and error_type:\n%s", raw[id])
	}
	if code != 3 || !strings.Contains(text, "unknown because the engine failed them") {
		t.Errorf("the run exits %d, want 3 (infrastructure) naming the case\n%s", code, text)
	}
	for _, f := range []string{"report.md", "report.html", "junit.xml"} {
		if b, err := os.ReadFile(filepath.Join(out, f)); err != nil || !bytes.Contains(b, []byte("infrastructure")) {
			t.Errorf("%s: %v; want it written, with the case's infrastructure", f, err)
		}
	}

	// --resume against an engine that answers: the case runs again (attempt
	// 2), the gate opened as its activation begins, and passes.
	e2 := remoteengine.Start(t)
	loadInto(t, ctx, e2, ref)
	var gateErr error
	code, text = certifyActing(t, ctx, e2.Env(os.Environ()), id+": activation ...", func() { gateErr = openGate(e2, caseDir) }, args(out, "--resume")...)
	if gateErr != nil {
		t.Fatalf("open the gate: %v", gateErr)
	}
	recs, raw = rawEvidence(t, out)
	if ev := recs[id]; code != 0 || ev == nil || ev.Status != reports.StatusPassed || ev.AttemptNumber() != 2 {
		t.Fatalf("--resume: exit %d, last record %s; want the case run again as attempt 2 and passed\n%s\n%s", code, raw[id], text, failedDetails(ev))
	}
	if strings.Contains(text, "skipped by --resume") {
		t.Errorf("--resume skipped the case the engine failed:\n%s", text)
	}
}

// loadedEngineImage is the reference of the test image named name, which
// the main engine must hold (it is loaded from there).
func loadedEngineImage(t *testing.T, name string) string {
	t.Helper()
	all, err := images.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(all, func(img images.Image) bool { return img.Name == name })
	if i < 0 {
		t.Fatalf("no test image %s", name)
	}
	from, err := remoteengine.MainEngine()
	if err != nil {
		testenv.NoEngine(t, err)
	}
	if _, err := from.InspectImage(all[i].Ref); err != nil {
		testenv.NoImage(t, all[i].Name, all[i].Ref)
	}
	return all[i].Ref
}

// loadInto streams the image ref from the main engine into e.
func loadInto(t *testing.T, ctx context.Context, e *remoteengine.Engine, ref string) {
	t.Helper()
	from, err := remoteengine.MainEngine()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Load(ctx, from, ref); err != nil {
		t.Fatal(err)
	}
}

// certifyActing runs the CLI with env and args and calls act once, when a
// line of its progress contains trigger, while it runs; it returns the
// exit status and the whole output. act must have been called: a run
// that never printed trigger fails the test.
func certifyActing(t *testing.T, ctx context.Context, env []string, trigger string, act func(), args ...string) (int, string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, sandproofCLI(t), args...)
	cmd.Env = env
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	acted := false
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if !acted && strings.Contains(sc.Text(), trigger) {
			acted = true
			act()
		}
	}
	err = cmd.Wait()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("sandproof %v: %v\n%s", args, err, strings.Join(lines, "\n"))
	}
	text := strings.Join(lines, "\n") + "\n" + stdout.String()
	if !acted {
		t.Fatalf("sandproof %v never printed %q (exit %d):\n%s", args, trigger, code, text)
	}
	return code, text
}

// openGate writes /task/.gate, as root, in the case's container on e.
func openGate(e *remoteengine.Engine, caseDir string) error {
	cs, err := e.Client.ListContainers(dc.ListContainersOptions{Filters: map[string][]string{"label": {"sandproof.case=" + caseDir}}})
	if err != nil {
		return err
	}
	if len(cs) != 1 {
		return errors.New("not one running container of the case")
	}
	x, err := e.Client.CreateExec(dc.CreateExecOptions{Container: cs[0].ID, User: "0", Cmd: []string{"touch", "/task/.gate"}})
	if err != nil {
		return err
	}
	return e.Client.StartExec(x.ID, dc.StartExecOptions{})
}

// checkNamed is the case's check id (zero when it has none).
func checkNamed(ev *reports.Evidence, id string) reports.Check {
	for _, c := range ev.Checks {
		if c.ID == id {
			return c
		}
	}
	return reports.Check{}
}

// failedDetails lists a record's checks that did not pass, for a message.
func failedDetails(ev *reports.Evidence) string {
	if ev == nil {
		return ""
	}
	var out []string
	for _, c := range ev.Checks {
		if c.Status != reports.StatusPassed {
			out = append(out, c.ID+" "+string(c.Status)+": "+c.Detail)
		}
	}
	return strings.Join(out, "\n")
}
