package certify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/images"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/relay"
	"github.com/sandproof/sandproof/runner/probe"
	"github.com/sandproof/sandproof/runner/witness"
)

// A whole case on the in-memory sandbox, no engine: the owner's stages
// in runCase's order, each on the values the one before returned. Setup
// creates the sandbox through the runner's provider, reads it back and
// runs the probe's setup (the scripted probe writes the markers
// setupArgv names, writes the challenge from its stdin and takes the
// baseline);
// then the harness acts (where seed, the activation and close run: they
// go over the session agent's streamed exec and warden, which this
// sandbox has not, so a test's harness does to the sandbox what they
// would leave); then verify with the inputs verifyCase gives it,
// teardown, the relay's and the canary's checks and the verdict
// (finish: the judge, the causes). A good harness passes the case; each
// broken rule fails it with the check that guards the rule, and no other.

// memProvider creates its one in-memory sandbox.
type memProvider struct{ sb provider.Sandbox }

func (p memProvider) Name() string { return "mem" }
func (p memProvider) Create(context.Context, provider.CreateSpec) (provider.Sandbox, error) {
	return p.sb, nil
}
func (p memProvider) Open(context.Context, string) (provider.Sandbox, error) { return p.sb, nil }

// keptSandbox is a sandbox whose Destroy answers nil and leaves it there:
// an engine that lost the removal.
type keptSandbox struct{ memDiffer }

func (keptSandbox) Destroy(context.Context) error { return nil }

// wholeCase is one case: its sandbox, its run and what setup left.
type wholeCase struct {
	sb        *memSandbox
	cr        *caseRun
	bx        sandboxed
	token     string // what the harness's write call writes
	challenge string // what setup gives the probe to write
	kept      bool   // the engine keeps the sandbox at teardown
	// wrap, when set, wraps the sandbox the provider creates (an engine
	// that fails, with its witness).
	wrap func(provider.Sandbox) provider.Sandbox
	// activation, when set, runs after the harness as the activation
	// stage, with the error it returns; one that stops the case
	// (stopsCase) skips verify, as runSession does.
	activation func(w *wholeCase) error
}

// probeSetup scripts the probe's setup on m (called with m's lock held,
// as Exec holds it): each --write-markers path written with fresh
// content, and the snapshot of those and of the --markers paths.
func probeSetup(m *memSandbox) func(provider.ExecSpec) (provider.ExecResult, error) {
	return func(spec provider.ExecSpec) (provider.ExecResult, error) {
		var paths []string
		i := slices.Index(spec.Argv, "--")
		argv, became := spec.Argv, i >= 0
		if became {
			argv = spec.Argv[:i]
		}
		for i := 2; i+1 < len(argv); i += 2 {
			switch argv[i] {
			case "--write-markers":
				for _, p := range strings.Split(argv[i+1], ",") {
					m.files[p] = "marker of " + p
					paths = append(paths, p)
				}
			case "--markers":
				paths = append(paths, strings.Split(argv[i+1], ",")...)
			case "--secret":
				if spec.Stdin == nil {
					return provider.ExecResult{ExitCode: 1, Stderr: []byte("probe: setup: --secret: nothing on stdin")}, nil
				}
				b, err := probe.ReadFrame(spec.Stdin, probe.TagSecret, 64<<10)
				if err != nil || len(b) == 0 {
					return provider.ExecResult{ExitCode: 1, Stderr: []byte(fmt.Sprintf("probe: setup: --secret: %v", err))}, nil
				}
				m.files[argv[i+1]] = string(b)
			}
		}
		s := m.snapshotLocked(paths)
		s.Present = m.presentLocked(argv)
		out, err := json.Marshal(s)
		if err != nil || !became {
			return provider.ExecResult{Stdout: out}, err
		}
		var b bytes.Buffer
		err = probe.WriteFrame(&b, probe.TagSnapshot, out)
		return provider.ExecResult{Stdout: b.Bytes()}, err
	}
}

