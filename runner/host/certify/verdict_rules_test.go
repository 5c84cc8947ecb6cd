package certify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"testing"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/probe"
	"github.com/sandproof/sandproof/runner/witness"
)

// The verdict rules of verify and the judge, without an engine: a fake
// sandbox answers the probe's snapshot, the deliverable's download and the
// filesystem diff, so each rule can be broken on its own and the check it
// guards seen failing (the host-path mutants, docs/mutation.md).

// fakeSandbox is what verify reads after close.
type fakeSandbox struct {
	after   probe.Snapshot
	files   map[string]string // sandbox path -> content, for downloads
	changes []provider.Change
}

func (f *fakeSandbox) ID() string { return "fake" }

func (f *fakeSandbox) Exec(_ context.Context, spec provider.ExecSpec) (provider.ExecResult, error) {
	if len(spec.Argv) < 2 || spec.Argv[0] != probePath || spec.Argv[1] != "snapshot" {
		return provider.ExecResult{ExitCode: 127, Stderr: []byte("fake sandbox: only the probe's snapshot runs here")}, nil
	}
	out, err := json.Marshal(f.after)
	return provider.ExecResult{Stdout: out}, err
}

func (f *fakeSandbox) Fetch(_ context.Context, p, hostPath string, _ provider.FetchLimits) (provider.Fetched, error) {
	data, ok := f.files[p]
	if !ok {
		return provider.Fetched{}, provider.ErrPathNotFound
	}
	return provider.Fetched{}, os.WriteFile(hostPath, []byte(data), 0o600)
}

func (f *fakeSandbox) Upload(context.Context, string, io.Reader, int64, os.FileMode, int, int) error {
	return nil
}
func (f *fakeSandbox) Mkdir(context.Context, string, os.FileMode, int, int) error { return nil }
func (f *fakeSandbox) Download(context.Context, string, string) error {
	return provider.ErrPathNotFound
}
func (f *fakeSandbox) Inspect(context.Context) (provider.Info, error) {
	return provider.Info{ID: "fake", Exists: true, Running: true}, nil
}
func (f *fakeSandbox) Destroy(context.Context) error { return nil }

// differSandbox is a fakeSandbox that can report its filesystem changes.
type differSandbox struct{ *fakeSandbox }

func (d differSandbox) Changes(context.Context) ([]provider.Change, string, error) {
	return d.changes, "fake", nil
}

const (
	ruleHome    = "/home/task"
	ruleSession = "/var/lib/sandproof/s1"
	ruleWant    = "proof-sandproof-challenge-0123456789"
)

var ruleMarkers = []string{
	ruleHome + "/.config/sandproof-owner/marker",
	ruleHome + "/.local/share/sandproof-owner/marker",
	ruleHome + "/.cache/sandproof-owner/marker",
	ruleHome + "/.local/state/sandproof-owner/marker",
}

// world is a clean case after close: every verify check passes on it.
type world struct {
	before probe.Snapshot
	sb     *fakeSandbox
	proof  loopProof
	differ bool
}

func cleanWorld() *world {
	markers := func() []probe.Marker {
		var ms []probe.Marker
		for _, m := range ruleMarkers {
			ms = append(ms, probe.Marker{Path: m, SHA256: "aa", Size: 2})
		}
		return ms
	}
	procs := []probe.Process{{PID: 1, StartTime: 10, Comm: "init", State: "S"}}
	bash := probe.Tool{Path: "/bin/bash", Resolved: "/usr/bin/bash", Version: "GNU bash 5.2", SHA256: "bb"}
	before := probe.Snapshot{OS: "debian-12", Bash: bash, Markers: markers(), Processes: procs, Self: witness.ID{PID: 50, StartTime: 100}}
	sum := sha256.Sum256([]byte(ruleWant))
	after := probe.Snapshot{OS: "debian-12", Bash: bash, Self: witness.ID{PID: 90, StartTime: 900},
		Processes: append(append([]probe.Process(nil), procs...), probe.Process{PID: 90, StartTime: 900, Comm: "probe", State: "R"}),
		Markers: append(markers(),
			probe.Marker{Path: Deliverable, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(ruleWant))},
			probe.Marker{Path: ruleSession, Missing: true})}
	return &world{
		before: before,
		sb:     &fakeSandbox{after: after, files: map[string]string{Deliverable: ruleWant}},
		proof:  loopProof{want: ruleWant},
		differ: true,
	}
}

