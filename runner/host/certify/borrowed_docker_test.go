package certify_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
)

// replaceThen is the red team's attack on the owner's task state
// (redteam/borrowed-replace.yaml, branch rt-rt-ac): the task user may
// write /task, so it copies the uid-65534 state, deletes it and moves
// its copy into its place, bytes and all. `ls -lni` before and after is
// the positive control: the owner and the inode changed.
const replaceThen = `f={task_dir}/owner-service.state
ls -lni $f > ` + attackOut + `
cp $f {task_dir}/.s && rm -f $f && mv {task_dir}/.s $f && ls -lni $f >> ` + attackOut

// A harness that replaced the owner's state file with its own copy passed
// scenario.borrowed_kept ("unchanged: true": only the hash was compared),
// and the case passed. The probe now reads, as root, which file the state
// is and whose (fstat: owner, inode, mode) before the launch and after
// close: the case fails, naming the owner and the file that changed. The
// honest mini-agent still passes borrowed.
func TestCertifyBorrowedStateCannotBeReplaced(t *testing.T) {
	img := needEngine(t, "debian-12")[0]
	replace := miniagentVariant(t, "fake-replace-state", variantSpec{after: replaceThen, captures: map[string]string{"attack": attackOut}})
	honest := load(t, "miniagent-opencode")[0]
	out, evs := certifyCases(t, img, []*adapter.Manifest{honest, replace}, certify.ScenarioBorrowed)

	ev := evs[certify.CaseID(img.Name, replace.Name, certify.ScenarioBorrowed)]
	if ev == nil {
		t.Fatal("no evidence for the replacing harness")
	}
	lines := strings.Split(capturedTask(t, filepath.Join(out, "cases", strings.ReplaceAll(ev.CaseID, "/", "__")), attackOut), "\n")
	if len(lines) != 2 {
		t.Fatalf("positive control: the attack's ls lines %q, want before and after", lines)
	}
	before, after := strings.Fields(lines[0]), strings.Fields(lines[1])
	if len(before) < 5 || len(after) < 5 || before[3] != "65534" || after[3] != "1000" || before[0] == after[0] {
		t.Fatalf("positive control: the state was %q, then %q; want uid 65534 then 1000, another inode", lines[0], lines[1])
	}
	c := checkOf(ev, "scenario.borrowed_kept")
	if c.Status != reports.StatusFailed || ev.Status != reports.StatusFailed ||
		!strings.Contains(c.Detail, "owner 1000:1000, was 65534:65534") || !strings.Contains(c.Detail, "replaced") {
		t.Errorf("the state replaced by the harness: case %s, borrowed_kept %s %q; want both failed, naming the owner and the file", ev.Status, c.Status, c.Detail)
	}
	t.Logf("%s: %s: %s", replace.Name, ev.Status, c.Detail)

	// The positive control of the rule: the honest harness passes, its
	// state the owner's file as written.
	hev := evs[certify.CaseID(img.Name, honest.Name, certify.ScenarioBorrowed)]
	if hev == nil {
		t.Fatal("no evidence for the honest mini-agent")
	}
	if hev.Status != reports.StatusPassed || checkOf(hev, "scenario.borrowed_kept").Status != reports.StatusPassed {
		t.Errorf("the honest mini-agent: %s; want borrowed passed (not passed: %v)", hev.Status, notPassed(hev))
	}
}
