package certify

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/probe"
	"github.com/sandproof/sandproof/runner/witness"
)

// The verdict rules of verify and the judge, without an engine: the
// in-memory sandbox (memsandbox_test.go) holds the case's files and
// process table after close and answers the probe's snapshot, the
// deliverable's download and the filesystem diff from them, so each rule
// can be broken on its own, by changing the sandbox as a harness would,
// and the check it guards seen failing (the host-path mutants,
// docs/mutation.md).

const (
	ruleHome    = "/home/task"
	ruleSession = "/var/lib/sandproof/s1"
	ruleWant    = "proof-sandproof-challenge-0123456789"
	ruleReq     = "/etc/requirement"
)

var ruleMarkers = []string{
	ruleHome + "/.config/sandproof-owner/marker",
	ruleHome + "/.local/share/sandproof-owner/marker",
	ruleHome + "/.cache/sandproof-owner/marker",
	ruleHome + "/.local/state/sandproof-owner/marker",
}

// world is a clean case after close: every verify check passes on it.
// before is the probe's baseline, taken from the sandbox as setup takes
// it; the harness then wrote the deliverable, and its session dir is gone.
type world struct {
	before probe.Snapshot
	sb     *memSandbox
	proof  loopProof
	differ bool
}

func cleanWorld(t *testing.T) *world {
	t.Helper()
	files := map[string]string{ruleReq: "lib"}
	for _, m := range ruleMarkers {
		files[m] = "aa"
	}
	sb := newMemSandbox(files)
	sb.os = "debian-12"
	sb.bash = probe.Tool{Path: "/bin/bash", Resolved: "/usr/bin/bash", Version: "GNU bash 5.2", SHA256: "bb"}
	sb.procs = []probe.Process{{PID: 1, StartTime: 10, Comm: "init", State: "S"}}
	sb.self = witness.ID{PID: 50, StartTime: 100}
	before, err := snapshot(context.Background(), sb, append(slices.Clone(ruleMarkers), ruleReq))
	if err != nil {
		t.Fatalf("baseline: %v", err)
	}
	sb.self = witness.ID{PID: 90, StartTime: 900} // the probe after close is a new process
	sb.write(Deliverable, ruleWant)
	return &world{before: before, sb: sb, proof: loopProof{want: ruleWant}, differ: true}
}

