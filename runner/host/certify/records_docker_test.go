package certify_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/canary"
	"github.com/sandproof/sandproof/runner/host/certify"
)

// TestCertifyRecordsBoundedAndKept is issue 35's attacks 4 and 5 from
// inside a real container, in one run of two hostile harnesses (each the
// mini-agent's honest turn, then the attack): hostile-ids sends eight
// junk requests of 1,000 tool results with 4,000-byte ids (its case
// passes, its record stays within the record budget, each step keeping a
// few ids and counting the rest); hostile-key writes its key into the
// deliverable and into a captured file (its record is written, redacted,
// failed on secrets.canary). The run's reports are written and its
// canary scan runs (it names the captured file: ErrCanaryLeaked), and a
// --resume of the run reruns neither case. Against main the run ended
// with the record refused: no reports, no scan, and --resume reran the
// failed case as never started.
func TestCertifyRecordsBoundedAndKept(t *testing.T) {
	imgs := needEngine(t, "debian-12")
	warden, probe, _ := binaries(t)
	script, err := os.ReadFile(filepath.Join("testdata", "adversary-records.sh"))
	if err != nil {
		t.Fatal(err)
	}
	capture := "captures:\n  files:\n    - name: adv\n      path: \"{home}/adv\"\n"
	ids := hostileVariant(t, "miniagent-pi", "hostile-ids",
		`sh -c "$(echo `+base64.StdEncoding.EncodeToString(script)+` | base64 -d)" adv {model_url} {home}/adv`, capture)
	keyed := hostileVariant(t, "miniagent-pi", "hostile-key",
		`printf 'my key: %s\n' "$FAKE_API_KEY" > /task/deliverable.txt && mkdir -p {home}/adv && printf '%s' "$FAKE_API_KEY" > {home}/adv/key`, capture)
	out, key := t.TempDir(), certify.NewCanary()
	run := func(resume bool) (*certify.Summary, error, string) {
		var progress syncBuf
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		sum, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{ids, keyed}, Images: imgs, Canary: key,
			Warden: warden, Probe: probe, Out: out, Progress: &progress, Resume: resume})
		t.Logf("certify (resume %t): %.1fs: %v", resume, time.Since(start).Seconds(), err)
		return sum, err, progress.String()
	}
	_, err, progress := run(false)
	// The scan ran after the cases (it names the captured key), and the
	// reports were written.
	if !errors.Is(err, certify.ErrCanaryLeaked) || !strings.Contains(err.Error(), filepath.Join("debian-12__hostile-key", "capture")) {
		t.Errorf("certify: %v; want the run's scan to name hostile-key's captured file\n%s", err, progress)
	}
	for _, f := range []string{reports.HTMLFile, reports.MarkdownFile, reports.JUnitFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("report %s: %v", f, err)
		}
	}
	evidence, err := os.ReadFile(filepath.Join(out, reports.EvidenceFile))
	if err != nil {
		t.Fatal(err)
	}
	if how, found := canary.New(key).Find(evidence); found {
		t.Errorf("evidence.jsonl holds the key (%s)", how)
	}
	evs := readEvidence(t, out)

	// Attack 4. Positive control: the relay saw the ids whole.
	transcript, _ := os.ReadFile(filepath.Join(out, "cases", "debian-12__hostile-ids", "model_relay.jsonl"))
	if len(transcript) < 30_000_000 || !bytes.Contains(transcript, []byte("junk-8-1000-"+strings.Repeat("j", 100))) {
		t.Errorf("positive control: the relay's transcript is %d bytes, without the last junk request's ids", len(transcript))
	}
	ev := evs["debian-12/hostile-ids"]
	if ev == nil {
		t.Fatalf("no record of hostile-ids\n%s", progress)
	}
	line := lineOf(t, evidence, ev.CaseID)
	if ev.Status != reports.StatusPassed || len(line) > reports.MaxRecordBytes {
		t.Errorf("hostile-ids: %s, its line %d bytes; want passed within the budget of %d; failed %+v", ev.Status, len(line), reports.MaxRecordBytes, ev.Checks)
	}
	junk := 0
	for _, s := range ev.ModelSteps.Steps {
		if s.ToolResultIDsOmitted > 0 {
			junk++
			if len(s.ToolResultIDs) != reports.DefaultCaps.StepIDs || s.ToolResultIDsOmitted != 1000-len(s.ToolResultIDs) || len(s.ToolResultIDs[0]) > reports.DefaultCaps.Name {
				t.Errorf("step %d: %d ids (first %d bytes), %d omitted", s.Seq, len(s.ToolResultIDs), len(s.ToolResultIDs[0]), s.ToolResultIDsOmitted)
			}
		}
	}
	if junk != 8 {
		t.Errorf("%d steps with ids cut, want the 8 junk requests", junk)
	}

	// Attack 5.
	ev = evs["debian-12/hostile-key"]
	if ev == nil {
		t.Fatalf("no record of hostile-key: the record was dropped\n%s", progress)
	}
	var sc reports.Check
	for _, c := range ev.Checks {
		if c.ID == "secrets.canary" {
			sc = c
		}
	}
	if ev.Status != reports.StatusFailed || sc.Status != reports.StatusFailed || !strings.Contains(sc.Detail, "after.deliverable") ||
		ev.After == nil || !strings.Contains(ev.After.Deliverable, "my key: "+canary.Redacted) {
		t.Errorf("hostile-key: %s, secrets.canary %+v, after %+v; want failed, naming the deliverable, redacted", ev.Status, sc, ev.After)
	}

	// --resume reruns neither: both are final.
	sum, err, progress := run(true)
	if sum == nil || sum.Resumed != 2 || len(sum.Timings) != 0 || !errors.Is(err, certify.ErrCanaryLeaked) {
		t.Errorf("--resume: %+v, %v; want both cases final, none run\n%s", sum, err, progress)
	}
	again, _ := os.ReadFile(filepath.Join(out, reports.EvidenceFile))
	if !bytes.Equal(again, evidence) {
		t.Errorf("--resume wrote %d more bytes of evidence", len(again)-len(evidence))
	}
}

// lineOf is the evidence line of case id.
func lineOf(t *testing.T, evidence []byte, id string) []byte {
	t.Helper()
	for _, l := range bytes.Split(evidence, []byte("\n")) {
		var e struct {
			CaseID string `json:"case_id"`
		}
		if json.Unmarshal(l, &e) == nil && e.CaseID == id {
			return l
		}
	}
	t.Fatalf("no line of %s", id)
	return nil
}