// marker returns the after snapshot's entry for path.
func (w *world) marker(path string) *probe.Marker {
	for i := range w.sb.after.Markers {
		if w.sb.after.Markers[i].Path == path {
			return &w.sb.after.Markers[i]
		}
	}
	return nil
}

func (w *world) verify(t *testing.T) *reports.Evidence {
	t.Helper()
	cr := &caseRun{r: &runner{opts: Options{TaskHome: ruleHome}}, ev: &reports.Evidence{Status: reports.StatusUnknown}}
	var sb provider.Sandbox = w.sb
	if w.differ {
		sb = differSandbox{w.sb}
	}
	all := append(append([]string(nil), ruleMarkers...), "/etc/requirement")
	if err := cr.verify(context.Background(), sb, w.before, all, ruleMarkers, w.proof, ruleSession); err != nil {
		t.Fatalf("verify: %v", err)
	}
	return cr.ev
}

func statusOf(ev *reports.Evidence, id string) (reports.Status, string) {
	for _, c := range ev.Checks {
		if c.ID == id {
			return c.Status, c.Detail
		}
	}
	return "", ""
}

// Every verify check passes on the clean world: the positive control of
// each rule below, which changes one thing and sees one check fail.
func TestVerifyCleanWorldPasses(t *testing.T) {
	ev := cleanWorld().verify(t)
	for _, id := range []string{"verify.deliverable", "verify.markers", "verify.session_dir_removed", "verify.no_new_processes", "verify.tools_unchanged", "verify.fs_diff"} {
		if st, detail := statusOf(ev, id); st != reports.StatusPassed {
			t.Errorf("%s: %s (%s), want passed on a clean world", id, st, detail)
		}
	}
	if !ev.VerifierPassed || ev.ErrorType != nil {
		t.Fatalf("verifier_passed %t, error_type %v on a clean world", ev.VerifierPassed, ev.ErrorType)
	}
}

func TestVerifyRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check string
		bend  func(w *world)
	}{
		{"a new process left stopped (state T)", "verify.no_new_processes", func(w *world) {
			w.sb.after.Processes = append(w.sb.after.Processes, probe.Process{PID: 300, StartTime: 3000, Comm: "held", State: "T"})
		}},
		{"one new sleeping process", "verify.no_new_processes", func(w *world) {
			w.sb.after.Processes = append(w.sb.after.Processes, probe.Process{PID: 301, StartTime: 3001, Comm: "daemon", State: "S"})
		}},
		{"a marker rewritten", "verify.markers", func(w *world) { w.marker(ruleMarkers[0]).SHA256 = "cc" }},
		{"a marker the snapshot does not report", "verify.markers", func(w *world) {
			w.sb.after.Markers = w.sb.after.Markers[1:]
		}},
		{"a marker that cannot be read", "verify.markers", func(w *world) { w.marker(ruleMarkers[1]).Error = "permission denied" }},
		{"the session dir still there", "verify.session_dir_removed", func(w *world) { w.marker(ruleSession).Missing = false }},
		{"the session dir not reported on", "verify.session_dir_removed", func(w *world) {
			ms := w.sb.after.Markers[:0]
			for _, m := range w.sb.after.Markers {
				if m.Path != ruleSession {
					ms = append(ms, m)
				}
			}
			w.sb.after.Markers = ms
		}},
		{"a changed os-release", "verify.tools_unchanged", func(w *world) { w.sb.after.OS = "debian-13" }},
		{"a path beside /task", "verify.fs_diff", func(w *world) {
			w.sb.changes = []provider.Change{{Path: "/task2/x", Kind: provider.ChangeAdded}}
		}},
		{"a deleted directory above an allowed path", "verify.fs_diff", func(w *world) {
			w.sb.changes = []provider.Change{{Path: "/home/task/.config", Kind: provider.ChangeDeleted}}
		}},
		{"a path sharing an allowed path's prefix", "verify.fs_diff", func(w *world) {
			w.sb.changes = []provider.Change{{Path: ruleHome + "/.conf", Kind: provider.ChangeAdded}}
		}},
		{"an empty deliverable after a shell write", "verify.deliverable", func(w *world) {
			w.proof = loopProof{wantIn: `{"command":"printf %s ` + ruleWant + ` > /task/deliverable.txt"}`}
			w.marker(Deliverable).SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
			w.sb.files[Deliverable] = ""
		}},
		{"a 7-byte deliverable after a shell write", "verify.deliverable", func(w *world) {
			w.proof = loopProof{wantIn: `{"command":"printf %s ` + ruleWant + ` > /task/deliverable.txt"}`}
			w.marker(Deliverable).SHA256 = "00"
			w.sb.files[Deliverable] = "printf "
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := cleanWorld()
			tc.bend(w)
			ev := w.verify(t)
			for _, c := range ev.Checks {
				want := reports.StatusPassed
				if c.ID == tc.check {
					want = reports.StatusFailed
				}
				if c.Status != want {
					t.Errorf("%s: %s (%s), want %s", c.ID, c.Status, c.Detail, want)
				}
			}
			if ev.VerifierPassed {
				t.Errorf("verifier_passed true with %s failed", tc.check)
			}
		})
	}
}

