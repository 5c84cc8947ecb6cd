package certify

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/images"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// Infrastructure failures (docs/threat-model.md, Infrastructure failures):
// a provider error is the engine's failure only on the engine's own word,
// asked after the error (provider.EngineWitness); then the case is
// unknown, with the cause, and --resume runs it again. On anything less
// (an engine that answers, stayed up and holds the container; a provider
// that cannot be asked) it stays the harness's failure.

// engineSandbox is the case's sandbox behind an engine the test controls:
// fault is the engine's word on itself ("" while it is sound), dead makes
// the engine refuse the teardown's calls as one that no longer answers.
// asked counts the witness's questions (the positive control that the
// engine was asked at all).
type engineSandbox struct {
	provider.Sandbox
	mu    sync.Mutex
	fault string
	dead  bool
	asked int
}

func (e *engineSandbox) Unwrap() provider.Sandbox { return e.Sandbox }

func (e *engineSandbox) EngineFault(context.Context) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.asked++
	return e.fault
}

// fail is the engine failing (or, with fault "", the sandbox alone).
func (e *engineSandbox) fail(fault string, dead bool) {
	e.mu.Lock()
	e.fault, e.dead = fault, dead
	e.mu.Unlock()
}

func (e *engineSandbox) refused(op string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dead {
		return provider.Errorf(op, "mem", errors.New("dial unix /run/docker.sock: connect: connection refused"))
	}
	return nil
}

func (e *engineSandbox) Destroy(ctx context.Context) error {
	if err := e.refused("destroy"); err != nil {
		return err
	}
	return e.Sandbox.Destroy(ctx)
}

func (e *engineSandbox) Inspect(ctx context.Context) (provider.Info, error) {
	if err := e.refused("inspect"); err != nil {
		return provider.Info{}, err
	}
	return e.Sandbox.Inspect(ctx)
}

// noWitness hides the engine's witness: a provider that cannot be asked.
// It unwraps to nothing (As would find the witness behind it), so it
// passes on the one optional part setup needs.
type noWitness struct{ provider.Sandbox }

func (n noWitness) Start(ctx context.Context, spec provider.ExecSpec, stderr io.Writer) (*provider.Process, error) {
	st, _ := provider.As[provider.Streamer](n.Sandbox)
	return st.Start(ctx, spec, stderr)
}

// channelBroken is what the activation got in the incident of issue 35:
// the session agent's channel ended under it.
var channelBroken = provider.Errorf("exec", "mem", errors.New("agent channel broken: the peer closed the channel"))

const (
	engineDown      = "the engine at unix:///run/docker.sock does not answer: connection refused"
	engineRestarted = "the engine's event stream, held open since the sandbox was made, ended 2.1s after it opened (the engine stopped or restarted, or the host's connection to it broke): unexpected EOF"
)

// infraCase is a whole case whose activation breaks its channel after a
// good harness's work, the engine then saying fault (dead: it refuses
// the teardown too); hidden hides the witness.
func infraCase(t *testing.T, fault string, dead, hidden bool, harness func(w *wholeCase)) (*wholeCase, *engineSandbox) {
	t.Helper()
	w := newWholeCase(t)
	var eng *engineSandbox
	w.wrap = func(sb provider.Sandbox) provider.Sandbox {
		eng = &engineSandbox{Sandbox: sb}
		if hidden {
			return noWitness{eng}
		}
		return eng
	}
	w.activation = func(w *wholeCase) error {
		eng.fail(fault, dead)
		return channelBroken
	}
	w.run(t, harness)
	return w, eng
}

func errTypeOf(ev *reports.Evidence) string {
	if ev.ErrorType == nil {
		return "null"
	}
	return *ev.ErrorType
}

func checkIDs(ev *reports.Evidence, st reports.Status) []string {
	var out []string
	for _, c := range ev.Checks {
		if c.Status == st {
			out = append(out, c.ID)
		}
	}
	return out
}

