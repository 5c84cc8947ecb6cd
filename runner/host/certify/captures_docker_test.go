package certify_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// capturedRun is one certify run of one hostile manifest on debian-12.
type capturedRun struct {
	ev      *reports.Evidence
	out     string // the run dir
	caseDir string // its case's dir
	start   time.Time
	took    time.Duration
	err     error
}

func certifyOne(t *testing.T, m *adapter.Manifest) capturedRun {
	t.Helper()
	imgs := needEngine(t, "debian-12")
	warden, probe, _ := binaries(t)
	out := t.TempDir()
	var progress syncBuf
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	_, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{m}, Images: imgs, APIKey: certify.NewCanary(),
		Warden: warden, Probe: probe, Out: out, Progress: &progress})
	took := time.Since(start)
	t.Logf("certify %s: %.1fs", m.Name, took.Seconds())
	ev := readEvidence(t, out)["debian-12/"+m.Name]
	if ev == nil {
		t.Fatalf("no evidence for %s: %v\n%s", m.Name, err, progress.String())
	}
	return capturedRun{ev: ev, out: out, caseDir: filepath.Join(out, "cases", "debian-12__"+m.Name), start: start, took: took, err: err}
}

// runFile is a file the harness wrote in its activation's run dir, as
// captured (the positive controls: what the harness itself saw).
func (r capturedRun) runFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.caseDir, "capture", "run", "activation", name))
	if err != nil {
		t.Fatalf("the harness's %s was not captured: %v", name, err)
	}
	return strings.TrimSpace(string(b))
}

// filesHolding lists the regular files under dir holding needle.
func filesHolding(t *testing.T, dir string, needle []byte) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, needle) {
				out = append(out, p)
			}
		}
		return nil
	})
	return out
}

// imageShadow is /etc/shadow of the debian-12 image, read as root by the
// engine: what must never reach the host through a capture.
func imageShadow(t *testing.T) []byte {
	t.Helper()
	img := needEngine(t, "debian-12")[0]
	out, err := exec.Command("docker", "run", "--rm", "--network", "none", "--user", "0", "--entrypoint", "cat", img.Ref, "/etc/shadow").Output()
	if err != nil || !bytes.HasPrefix(out, []byte("root:")) {
		t.Fatalf("positive control: /etc/shadow of %s: %q %v", img.Ref, out, err)
	}
	return bytes.SplitN(out, []byte("\n"), 2)[0]
}

// withheldKind is the withheld entry at a path ending in suffix of kind.
func withheldKind(ev *reports.Evidence, suffix, kind string) *reports.Withheld {
	for i, w := range ev.CapturesWithheld {
		if strings.HasSuffix(w.Path, suffix) && w.Kind == kind {
			return &ev.CapturesWithheld[i]
		}
	}
	return nil
}

// TestCertifyCapturesFollowNoLink: a hostile harness (the task user, after
// the mini-agent's turn) plants links above what the manifest captures
// (contract §8: links are refused at every component, reads use the
// harness's uid). The root session agent follows none of them: no byte
// of what a link leads to reaches the host, and each link is recorded in
// captures_withheld at its own path. On main both reached the host.
func TestCertifyCapturesFollowNoLink(t *testing.T) {
	t.Run("a link to / above a capture of /etc/shadow", func(t *testing.T) {
		shadow := imageShadow(t)
		run := "{home}/../run/activation"
		script := "ln -s / {home}/lnk; ls -ld {home}/lnk > " + run + "/ls; cat {home}/lnk/etc/shadow > /dev/null 2>&1; echo $? > " + run + "/cat_status"
		m := hostileVariant(t, "miniagent-pi", "capture-lnk-shadow", script,
			"captures:\n  files:\n    - name: shadow\n      path: \"{home}/lnk/etc/shadow\"\n")
		r := certifyOne(t, m)
		// Positive controls: the link is there, and the harness itself
		// could not read the file through it.
		if ls := r.runFile(t, "ls"); !strings.HasSuffix(ls, "lnk -> /") {
			t.Errorf("positive control: the harness's ls -ld of its link: %q", ls)
		}
		if st := r.runFile(t, "cat_status"); st == "0" {
			t.Errorf("positive control: the harness read /etc/shadow itself (cat exit %s)", st)
		}
		if hits := filesHolding(t, r.out, shadow); len(hits) > 0 {
			t.Errorf("/etc/shadow (%q) reached the host: %v", shadow, hits)
		}
		if w := withheldKind(r.ev, "/lnk", provider.WithheldSymlink); w == nil || w.Target != "/" {
			t.Errorf("the link {home}/lnk -> / is not in captures_withheld: %+v", r.ev.CapturesWithheld)
		}
	})

	t.Run("OpenCode's data dir replaced by a link", func(t *testing.T) {
		marker := "elsewhere-" + strings.TrimPrefix(certify.NewCanary(), "sk-sandproof-canary-")
		data := "{home}/.local/share/opencode"
		run := "{home}/../run/activation"
		script := "mkdir -p /tmp/elsewhere && printf %s " + marker + " > /tmp/elsewhere/opencode.db && rm -rf " + data +
			" && ln -s /tmp/elsewhere " + data + " && ls -ld " + data + " > " + run + "/ls && cat " + data + "/opencode.db > " + run + "/through"
		m := hostileVariant(t, "miniagent-opencode", "capture-oc-link", script, "")
		r := certifyOne(t, m)
		if ls := r.runFile(t, "ls"); !strings.HasSuffix(ls, "opencode -> /tmp/elsewhere") {
			t.Errorf("positive control: the harness's ls -ld of the data dir: %q", ls)
		}
		if got := r.runFile(t, "through"); got != marker {
			t.Errorf("positive control: through the link the harness reads %q, want the marker", got)
		}
		// The marker is in the run dir's own copy of what the harness
		// read; anywhere else (the captured database) it was followed.
		hits := filesHolding(t, filepath.Join(r.caseDir, "capture", "files"), []byte(marker))
		if len(hits) > 0 {
			t.Errorf("the file behind the link reached the host: %v", hits)
		}
		if w := withheldKind(r.ev, "/.local/share/opencode", provider.WithheldSymlink); w == nil || w.Target != "/tmp/elsewhere" {
			t.Errorf("the link at the data dir is not in captures_withheld: %+v", r.ev.CapturesWithheld)
		}
	})
}