// A shell write: the file's content, found in the command the model
// issued, is the deliverable (the positive control of the two rules above).
func TestVerifyShellWriteFoundInCommand(t *testing.T) {
	w := cleanWorld()
	w.proof = loopProof{wantIn: `{"command":"printf %s ` + ruleWant + ` > /task/deliverable.txt"}`}
	w.marker(Deliverable).SHA256 = "00" // not the hash of a write call's content: downloaded
	ev := w.verify(t)
	if st, detail := statusOf(ev, "verify.deliverable"); st != reports.StatusPassed {
		t.Fatalf("verify.deliverable %s (%s), want passed: %q is in the command", st, detail, ruleWant)
	}
	if ev.After.Deliverable != ruleWant {
		t.Fatalf("after.deliverable %q, want %q", ev.After.Deliverable, ruleWant)
	}
}

// Without a provider.Differ the diff is unknown, and a case whose other
// checks all passed is not passed (the judge, below, on the real checks).
func TestVerifyWithoutDifferIsNotPassed(t *testing.T) {
	w := cleanWorld()
	w.differ = false
	ev := w.verify(t)
	if st, _ := statusOf(ev, "verify.fs_diff"); st != reports.StatusUnknown {
		t.Fatalf("verify.fs_diff %s without a Differ, want unknown", st)
	}
	cr := &caseRun{ev: ev}
	cr.finish()
	if ev.Status == reports.StatusPassed || ev.Passed {
		t.Fatalf("judged %s (passed %t) with verify.fs_diff unknown, want not passed", ev.Status, ev.Passed)
	}
}

// The judge: an unknown check with no failed one does not pass the case;
// all passed does (positive control).
func TestJudgeUnknownCheckIsNotPassed(t *testing.T) {
	passed := reports.Check{ID: "verify.deliverable", Status: reports.StatusPassed}
	cr := &caseRun{ev: &reports.Evidence{Status: reports.StatusUnknown, Checks: []reports.Check{passed, passed}}}
	cr.finish()
	if cr.ev.Status != reports.StatusPassed || !cr.ev.Passed {
		t.Fatalf("every check passed: %s passed=%t, want passed", cr.ev.Status, cr.ev.Passed)
	}
	cr = &caseRun{ev: &reports.Evidence{Status: reports.StatusUnknown,
		Checks: []reports.Check{passed, {ID: "verify.fs_diff", Status: reports.StatusUnknown}}}}
	cr.finish()
	if cr.ev.Status == reports.StatusPassed || cr.ev.Passed {
		t.Fatalf("an unknown check, none failed: %s passed=%t, want not passed", cr.ev.Status, cr.ev.Passed)
	}
	if st, _ := reports.Judge(cr.ev); st == reports.StatusPassed {
		t.Fatalf("the report judges the record passed")
	}
}

// A skipped case stays skipped and not passed, whatever its checks say.
func TestJudgeSkippedIsNotPassed(t *testing.T) {
	cr := &caseRun{ev: &reports.Evidence{Status: reports.StatusSkipped, Passed: true, SkipReason: "lacks glibc",
		Checks: []reports.Check{{ID: "setup", Status: reports.StatusPassed}}}}
	cr.finish()
	if cr.ev.Status != reports.StatusSkipped || cr.ev.Passed {
		t.Fatalf("skipped case: %s passed=%t, want skipped, not passed", cr.ev.Status, cr.ev.Passed)
	}
}

func TestDiffAllowListSharedPrefix(t *testing.T) {
	allowed := []string{"/task", "/home/task/.config/sandproof-owner"}
	for _, p := range []string{"/home/task/.conf", "/home/ta", "/tas"} {
		if isAllowed(p, allowed, true) {
			t.Errorf("isAllowed(%q) = true: it shares a prefix with an allowed path but is not on the way to one", p)
		}
	}
	if !isAllowed("/home/task/.config", allowed, true) || !isAllowed("/home", allowed, true) {
		t.Errorf("a directory on the way to an allowed path is not allowed")
	}
}