func newWholeCase(t *testing.T) *wholeCase {
	t.Helper()
	sb := newMemSandbox(map[string]string{"/etc/os-release": "ID=debian"})
	sb.os = "debian-12"
	sb.bash = probe.Tool{Path: "/bin/bash", Resolved: "/usr/bin/bash", Version: "GNU bash 5.2", SHA256: "bb"}
	sb.procs = []probe.Process{{PID: 1, StartTime: 10, Comm: "init", State: "S"}}
	sb.self = witness.ID{PID: 50, StartTime: 100}
	sb.execs[probePath+" setup"] = probeSetup(sb)
	r := &runner{opts: Options{Out: t.TempDir(), TaskHome: ruleHome}, runID: "run-mem", key: "sk-canary-0123456789abcdef"}
	m := &adapter.Manifest{Name: "mem-harness", SHA256: "ad"}
	cr := r.newCase(caseSpec{id: "mem-harness@debian-12", attempt: 1, image: images.Image{Name: "debian-12", Ref: "sandproof/debian-12"}, adapter: m})
	return &wholeCase{sb: sb, cr: cr, token: ruleWant, challenge: "sandproof-challenge-mem0123"}
}

// goodHarness is what a harness that keeps every rule leaves: the
// deliverable written, its session dir made and removed, nothing
// running.
func goodHarness(w *wholeCase) {
	w.sb.write(w.cr.sess.home+"/.config/x", "state")
	w.sb.write(Deliverable, w.token)
	w.sb.remove(w.cr.sess.home + "/.config/x")
}