func (w *world) verify(t *testing.T) *reports.Evidence {
	t.Helper()
	cr := &caseRun{r: &runner{opts: Options{TaskHome: ruleHome}}, ev: &reports.Evidence{Status: reports.StatusUnknown}}
	var sb provider.Sandbox = w.sb
	if w.differ {
		sb = memDiffer{w.sb}
	}
	in := verifyInput{before: w.before, allMarkers: append(slices.Clone(ruleMarkers), ruleReq), markers: ruleMarkers,
		sessDir: ruleSession, proof: w.proof, allowed: cr.allowed()}
	if _, err := cr.verify(context.Background(), sb, in); err != nil {
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
	ev := cleanWorld(t).verify(t)
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
			w.sb.spawn(probe.Process{PID: 300, StartTime: 3000, Comm: "held", State: "T"})
		}},
		{"one new sleeping process", "verify.no_new_processes", func(w *world) {
			w.sb.spawn(probe.Process{PID: 301, StartTime: 3001, Comm: "daemon", State: "S"})
		}},
		{"a marker rewritten", "verify.markers", func(w *world) { w.sb.write(ruleMarkers[0], "cc") }},
		{"a marker the snapshot does not report", "verify.markers", func(w *world) {
			w.sb.unreported[ruleMarkers[0]] = true
		}},
		{"a marker that cannot be read", "verify.markers", func(w *world) { w.sb.unreadable[ruleMarkers[1]] = "permission denied" }},
		// The probe reports an error instead of a hash: a marker it could
		// not read at the baseline either would have two empty hashes.
		{"a marker unreadable at the baseline and after close", "verify.markers", func(w *world) {
			w.sb.unreadable[ruleMarkers[1]] = "permission denied"
			for i := range w.before.Markers {
				if w.before.Markers[i].Path == ruleMarkers[1] {
					w.before.Markers[i] = probe.Marker{Path: ruleMarkers[1], Error: "permission denied"}
				}
			}
		}},
		{"the session dir still there", "verify.session_dir_removed", func(w *world) { w.sb.write(ruleSession, "") }},
		{"the session dir not reported on", "verify.session_dir_removed", func(w *world) {
			w.sb.unreported[ruleSession] = true
		}},
		{"a changed os-release", "verify.tools_unchanged", func(w *world) { w.sb.os = "debian-13" }},
		{"a path beside /task", "verify.fs_diff", func(w *world) {
			w.sb.write("/task2/x", "x")
		}},
		{"a deleted directory above an allowed path", "verify.fs_diff", func(w *world) {
			w.sb.extraChanges = []provider.Change{{Path: "/home/task/.config", Kind: provider.ChangeDeleted}}
		}},
		{"a path sharing an allowed path's prefix", "verify.fs_diff", func(w *world) {
			w.sb.write(ruleHome+"/.conf", "x")
		}},
		{"the deliverable holds other content than the write call's", "verify.deliverable", func(w *world) {
			w.sb.write(Deliverable, "proof-sandproof-challenge-forged")
		}},
		{"no deliverable", "verify.deliverable", func(w *world) { w.sb.remove(Deliverable) }},
		{"an empty deliverable after a shell write", "verify.deliverable", func(w *world) {
			w.proof = loopProof{wantIn: `{"command":"printf %s ` + ruleWant + ` > /task/deliverable.txt"}`}
			w.sb.write(Deliverable, "")
		}},
		{"a 7-byte deliverable after a shell write", "verify.deliverable", func(w *world) {
			w.proof = loopProof{wantIn: `{"command":"printf %s ` + ruleWant + ` > /task/deliverable.txt"}`}
			w.sb.write(Deliverable, "printf ")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := cleanWorld(t)
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
	w := cleanWorld(t)
	w.proof = loopProof{wantIn: `{"command":"printf %s ` + ruleWant + ` > /task/deliverable.txt"}`}
	// Not the content of a write call: the file is downloaded and found
	// in the command.
	ev := w.verify(t)
	if st, detail := statusOf(ev, "verify.deliverable"); st != reports.StatusPassed {
		t.Fatalf("verify.deliverable %s (%s), want passed: %q is in the command", st, detail, ruleWant)
	}
	if ev.After.Deliverable != ruleWant {
		t.Fatalf("after.deliverable %q, want %q", ev.After.Deliverable, ruleWant)
	}
}

// A diff that could not be read ends verify with its error: the checks
// before it are recorded, verify.fs_diff is not, and verifier_passed is
// not set (the stage's provider check fails the case).
func TestVerifyDiffErrorIsNotPassed(t *testing.T) {
	w := cleanWorld(t)
	w.sb.diffErr = provider.Errorf("diff", "mem", provider.ErrGone)
	cr := &caseRun{r: &runner{opts: Options{TaskHome: ruleHome}}, ev: &reports.Evidence{Status: reports.StatusUnknown}}
	in := verifyInput{before: w.before, allMarkers: append(slices.Clone(ruleMarkers), ruleReq), markers: ruleMarkers,
		sessDir: ruleSession, proof: w.proof, allowed: cr.allowed()}
	_, err := cr.verify(context.Background(), memDiffer{w.sb}, in)
	if !errors.Is(err, provider.ErrGone) {
		t.Fatalf("verify: %v, want the diff's error", err)
	}
	if st, _ := statusOf(cr.ev, "verify.fs_diff"); st != "" || cr.ev.VerifierPassed {
		t.Fatalf("verify.fs_diff %q, verifier_passed %t after the diff failed; want no check, false", st, cr.ev.VerifierPassed)
	}
	if st, _ := statusOf(cr.ev, "verify.tools_unchanged"); st != reports.StatusPassed {
		t.Fatalf("verify.tools_unchanged %q: the checks before the diff are recorded", st)
	}
}

// Without a provider.Differ the diff is unknown, and a case whose other
// checks all passed is not passed (the judge, below, on the real checks).
func TestVerifyWithoutDifferIsNotPassed(t *testing.T) {
	w := cleanWorld(t)
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