// TestCertifyCapturesReadAsTheHarness: a capture dir holding files only
// root may read (warden's receipts and log in the session's state dir,
// 0600 root) is read with the harness's ids: they are recorded denied,
// never read, though the session agent is root. On main they were on the
// host.
func TestCertifyCapturesReadAsTheHarness(t *testing.T) {
	run := "{home}/../run/activation"
	state := "{session_dir}/state/activation"
	script := "ls -l " + state + " > " + run + "/ls 2>&1; cat " + state + "/supervisor.log > /dev/null 2>&1; echo $? > " + run + "/cat_status"
	m := hostileVariant(t, "miniagent-pi", "capture-root-only", script,
		"captures:\n  files:\n    - name: state\n      path: \""+state+"\"\n")
	r := certifyOne(t, m)
	if st := r.runFile(t, "cat_status"); st == "0" {
		t.Errorf("positive control: the harness read warden's log itself (cat exit %s)", st)
	}
	t.Logf("the harness's ls -l %s: %s", state, r.runFile(t, "ls"))
	// Positive control: root's own copy (the session's state capture)
	// holds the receipt, so there was a root-only file to withhold.
	own := filepath.Join(r.caseDir, "capture", "state", "activation")
	ents, err := os.ReadDir(own)
	if err != nil || len(ents) == 0 {
		t.Fatalf("positive control: the session's state capture %s: %v %v", own, ents, err)
	}
	for _, e := range ents {
		if fi, err := e.Info(); err != nil || fi.Mode().IsRegular() && fi.Mode().Perm()&0o044 != 0 {
			t.Fatalf("positive control: %s is not root-only in the state dir (%v)", e.Name(), fi.Mode())
		}
	}
	var read []string
	filepath.WalkDir(filepath.Join(r.caseDir, "capture", "files"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			read = append(read, p)
		}
		return nil
	})
	if len(read) > 0 {
		t.Errorf("root-only files of the capture reached the host: %v", read)
	}
	if withheldKind(r.ev, "/state/activation", provider.WithheldDenied) == nil && withheldKind(r.ev, "/receipt.json", provider.WithheldDenied) == nil {
		t.Errorf("nothing recorded denied under %s: %+v", state, r.ev.CapturesWithheld)
	}
}

// TestCertifyCapturesCountEntries: 200,000 empty files in a declared
// capture dir (no byte of the case's byte budget) stop at the entry cap:
// the host holds fewer than 20,000 entries, the cut is recorded and fails
// close.captures_bounded, and the run ends in under 3 minutes. On main the
// host held 200,016 files and the run took minutes.
func TestCertifyCapturesCountEntries(t *testing.T) {
	t.Parallel() // waits on its harnesses more than it computes: beside the other waiting tests
	run := "{home}/../run/activation"
	script := "mkdir -p {home}/flood && (cd {home}/flood && seq 1 200000 | xargs touch) && ls {home}/flood | wc -l > " + run + "/flood_count"
	m := hostileVariant(t, "miniagent-pi", "capture-flood", script,
		"captures:\n  files:\n    - name: flood\n      path: \"{home}/flood\"\n")
	r := certifyOne(t, m)
	if n := r.runFile(t, "flood_count"); n != "200000" {
		t.Fatalf("positive control: the harness made %q files, want 200000", n)
	}
	entries := 0
	filepath.WalkDir(r.out, func(string, fs.DirEntry, error) error { entries++; return nil })
	t.Logf("host entries in the run dir: %d; capture_entries %d; run %.1fs", entries, r.ev.CaptureEntries, r.took.Seconds())
	t.Logf("the case: %.1fs", r.ev.Seconds)
	for _, st := range r.ev.Stages {
		t.Logf("stage %s: %.1fs, from %.1fs into the run", st.Name, st.Seconds, st.StartedAt.Sub(r.start).Seconds())
	}
	if entries >= 20000 {
		t.Errorf("the run dir holds %d entries, want < 20,000", entries)
	}
	if c := checkOf(r.ev, "close.captures_bounded"); c.Status != reports.StatusFailed || !strings.Contains(c.Detail, "entries per case") {
		t.Errorf("close.captures_bounded %+v, want failed naming the entry cap", c)
	}
	if withheldKind(r.ev, "/flood", provider.WithheldStopped) == nil && withheldKind(r.ev, "", provider.WithheldStopped) == nil {
		t.Errorf("the cut is not recorded: %+v", r.ev.CapturesWithheld)
	}
	if r.ev.CaptureEntries != provider.DefaultCaseEntries {
		t.Errorf("capture_entries %d, want the cap %d", r.ev.CaptureEntries, provider.DefaultCaseEntries)
	}
	if r.took > 3*time.Minute {
		t.Errorf("the run took %v, want < 3 min", r.took)
	}
}
