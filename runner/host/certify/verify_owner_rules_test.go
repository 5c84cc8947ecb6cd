package certify

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/probe"
	"github.com/sandproof/sandproof/runner/witness"
)

// verify.no_new_processes beside the owner's own processes (borrowed's
// service) and new zombies, on the in-memory sandbox of
// verdict_rules_test.go (the host-path mutants, docs/mutation.md).

// verifyOwned runs verify on w with owner as the owner's processes.
func (w *world) verifyOwned(t *testing.T, owner []witness.ID) *reports.Evidence {
	t.Helper()
	cr := &caseRun{r: &runner{opts: Options{TaskHome: ruleHome}}, ev: &reports.Evidence{Status: reports.StatusUnknown}}
	in := verifyInput{before: w.before, allMarkers: append(slices.Clone(ruleMarkers), ruleReq), markers: ruleMarkers,
		sessDir: ruleSession, proof: w.proof, allowed: cr.allowed(), ownerProcs: owner}
	if _, err := cr.verify(context.Background(), memDiffer{w.sb}, in); err != nil {
		t.Fatalf("verify: %v", err)
	}
	return cr.ev
}

// The owner's own process, started after the baseline, is left out of
// the new processes by its identity (pid and start time): a harness
// process that has the owner's pid with another start time (the service
// died, its pid was reused) is a new process. The positive control: the
// owner's process itself is left out.
func TestVerifyOwnerProcessesByIdentity(t *testing.T) {
	service := witness.ID{PID: 400, StartTime: 4000}
	w := cleanWorld(t)
	w.sb.spawn(probe.Process{PID: 400, StartTime: 4000, Comm: "service", State: "S"})
	if st, detail := statusOf(w.verifyOwned(t, []witness.ID{service}), "verify.no_new_processes"); st != reports.StatusPassed {
		t.Fatalf("positive control: the owner's service: %s (%s), want passed", st, detail)
	}
	w = cleanWorld(t)
	w.sb.spawn(probe.Process{PID: 400, StartTime: 4444, Comm: "harness", State: "S"})
	if st, detail := statusOf(w.verifyOwned(t, []witness.ID{service}), "verify.no_new_processes"); st != reports.StatusFailed {
		t.Errorf("a harness process on the service's pid: %s (%s), want failed", st, detail)
	}
}

// A new zombie is dead: named in verify.no_new_processes's detail, not
// failed. The positive control: the zombie is in the diff.
func TestVerifyNewZombieIsNamedNotFailed(t *testing.T) {
	w := cleanWorld(t)
	w.sb.spawn(probe.Process{PID: 500, StartTime: 5000, Comm: "reaped-late", State: "Z", Threads: 1})
	ev := w.verifyOwned(t, nil)
	st, detail := statusOf(ev, "verify.no_new_processes")
	if !strings.Contains(detail, "500 reaped-late") {
		t.Fatalf("positive control: the zombie is not named: %q", detail)
	}
	if st != reports.StatusPassed {
		t.Errorf("a new zombie: %s (%s), want passed", st, detail)
	}
}