// run runs the case with harness as the adapter's part.
func (w *wholeCase) run(t *testing.T, harness func(w *wholeCase)) *reports.Evidence {
	t.Helper()
	ctx := context.Background()
	cr := w.cr
	var sb provider.Sandbox = memDiffer{w.sb}
	if w.kept {
		sb = keptSandbox{memDiffer{w.sb}}
	}
	if w.wrap != nil {
		sb = w.wrap(sb)
	}
	cr.r.prov = memProvider{sb}
	if err := os.MkdirAll(cr.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Setup as setup runs it, its agent apart.
	err := cr.stage(reports.StageSetup, func() error {
		var err error
		if w.bx.sb, err = cr.createSandbox(ctx, nil); err != nil {
			return err
		}
		var proc *provider.Process
		if w.bx.before, proc, err = cr.ownerSetup(ctx, w.bx.sb, w.challenge, cr.agentArgv("127.0.0.1:1"), io.Discard); err != nil {
			return err
		}
		proc.Stdin.Close()
		cr.ev.Before = beforeOf(w.bx.before, cr.owner.markers)
		return nil
	})
	cr.check("setup", clauseSetup, err == nil, "setup: %v", err)
	if err != nil {
		t.Logf("setup: %v", err)
	}
	if err == nil {
		harness(w)
		w.sb.self = witness.ID{PID: 90, StartTime: 900} // the probe after close is a new process
		var actErr error
		if w.activation != nil {
			actErr = cr.stage(reports.StageActivation, func() error { return w.activation(w) })
		}
		// As runSession: an interrupt that reached the case, or a stage
		// that stopped it, skips verify.
		if !cr.intr.interruptReached() && !stopsCase(actErr) {
			cr.verifyStage(func() error {
				_, err := cr.verify(ctx, w.bx.sb, verifyInput{before: w.bx.before, allMarkers: cr.owner.allMarkers, markers: cr.owner.markers,
					sessDir: cr.sess.dir, proof: loopProof{want: w.token}, allowed: cr.allowed(), key: cr.r.key})
				return err
			})
		}
	}
	scan := cr.startCanaryScan()
	cr.teardown(w.bx)
	bounds := relay.Bounds{Refused: map[string]int{}}
	cr.checkRelay(bounds, 0)
	cr.checkCanary(bounds, <-scan)
	cr.finish()
	return cr.ev
}

// failedChecks are the ids of the case's failed checks.
func failedChecks(ev *reports.Evidence) []string {
	var out []string
	for _, c := range ev.Checks {
		if c.Status == reports.StatusFailed {
			out = append(out, c.ID)
		}
	}
	return out
}

// A harness that keeps every rule passes the whole case, every check of
// each stage passed: the positive control of the rules below.
func TestWholeCaseGoodHarnessPasses(t *testing.T) {
	w := newWholeCase(t)
	ev := w.run(t, goodHarness)
	if ev.Status != reports.StatusPassed || !ev.Passed || ev.ErrorType != nil {
		t.Fatalf("status %s, passed %t, error_type %v; failed %q", ev.Status, ev.Passed, ev.ErrorType, failedChecks(ev))
	}
	var ids []string
	for _, c := range ev.Checks {
		ids = append(ids, c.ID)
		if c.Status != reports.StatusPassed {
			t.Errorf("%s: %s (%s)", c.ID, c.Status, c.Detail)
		}
	}
	want := []string{"setup", "verify.deliverable", "verify.markers", "verify.session_dir_removed", "verify.no_new_processes",
		"verify.tools_unchanged", "verify.fs_diff", "teardown.container_removed", "close.relay_bounded", "secrets.canary"}
	if !slices.Equal(ids, want) {
		t.Errorf("checks %q, want %q", ids, want)
	}
	// The stages ran on the sandbox, not beside it: setup's markers are
	// in it and the baseline, the probe's setup wrote the challenge, and
	// the sandbox is gone.
	for _, mk := range w.cr.owner.markers {
		if !markerPresent(w.bx.before, mk) || w.sb.files[mk] == "" {
			t.Errorf("marker %s: in the baseline %t, in the sandbox %q", mk, markerPresent(w.bx.before, mk), w.sb.files[mk])
		}
	}
	if got := w.sb.files[ChallengeFile]; got != w.challenge+"\n" {
		t.Errorf("challenge file %q, want %q (written by the probe's setup)", got, w.challenge+"\n")
	}
	if !w.sb.destroyed || !ev.OwnerTeardownContainerRemoved || !ev.VerifierPassed {
		t.Errorf("destroyed %t, teardown removed %t, verifier passed %t", w.sb.destroyed, ev.OwnerTeardownContainerRemoved, ev.VerifierPassed)
	}
}

// Each broken rule fails the whole case with the check that guards it,
// and only that one.
func TestWholeCaseBrokenRuleFailsItsCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check string
		bend  func(w *wholeCase) // before the run
		act   func(w *wholeCase) // the harness
	}{
		{"the deliverable holds another token", "verify.deliverable", nil, func(w *wholeCase) {
			goodHarness(w)
			w.sb.write(Deliverable, "proof-sandproof-challenge-forged")
		}},
		{"no deliverable", "verify.deliverable", nil, func(w *wholeCase) {
			goodHarness(w)
			w.sb.remove(Deliverable)
		}},
		{"a new process left", "verify.no_new_processes", nil, func(w *wholeCase) {
			goodHarness(w)
			w.sb.spawn(probe.Process{PID: 300, StartTime: 3000, Comm: "daemon", State: "S"})
		}},
		// The setup probe became the session agent (the baseline's self,
		// pid 50 started at 100): one that outlived its stop is new.
		{"the session agent left running", "verify.no_new_processes", nil, func(w *wholeCase) {
			goodHarness(w)
			w.sb.spawn(probe.Process{PID: 50, StartTime: 100, Comm: "sandagent", State: "S"})
		}},
		{"a marker changed", "verify.markers", nil, func(w *wholeCase) {
			goodHarness(w)
			w.sb.write(w.cr.owner.markers[2], "rewritten")
		}},
		{"a marker removed", "verify.markers", nil, func(w *wholeCase) {
			goodHarness(w)
			w.sb.remove(w.cr.owner.markers[0])
		}},
		// The probe reads at most its cap of a file it hashes: one past
		// it is not hashed, so never the token or the baseline's marker.
		{"the deliverable over the probe's cap", "verify.deliverable", nil, func(w *wholeCase) {
			goodHarness(w)
			w.sb.write(Deliverable, w.token+strings.Repeat("\x00", probe.MaxMarkerBytes))
		}},
		{"a marker over the probe's cap", "verify.markers", nil, func(w *wholeCase) {
			goodHarness(w)
			w.sb.write(w.cr.owner.markers[1], strings.Repeat("\x00", probe.MaxMarkerBytes+1))
		}},
		{"the session dir left", "verify.session_dir_removed", nil, func(w *wholeCase) {
			goodHarness(w)
			w.sb.write(w.cr.sess.dir, "")
		}},
		{"a file outside the allowed paths", "verify.fs_diff", nil, func(w *wholeCase) {
			goodHarness(w)
			w.sb.write("/usr/local/bin/left", "x")
		}},
		{"the key left in the case's files", "secrets.canary", nil, func(w *wholeCase) {
			goodHarness(w)
			if err := os.WriteFile(filepath.Join(w.cr.dir, "captured.log"), []byte("key="+w.cr.r.key), 0o600); err != nil {
				panic(err)
			}
		}},
		{"the image's os-release changed", "verify.tools_unchanged", nil, func(w *wholeCase) {
			goodHarness(w)
			w.sb.os = "debian-13"
		}},
		{"bash replaced", "verify.tools_unchanged", nil, func(w *wholeCase) {
			goodHarness(w)
			w.sb.bash.SHA256 = "cc"
		}},
		{"the engine keeps the container", "teardown.container_removed", func(w *wholeCase) { w.kept = true }, goodHarness},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWholeCase(t)
			if tc.bend != nil {
				tc.bend(w)
			}
			ev := w.run(t, tc.act)
			if got := failedChecks(ev); !slices.Equal(got, []string{tc.check}) {
				t.Errorf("failed checks %q, want only %s", got, tc.check)
			}
			if ev.Status != reports.StatusFailed || ev.Passed || ev.ErrorType == nil {
				t.Errorf("status %s, passed %t, error_type %v; want failed", ev.Status, ev.Passed, ev.ErrorType)
			}
			if verifyRule := strings.HasPrefix(tc.check, "verify."); ev.VerifierPassed == verifyRule {
				t.Errorf("verifier_passed %t with %s failed", ev.VerifierPassed, tc.check)
			}
		})
	}
}

