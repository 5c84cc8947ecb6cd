package certify_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/warden/stop"
)

// heartbeat is the task file the zombie-leader writer appends to;
// leaderStat is where the harness records the writer's stat state and
// num_threads once it has written twice.
const (
	heartbeat  = "{task_dir}/heartbeat.txt"
	leaderStat = "{task_dir}/leader-stat.txt"
)

// zombieleadHarness is the harness's sh -c script ($0 the writer, "$@" the
// mini-agent). It waits (10 s at most) for two heartbeat lines, so the
// writer's thread has run past main's pthread_exit whatever the pace of the
// case, records the writer's stat state (field 3) and num_threads (field
// 20; its comm holds no space) for the positive control, then execs the
// mini-agent. No braces but the placeholders: the manifest expands them.
const zombieleadHarness = `setsid "$0" ` + heartbeat + ` 600 </dev/null >/dev/null 2>&1 &
i=0
until [ -f ` + heartbeat + ` ] && [ $(wc -l < ` + heartbeat + `) -ge 2 ]; do
	i=$((i + 1))
	if [ $i -gt 100 ]; then echo "zombielead wrote no heartbeat in 10 s" >&2; exit 1; fi
	sleep 0.1
done
pid=$(head -n 1 ` + heartbeat + ` | cut -d " " -f 1)
cut -d " " -f 3,20 /proc/$pid/stat > ` + leaderStat + `
exec "$@"`

// zombieleadBin builds fixtures/c/zombielead.c as the conformance suite
// does: static (gcc -static -pthread), so one binary runs in the glibc and
// the musl images. Without gcc the test is skipped (failed under
// SANDPROOF_STRICT=1) with one line naming it.
func zombieleadBin(t *testing.T) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		testenv.Missing(t, "gcc ("+err.Error()+"), to build the C fixture fixtures/c/zombielead.c",
			"apt-get install gcc libc6-dev (images/prereqs.sh installs both)")
	}
	out := filepath.Join(t.TempDir(), "zombielead")
	src := filepath.Join("..", "..", "..", "fixtures", "c", "zombielead.c")
	if b, err := exec.Command(gcc, "-static", "-pthread", "-O2", "-Wall", "-Werror", "-o", out, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc -static -pthread %s (a static glibc needs libc6-dev): %v\n%s", src, err, b)
	}
	return out
}

// zskipWarden builds warden with the zskip mutation (a Z leader counts as
// dead whatever its threads), as make mutants does.
func zskipWarden(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "warden-zskip")
	cmd := exec.Command("go", "build", "-tags", "sandproof_mutant,mutant_zskip", "-o", out, "../../../cmd/warden")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the zskip warden: %v\n%s", err, b)
	}
	return out
}

