package certify_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
)

// TestCertifyHostileSparseFiles: a harness that, once its work is done,
// makes the deliverable a sparse 16 GiB file and one of the owner's XDG
// markers a sparse 1 GiB one (issue 35, attack 7: verify hashed them
// whole, 112 s for 16 GiB). Verify reads at most the probe's cap of each
// and ends: the record says each is over the cap and not hashed (the size
// from fstat in the sandbox is the positive control that the files were
// that big), the deliverable is not downloaded, and the case fails on
// verify.deliverable and verify.markers. Nothing here is timed; the
// stage's seconds are logged.
func TestCertifyHostileSparseFiles(t *testing.T) {
	imgs := needEngine(t, "debian-12")
	warden, probe, _ := binaries(t)
	const marker = "/home/task/.config/sandproof-owner/marker"
	script := "truncate -s 16G /task/deliverable.txt && truncate -s 1G " + marker
	m := hostileVariant(t, "miniagent-pi", "hostile-sparse", script, "")
	out := t.TempDir()
	var progress syncBuf
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	_, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{m}, Images: imgs, APIKey: certify.NewCanary(),
		Warden: warden, Probe: probe, Out: out, Progress: &progress})
	if err != nil {
		t.Logf("certify: %v", err)
	}
	ev := readEvidence(t, out)["debian-12/hostile-sparse"]
	if ev == nil {
		t.Fatalf("no evidence: %v\n%s", err, progress.String())
	}
	for _, s := range ev.Stages {
		if s.Name == reports.StageVerify {
			t.Logf("verify took %.1fs", s.Seconds)
		}
	}
	d := checkOf(ev, "verify.deliverable")
	if d.Status != reports.StatusFailed || !strings.Contains(d.Detail, "the probe found 17179869184 bytes, over its cap: not hashed, not downloaded") {
		t.Errorf("verify.deliverable %+v: want failed, the probe's 16 GiB by fstat, over its cap, not hashed", d)
	}
	mk := checkOf(ev, "verify.markers")
	if mk.Status != reports.StatusFailed || !strings.Contains(mk.Detail, marker+" (1073741824 bytes, over the probe's cap: not hashed)") {
		t.Errorf("verify.markers %+v: want failed, the 1 GiB marker over the probe's cap", mk)
	}
	if ev.After == nil || ev.After.Deliverable != "" || !slices.Contains(ev.After.MarkersLost, marker) {
		t.Errorf("after %+v: want nothing of the deliverable read, the marker lost", ev.After)
	}
	if ev.Status != reports.StatusFailed || ev.Passed {
		t.Errorf("status %s, passed %t; want failed", ev.Status, ev.Passed)
	}
	// The rest of the case ran as it should: the harness's loop and close.
	for _, id := range []string{"setup", "seed", "close.receipts", "verify.challenge_round_trip", "verify.no_new_processes", "teardown.container_removed"} {
		if c := checkOf(ev, id); c.Status != reports.StatusPassed {
			t.Errorf("%s %s (%s): want passed", id, c.Status, c.Detail)
		}
	}
}