// A case the run's interrupt reached during the adapter's part skips
// verify (what the interrupt cut short proves nothing) and is unknown,
// never passed; a check that failed on its own (teardown) still fails it.
func TestWholeCaseInterruptRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kept   bool
		status reports.Status
	}{
		{"nothing failed", false, reports.StatusUnknown},
		{"the engine kept the container", true, reports.StatusFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWholeCase(t)
			w.kept = tc.kept
			ic, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			w.cr.intr = interruptWatch{ic: ic}
			ev := w.run(t, func(w *wholeCase) {
				goodHarness(w)
				cancel(errors.New("SIGTERM"))
			})
			if ev.Status != tc.status || ev.Passed || !strings.HasPrefix(ev.Interrupted, "SIGTERM") {
				t.Errorf("status %s, passed %t, interrupted %q; want %s after SIGTERM", ev.Status, ev.Passed, ev.Interrupted, tc.status)
			}
			if st, _ := statusOf(ev, "interrupt"); st != reports.StatusUnknown {
				t.Errorf("interrupt check %q, want unknown", st)
			}
			if st, _ := statusOf(ev, "verify.deliverable"); st != "" {
				t.Errorf("verify ran after the interrupt (verify.deliverable %s)", st)
			}
		})
	}
}

// Setup reads the baseline as exactly one frame: a probe that prints it
// unframed (an older probe), one whose frame is cut short, and one that
// fails before printing each fail setup with a check saying which.
func TestSetupRefusesABaselineNotFramed(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		out        func(snap []byte) []byte
		code       int
	}{
		{"unframed", `bad frame: tag "{\"sc", want "SPsn"`, func(snap []byte) []byte { return snap }, 0},
		{"cut short", "bad frame: the stream ended after", func(snap []byte) []byte {
			var b bytes.Buffer
			probe.WriteFrame(&b, probe.TagSnapshot, snap)
			return b.Bytes()[:b.Len()-5]
		}, 0},
		{"the probe failed", "probe setup: exit 1: probe: setup dir", func([]byte) []byte { return nil }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWholeCase(t)
			setup := probeSetup(w.sb)
			w.sb.execs[probePath+" setup"] = func(spec provider.ExecSpec) (provider.ExecResult, error) {
				res, err := setup(spec)
				if tc.code != 0 {
					return provider.ExecResult{ExitCode: tc.code, Stderr: []byte(`probe: setup dir "/task": exists and is not a directory`)}, err
				}
				b, _ := probe.ReadFrame(bytes.NewReader(res.Stdout), probe.TagSnapshot, 1<<20)
				res.Stdout = tc.out(b)
				return res, err
			}
			ev := w.run(t, goodHarness)
			if got := failedChecks(ev); !slices.Equal(got, []string{"setup"}) || !strings.Contains(ev.Checks[0].Detail, tc.want) {
				t.Fatalf("failed %q, setup's detail %q; want setup failed saying %q", got, ev.Checks[0].Detail, tc.want)
			}
		})
	}
}

// The read-back of what the engine applied runs beside the probe's setup
// run; when it fails, setup fails with its error even though the probe's
// run gave a baseline, and nothing else of the case is judged failed.
func TestSetupFailsWhenTheSandboxCannotBeReadBack(t *testing.T) {
	w := newWholeCase(t)
	w.sb.inspectErr = errors.New("engine: inspect refused")
	ev := w.run(t, goodHarness)
	if got := failedChecks(ev); !slices.Equal(got, []string{"setup"}) || !strings.Contains(ev.Checks[0].Detail, "inspect refused") {
		t.Fatalf("failed %q, setup's detail %q; want setup failed with the inspect's error", got, ev.Checks[0].Detail)
	}
	if w.sb.files[ChallengeFile] == "" {
		t.Fatal("the probe's setup run did not run beside the read-back")
	}
}