// zombieleadAdapter is the OpenCode-like fixture (static: every image)
// behind a POSIX sh harness that first starts the zombie-leader writer
// detached (setsid, output to /dev/null, heartbeat into a task file every
// 100 ms for 10 minutes, far past the case), then execs the mini-agent,
// which does the honest challenge loop. The heartbeat file is captured.
func zombieleadAdapter(t *testing.T, bin string) *adapter.Manifest {
	t.Helper()
	return fixtureVariant(t, "miniagent-opencode", "zombielead", func(src string) string {
		sh, _ := json.Marshal(zombieleadHarness)
		out := src
		for _, r := range [][2]string{
			{"name: miniagent-opencode\n", "name: fake-zombielead\n"},
			{"\nruntime:\n", "\nruntime:\n  files:\n    - {src: " + string(mustJSON(t, bin)) + ", dst: bin/zombielead, mode: \"0755\"}\n"},
			{"\n  argv: [\"{runtime_dir}/bin/miniagent\",", "\n  argv: [\"/bin/sh\", \"-c\", " + string(sh) + ", \"{runtime_dir}/bin/zombielead\", \"{runtime_dir}/bin/miniagent\","},
			{"\ncaptures:\n", "\ncaptures:\n  files:\n    - name: heartbeat\n      path: \"" + heartbeat + "\"\n    - name: leader-stat\n      path: \"" + leaderStat + "\"\n"},
		} {
			next := strings.Replace(out, r[0], r[1], 1)
			if next == out {
				t.Fatalf("miniagent-opencode.yaml has no %q to edit", r[0])
			}
			out = next
		}
		return out
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// capturedTask is a file of the case's task dir as captured (the
// heartbeat and the leader's stat: what the sandbox saw).
func capturedTask(t *testing.T, caseDir, manifestPath string) string {
	t.Helper()
	name := filepath.Base(manifestPath)
	var found []string
	filepath.WalkDir(filepath.Join(caseDir, "capture", "files"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && d.Name() == name {
			found = append(found, p)
		}
		return nil
	})
	if len(found) != 1 {
		t.Fatalf("positive control: want one captured %s under %s, found %v", name, caseDir, found)
	}
	b, err := os.ReadFile(found[0])
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// heartbeatPIDs reads a heartbeat (each line "PID SEQ"): the pids that
// wrote it and its line count.
func heartbeatPIDs(t *testing.T, hb string) (map[int]bool, int) {
	t.Helper()
	pids, lines := map[int]bool{}, 0
	for _, l := range strings.Split(hb, "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			t.Fatalf("heartbeat line %q, want \"PID SEQ\"", l)
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			t.Fatalf("heartbeat line %q: %v", l, err)
		}
		pids[pid] = true
		lines++
	}
	return pids, lines
}

// receiptReached lists the reached members of a receipt (nil when none).
func receiptReached(t *testing.T, r *reports.Receipt) []stop.Member {
	t.Helper()
	if r == nil || r.Extra["reached"] == nil {
		return nil
	}
	var ms []stop.Member
	if err := json.Unmarshal(r.Extra["reached"], &ms); err != nil {
		t.Fatalf("read a receipt's reached %s: %v", r.Extra["reached"], err)
	}
	return ms
}

// TestCertifyZombieLeaderWriter certifies a harness that leaves behind a
// tool whose main thread exited while its second thread writes a task file
// every 100 ms (issue 25.2; contract §2: a zombie leader with a live thread
// is alive). With warden, on debian-12, old-python and alpine-class, the
// case passes and a receipt names the writer as reached, the pid its own
// heartbeat lines carry (the positive controls: the harness saw its leader
// in state Z with a second thread, and it wrote twice before the loop). With a
// warden that takes a Z leader for dead (the zskip mutant), the writer
// outlives the confirmed stop and every case fails
// verify.no_new_processes: the probe must see the live writer, so a case
// running it does not pass unless it was stopped before verify.
func TestCertifyZombieLeaderWriter(t *testing.T) {
	t.Parallel() // waits on its harnesses more than it computes: beside the other waiting tests
	imgs := needEngine(t, "debian-12", "old-python", "alpine-class")
	warden, probe, _ := binaries(t)
	m := zombieleadAdapter(t, zombieleadBin(t))

	run := func(t *testing.T, warden string) (string, map[string]*reports.Evidence) {
		t.Helper()
		out := t.TempDir()
		var progress syncBuf
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		start := time.Now()
		_, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{m}, Images: imgs, APIKey: certify.NewCanary(),
			Warden: warden, Probe: probe, Bash: bashStatic(), Out: out, Progress: &progress})
		t.Logf("certify %s on %d images: %.1fs (err %v)", m.Name, len(imgs), time.Since(start).Seconds(), err)
		evs := readEvidence(t, out)
		if len(evs) != len(imgs) {
			t.Fatalf("%d evidence records, want %d: %v\n%s", len(evs), len(imgs), err, progress.String())
		}
		return out, evs
	}
	// each runs f on every image's case with the pid of its writer, after
	// the positive controls that it ran as a zombie leader and wrote.
	each := func(t *testing.T, out string, evs map[string]*reports.Evidence, f func(t *testing.T, ev *reports.Evidence, pids map[int]bool)) {
		for _, img := range imgs {
			t.Run(img.Name, func(t *testing.T) {
				ev := evs[img.Name+"/"+m.Name]
				if ev == nil {
					t.Fatalf("no evidence for %s/%s", img.Name, m.Name)
				}
				caseDir := filepath.Join(out, "cases", img.Name+"__"+m.Name)
				pids, lines := heartbeatPIDs(t, capturedTask(t, caseDir, heartbeat))
				if lines < 2 || len(pids) != 1 {
					t.Fatalf("positive control: the heartbeat holds %d line(s) from pids %v, want at least 2 from one writer", lines, pids)
				}
				// The harness read it before the loop: the leader was a
				// zombie with its writing thread alive.
				st := strings.Fields(capturedTask(t, caseDir, leaderStat))
				if n, err := strconv.Atoi(st[len(st)-1]); len(st) != 2 || st[0] != "Z" || err != nil || n < 2 {
					t.Fatalf("positive control: the writer's leader read %q (state, num_threads), want Z with 2 or more threads", st)
				}
				t.Logf("status %s; leader %v; heartbeat: %d lines from pid %v; no_new_processes: %s", ev.Status, st, lines, pids, checkOf(ev, "verify.no_new_processes").Detail)
				f(t, ev, pids)
			})
		}
	}

	t.Run("warden stops the writer", func(t *testing.T) {
		out, evs := run(t, warden)
		each(t, out, evs, func(t *testing.T, ev *reports.Evidence, pids map[int]bool) {
			if ev.Status != reports.StatusPassed {
				var failed []string
				for _, c := range ev.Checks {
					if c.Status != reports.StatusPassed {
						failed = append(failed, c.ID+": "+c.Detail)
					}
				}
				t.Errorf("status %s, want passed; checks not passed: %v", ev.Status, failed)
			}
			var named []stop.Member
			for _, r := range []*reports.Receipt{ev.ActivationReceipt, ev.CloseReceipt} {
				for _, mb := range receiptReached(t, r) {
					if mb.Comm == "zombielead" && pids[mb.PID] {
						named = append(named, mb)
					}
				}
			}
			if len(named) == 0 {
				t.Errorf("no receipt names the writer (pid %v) as reached: activation %+v, close %+v", pids, ev.ActivationReceipt, ev.CloseReceipt)
			}
			t.Logf("reached: %+v", named)
		})
	})

	t.Run("a warden that takes a Z leader for dead (zskip)", func(t *testing.T) {
		out, evs := run(t, zskipWarden(t))
		each(t, out, evs, func(t *testing.T, ev *reports.Evidence, pids map[int]bool) {
			if r := ev.ActivationReceipt; r != nil {
				t.Logf("the mutant's activation receipt: cleanup_confirmed %t, reached %+v", r.CleanupConfirmed, receiptReached(t, r))
			}
			if ev.Status == reports.StatusPassed {
				t.Errorf("status passed with the writer left alive")
			}
			c := checkOf(ev, "verify.no_new_processes")
			if c.Status != reports.StatusFailed || !strings.Contains(c.Detail, " zombielead") {
				t.Errorf("verify.no_new_processes %+v, want failed naming the live zombielead", c)
			}
			for _, c := range ev.Checks {
				if c.Status == reports.StatusFailed && c.ID != "verify.no_new_processes" {
					t.Logf("also failed: %s: %s", c.ID, c.Detail)
				}
			}
		})
	})
}
