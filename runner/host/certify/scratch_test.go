package certify

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// ruleScratch is an adapter's scratch as OpenClaw's manifest names it.
var ruleScratch = []string{"/tmp/openclaw*", "/var/tmp/oc/lock"}

// verifyScratch runs verify over the world with the adapter's scratch.
func (w *world) verifyScratch(t *testing.T, scratch []string) *reports.Evidence {
	t.Helper()
	cr := &caseRun{r: &runner{opts: Options{TaskHome: ruleHome}}, ev: &reports.Evidence{Status: reports.StatusUnknown}}
	var sb provider.Sandbox = w.sb
	if w.differ {
		sb = memDiffer{w.sb}
	}
	in := verifyInput{before: w.before, allMarkers: append(slices.Clone(ruleMarkers), ruleReq), markers: ruleMarkers,
		sessDir: ruleSession, proof: w.proof, allowed: cr.allowed(), scratch: scratch, scratchRemoved: []string{"/tmp/openclaw"}}
	if _, err := cr.verify(context.Background(), sb, in); err != nil {
		t.Fatalf("verify: %v", err)
	}
	return cr.ev
}

// The positive control: close removed the scratch, so the diff shows
// only its directories modified; both checks pass, and the case does.
func TestVerifyScratchRemovedPasses(t *testing.T) {
	w := cleanWorld(t)
	w.sb.extraChanges = []provider.Change{{Path: "/tmp", Kind: provider.ChangeModified}, {Path: "/var/tmp/oc", Kind: provider.ChangeModified},
		{Path: "/var", Kind: provider.ChangeModified}}
	ev := w.verifyScratch(t, ruleScratch)
	for _, id := range []string{"verify.adapter_scratch_removed", "verify.fs_diff"} {
		if st, detail := statusOf(ev, id); st != reports.StatusPassed {
			t.Errorf("%s: %s (%s), want passed", id, st, detail)
		}
	}
	if !ev.VerifierPassed {
		t.Fatalf("verifier_passed false: %+v", ev.Checks)
	}
	if _, detail := statusOf(ev, "verify.adapter_scratch_removed"); !strings.Contains(detail, `close removed ["/tmp/openclaw"]`) {
		t.Errorf("the detail does not say what close removed: %s", detail)
	}
	// Without scratch in the manifest there is no such check, and the
	// same modified /tmp fails fs_diff: the scratch is what allows it.
	ev = w.verifyScratch(t, nil)
	if st, _ := statusOf(ev, "verify.adapter_scratch_removed"); st != "" {
		t.Fatalf("verify.adapter_scratch_removed %s without scratch, want no check", st)
	}
	if st, _ := statusOf(ev, "verify.fs_diff"); st != reports.StatusFailed {
		t.Fatalf("verify.fs_diff %s with /tmp modified and no scratch, want failed", st)
	}
}

// Each rule broken on its own: the check that guards it fails, naming
// the path, and every other check passes.
func TestVerifyScratchRules(t *testing.T) {
	for _, tc := range []struct {
		name, check, names string
		bend               func(w *world)
	}{
		{"a lock file close left", "verify.adapter_scratch_removed", "/tmp/openclaw-state-locks-0/state.lock.sqlite",
			func(w *world) { w.sb.write("/tmp/openclaw-state-locks-0/state.lock.sqlite", "") }},
		{"the log dir close left", "verify.adapter_scratch_removed", "/tmp/openclaw",
			func(w *world) {
				w.sb.extraChanges = []provider.Change{{Path: "/tmp/openclaw", Kind: provider.ChangeAdded}}
			}},
		{"a literal scratch path close left", "verify.adapter_scratch_removed", "/var/tmp/oc/lock",
			func(w *world) { w.sb.write("/var/tmp/oc/lock", "1") }},
		{"a file beside the scratch", "verify.fs_diff", "/tmp/other",
			func(w *world) { w.sb.write("/tmp/other", "x") }},
		{"a name sharing the literal's prefix", "verify.fs_diff", "/var/tmp/oc/lock2",
			func(w *world) { w.sb.write("/var/tmp/oc/lock2", "x") }},
		{"the scratch's directory added, not modified", "verify.fs_diff", "/var/tmp/oc",
			func(w *world) {
				w.sb.extraChanges = []provider.Change{{Path: "/var/tmp/oc", Kind: provider.ChangeAdded}}
			}},
		// Close removing a file the image had is an image change, not
		// scratch.
		{"an image file the scratch matches, deleted", "verify.fs_diff", "/tmp/openclaw.conf",
			func(w *world) { w.sb.image["/tmp/openclaw.conf"] = "image's" }},
		{"a path beside /task the scratch does not name", "verify.fs_diff", "/task2",
			func(w *world) { w.sb.write("/task2/openclaw", "x") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := cleanWorld(t)
			tc.bend(w)
			ev := w.verifyScratch(t, ruleScratch)
			for _, c := range ev.Checks {
				want := reports.StatusPassed
				if c.ID == tc.check {
					want = reports.StatusFailed
					if !strings.Contains(c.Detail, tc.names) {
						t.Errorf("%s: %q does not name %s", c.ID, c.Detail, tc.names)
					}
				}
				if c.Status != want {
					t.Errorf("%s: %s (%s), want %s", c.ID, c.Status, c.Detail, want)
				}
			}
			if st, _ := statusOf(ev, tc.check); st != reports.StatusFailed {
				t.Errorf("%s not recorded failed", tc.check)
			}
			if ev.VerifierPassed {
				t.Errorf("verifier_passed true with %s failed", tc.check)
			}
		})
	}
}

// A provider that cannot diff cannot say the scratch is gone: unknown,
// as verify.fs_diff is.
func TestVerifyScratchWithoutDiffIsUnknown(t *testing.T) {
	w := cleanWorld(t)
	w.differ = false
	ev := w.verifyScratch(t, ruleScratch)
	if st, detail := statusOf(ev, "verify.adapter_scratch_removed"); st != reports.StatusUnknown {
		t.Fatalf("verify.adapter_scratch_removed %s (%s), want unknown", st, detail)
	}
}