// The incident of issue 35, and what must stay the harness's: each
// case's checks, status and error type, and the report's own judgement.
func TestEngineFailureIsUnknownNotFailed(t *testing.T) {
	for _, tc := range []struct {
		name          string
		fault         string
		dead, hidden  bool
		harness       func(w *wholeCase)
		status        reports.Status
		errType       string
		failed, unkwn []string
	}{
		{"the engine died mid-activation", engineDown, true, false, goodHarness,
			reports.StatusUnknown, "infrastructure", nil, []string{"activation.provider", "teardown.provider", "teardown.container_removed"}},
		{"the engine restarted mid-activation and answers the teardown", engineRestarted, false, false, goodHarness,
			reports.StatusUnknown, "infrastructure", nil, []string{"activation.provider"}},
		// The harness broke the channel (a root harness killed the agent,
		// or ran the container out of pids): the engine answers, stayed
		// up and holds the container.
		{"the channel broke with the engine sound", "", false, false, goodHarness,
			reports.StatusFailed, "provider_error", []string{"activation.provider"}, nil},
		{"a provider the case cannot ask", engineDown, false, true, goodHarness,
			reports.StatusFailed, "provider_error", []string{"activation.provider"}, nil},
		// What failed on its own still fails the case.
		{"the engine died and the key leaked", engineDown, true, false, func(w *wholeCase) {
			goodHarness(w)
			if err := os.WriteFile(filepath.Join(w.cr.dir, "captured.log"), []byte("key="+w.cr.r.key), 0o600); err != nil {
				panic(err)
			}
		}, reports.StatusFailed, "check_failed", []string{"secrets.canary"}, []string{"activation.provider", "teardown.provider", "teardown.container_removed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, eng := infraCase(t, tc.fault, tc.dead, tc.hidden, tc.harness)
			ev := w.cr.ev
			if !tc.hidden && eng.asked == 0 {
				t.Fatal("positive control: the engine's witness was never asked")
			}
			if got := checkIDs(ev, reports.StatusFailed); !slices.Equal(got, tc.failed) {
				t.Errorf("failed checks %q, want %q", got, tc.failed)
			}
			if got := checkIDs(ev, reports.StatusUnknown); !slices.Equal(got, tc.unkwn) {
				t.Errorf("unknown checks %q, want %q", got, tc.unkwn)
			}
			if et := errTypeOf(ev); ev.Status != tc.status || ev.Passed || et != tc.errType {
				t.Errorf("status %s, passed %t, error_type %q; want %s, %s", ev.Status, ev.Passed, et, tc.status, tc.errType)
			}
			if st, why := reports.Judge(ev); st != tc.status {
				t.Errorf("the report judges it %s (%q), want %s", st, why, tc.status)
			}
			if _, ran := statusOf(ev, "verify.deliverable"); ran != "" {
				t.Errorf("verify ran after the case stopped: %q", ran)
			}
			witnessed := !tc.hidden && tc.fault != ""
			if got := ev.Infrastructure; witnessed != (got != "") || (witnessed && (!strings.Contains(got, tc.fault) || !strings.Contains(got, "activation"))) {
				t.Errorf("infrastructure %q; want the engine's word %q, after activation, exactly when it was asked and said so", got, tc.fault)
			}
			if witnessed {
				if _, d := statusOf(ev, "activation.provider"); !strings.Contains(d, tc.fault) || !strings.Contains(d, "channel broken") || !strings.Contains(d, "--resume") {
					t.Errorf("activation.provider says %q; want the error, the engine's word and that --resume runs it again", d)
				}
			}
			// The run's exit status reads the case's timing.
			w.cr.endTiming(time.Now())
			inf := (&Summary{Timings: []CaseTiming{w.cr.timing}}).Infrastructure()
			if wantInf := tc.status == reports.StatusUnknown; wantInf != (len(inf) == 1) {
				t.Errorf("the run's infrastructure cases %q; want this case there exactly when it is unknown for the engine", inf)
			}
		})
	}
}

// An unknown check with no witnessed cause (neither the interrupt nor
// the engine) fails the case: a harness that leaves a check nothing to
// judge does not get a case --resume runs forever.
func TestUnknownCheckWithoutEngineWordFails(t *testing.T) {
	cr := &caseRun{ev: &reports.Evidence{Status: reports.StatusUnknown, Checks: []reports.Check{
		{ID: "setup", Status: reports.StatusPassed}, {ID: "activation.provider", Status: reports.StatusUnknown}}}}
	cr.finish()
	if cr.ev.Status != reports.StatusFailed {
		t.Fatalf("an unknown check, no interrupt, no engine's word: %s, want failed", cr.ev.Status)
	}
	// Positive control: the same record with the engine's word is unknown.
	cr = &caseRun{ev: &reports.Evidence{Status: reports.StatusUnknown, Infrastructure: engineDown, Checks: []reports.Check{
		{ID: "setup", Status: reports.StatusPassed}, {ID: "activation.provider", Status: reports.StatusUnknown}}}}
	cr.finish()
	if cr.ev.Status != reports.StatusUnknown || errTypeOf(cr.ev) != "infrastructure" {
		t.Fatalf("with the engine's word: %s, error_type %s; want unknown, infrastructure", cr.ev.Status, errTypeOf(cr.ev))
	}
}

// --resume runs again a case the engine failed, on every attempt it
// failed it (the third unknown is planned as the fourth), and leaves the
// harness's failure final.
func TestResumeRerunsWhatTheEngineFailed(t *testing.T) {
	out := t.TempDir()
	img := images.Image{Name: "debian-12", Ref: "sandproof/debian-12"}
	var ms []*adapter.Manifest
	f, err := appendEvidence(filepath.Join(out, reports.EvidenceFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		fault    string
		attempts int
	}{{"engine-died", engineDown, 1}, {"engine-died-thrice", engineDown, 3}, {"harness-broke-it", "", 1}} {
		ms = append(ms, &adapter.Manifest{Name: c.name, SHA256: "ad"})
		for a := 1; a <= c.attempts; a++ {
			w, _ := infraCase(t, c.fault, c.fault != "", false, goodHarness)
			ev := w.cr.ev
			ev.RunID, ev.CaseID, ev.Harness, ev.Attempt = "run-mem", CaseID(img.Name, c.name, ScenarioChallenge), c.name, a
			if err := f.Write(ev, w.cr.r.key); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r := &runner{opts: Options{Out: out, Resume: true, Images: []images.Image{img}, Adapters: ms}}
	sum, cases, err := r.plan()
	if err != nil {
		t.Fatal(err)
	}
	planned := map[string]int{}
	for _, c := range cases {
		planned[c.id] = c.attempt
	}
	want := map[string]int{"debian-12/engine-died": 2, "debian-12/engine-died-thrice": 4}
	if len(planned) != len(want) || planned["debian-12/engine-died"] != 2 || planned["debian-12/engine-died-thrice"] != 4 {
		t.Errorf("planned %v, want %v", planned, want)
	}
	if sum.Resumed != 1 || sum.Counts[reports.StatusFailed] != 1 {
		t.Errorf("resumed %d, counts %v; want the harness's failure kept, final", sum.Resumed, sum.Counts)
	}
}
