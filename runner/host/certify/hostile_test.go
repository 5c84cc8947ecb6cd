package certify_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	_ "modernc.org/sqlite"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// lit makes s a literal in a manifest string (braces doubled).
func lit(s string) string {
	return strings.NewReplacer("{", "{{", "}", "}}").Replace(s)
}

// hostileVariant wraps a fixture adapter's launch in a shell that runs the
// mini-agent, then plants attacks (script, placeholders allowed), keeping
// the agent's exit status; extra is added to the manifest as is.
func hostileVariant(t *testing.T, fixture, name, script, extra string) *adapter.Manifest {
	t.Helper()
	return fixtureVariant(t, fixture, name, func(src string) string {
		q, _ := json.Marshal(`"$@"; rc=$?; ` + script + `; exit $rc`)
		// The launch's argv, not version_argv.
		out := strings.Replace(src, "\n  argv: [\"{runtime_dir}/bin/miniagent\",", "\n  argv: [\"/bin/sh\", \"-c\", "+string(q)+", \"sh\", \"{runtime_dir}/bin/miniagent\",", 1)
		out = strings.Replace(out, "name: "+fixture+"\n", "name: "+name+"\n", 1)
		if out == src || !strings.Contains(out, "name: "+name+"\n") {
			t.Fatalf("could not wrap the launch of %s", fixture)
		}
		return out + extra
	})
}

// endlessDB is a real SQLite file whose "part" (the table the
// OpenCode-like manifest reads) is a recursive view that never ends.
func endlessDB(t *testing.T) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "endless.db")
	db, err := sql.Open("sqlite", p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE VIEW part AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n) SELECT '{"type":"x"}' AS data, i AS time_created FROM n`); err != nil {
		t.Fatal(err)
	}
	// Positive control: read plainly, it is still running at a deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	var n int
	err = db.QueryRowContext(ctx, "SELECT count(*) FROM part").Scan(&n)
	cancel()
	db.Close()
	if err == nil {
		t.Fatalf("positive control: the view ended after %d rows", n)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// noControls fails on a byte a terminal could act on.
func noControls(t *testing.T, what string, b []byte) {
	t.Helper()
	if !utf8.Valid(b) {
		t.Errorf("%s: not UTF-8", what)
		return
	}
	for _, r := range string(b) {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r <= 0x9f {
			t.Errorf("%s: control character %U reached it", what, r)
			return
		}
	}
}

func withheld(ev *reports.Evidence, suffix string) *reports.Withheld {
	for i, w := range ev.CapturesWithheld {
		if strings.HasSuffix(w.Path, suffix) {
			return &ev.CapturesWithheld[i]
		}
	}
	return nil
}

func checkOf(ev *reports.Evidence, id string) reports.Check {
	for _, c := range ev.Checks {
		if c.ID == id {
			return c
		}
	}
	return reports.Check{}
}

// TestCertifyHostileCaptures plants, from inside real containers, every
// attack on the captures the review found (contract §8, "captured
// files are data"): each case ends failed, in bounded time, with no host
// file read, no link followed or created, at most the per-file cap
// written for a 1 GiB sparse file, the canary found in raw_b64, and no
// control character in the console, Markdown or JUnit.
func TestCertifyHostileCaptures(t *testing.T) {
	t.Parallel() // waits on its harnesses more than it computes: beside the other waiting tests
	imgs := needEngine(t, "debian-12")
	warden, probe, _ := binaries(t)
	hostFile := filepath.Join(t.TempDir(), "host-secret")
	marker := "host-marker-" + strings.TrimPrefix(certify.NewCanary(), "sk-sandproof-canary-")
	if err := os.WriteFile(hostFile, []byte(marker), 0o600); err != nil {
		t.Fatal(err)
	}
	events := "{home}/../run/activation/events.jsonl"
	failMsg := `{"type":"message_end","message":{"role":"assistant","stopReason":"error","errorMessage":"boom\u001bc\u001b[2J\u009b31m\b\b\bok\u0007"}}`
	dbPath := "{home}/.local/share/opencode/opencode.db"

	run := func(t *testing.T, m *adapter.Manifest) (*reports.Evidence, string, string, error) {
		t.Helper()
		out := t.TempDir()
		key := certify.NewCanary()
		var progress syncBuf
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		_, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{m}, Images: imgs, APIKey: key,
			Warden: warden, Probe: probe, Out: out, Progress: &progress})
		t.Logf("certify %s: %.1fs", m.Name, time.Since(start).Seconds())
		evs := readEvidence(t, out)
		ev := evs["debian-12/"+m.Name]
		if ev == nil {
			t.Fatalf("no evidence for %s: %v\n%s", m.Name, err, progress.String())
		}
		if ev.Status != reports.StatusFailed {
			t.Errorf("status %s, want failed", ev.Status)
		}
		if ev.Seconds > 300 {
			t.Errorf("case took %.0fs", ev.Seconds)
		}
		// Nothing of the host file, no link, and the files and the
		// console free of control characters.
		var onDisk int64
		filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type()&fs.ModeSymlink != 0 {
				t.Errorf("a link in the run dir: %s", p)
			}
			if !d.Type().IsRegular() {
				return nil
			}
			var st syscall.Stat_t
			syscall.Lstat(p, &st)
			onDisk += st.Blocks * 512
			return nil
		})
		// The host file's marker, in any encoding (the canary search,
		// streaming, is reused for it).
		if hits, err := certify.FindCanary(out, marker); err != nil || len(hits) != 0 {
			t.Errorf("the host file's marker is in the run dir: %v %v", hits, err)
		}
		if hw := vmHWM(); hw != "" {
			t.Logf("peak RSS of this process so far: %s", hw)
		}
		for _, f := range []string{reports.MarkdownFile, reports.JUnitFile, reports.HTMLFile} {
			b, err := os.ReadFile(filepath.Join(out, f))
			if err != nil {
				t.Error(err)
			}
			noControls(t, f, b)
		}
		noControls(t, "console", []byte(progress.String()))
		t.Logf("run dir: %d bytes on disk", onDisk)
		if onDisk > provider.DefaultCaseBytes+16<<20 {
			t.Errorf("run dir holds %d bytes on disk, over the per-case cap", onDisk)
		}
		return ev, out, key, err
	}

	t.Run("links and sparse files", func(t *testing.T) {
		script := "ln -sf " + hostFile + " /task/deliverable.txt && ln -sf /dev/zero " + events +
			" && mkdir -p {home}/big && truncate -s 1G {home}/big/sparse && ln -s " + hostFile + " {home}/big/link"
		m := hostileVariant(t, "miniagent-pi", "hostile-links", script,
			"captures:\n  files:\n    - name: big\n      path: \"{home}/big\"\n")
		ev, _, _, err := run(t, m)
		if err != nil {
			t.Errorf("certify: %v", err)
		}
		// Positive controls: the links and the sparse file were really
		// planted (recorded from the sandbox's archive headers).
		if w := withheld(ev, "/run/activation/events.jsonl"); w == nil || w.Kind != provider.WithheldSymlink || w.Target != "/dev/zero" {
			t.Errorf("events link not recorded: %+v", ev.CapturesWithheld)
		}
		if w := withheld(ev, "/big/link"); w == nil || w.Kind != provider.WithheldSymlink || w.Target != hostFile {
			t.Errorf("link to the host file not recorded: %+v", ev.CapturesWithheld)
		}
		if w := withheld(ev, "/big/sparse"); w == nil || w.Kind != provider.WithheldTruncated || w.Size != 1<<30 || w.Written != provider.DefaultFileBytes {
			t.Errorf("sparse file not cut at the cap: %+v", ev.CapturesWithheld)
		}
		if c := checkOf(ev, "close.captures_bounded"); c.Status != reports.StatusFailed {
			t.Errorf("close.captures_bounded %+v, want failed", c)
		}
		d := checkOf(ev, "verify.deliverable")
		if d.Status != reports.StatusFailed || !strings.Contains(d.Detail, "symlink") || !strings.Contains(d.Detail, hostFile) || ev.After == nil || ev.After.Deliverable != "" {
			t.Errorf("deliverable: %+v (after %+v), want failed naming the link, nothing read", d, ev.After)
		}
		if c := checkOf(ev, "activation.result"); c.Status != reports.StatusFailed || !strings.Contains(c.Detail, "events") {
			t.Errorf("activation.result %+v, want failed: the events file is a link", c)
		}
	})

	t.Run("escapes and the canary in raw_b64", func(t *testing.T) {
		script := "printf '%s\\n' '" + lit(failMsg) + "' && printf '\\377%s\\n' \"$FAKE_API_KEY\""
		m := hostileVariant(t, "miniagent-pi", "hostile-text", script, "")
		ev, out, key, err := run(t, m)
		if !errors.Is(err, certify.ErrCanaryLeaked) {
			t.Errorf("certify: %v, want ErrCanaryLeaked", err)
		}
		if c := checkOf(ev, "secrets.canary"); c.Status != reports.StatusFailed || !strings.Contains(c.Detail, "events.jsonl") {
			t.Errorf("secrets.canary %+v, want failed naming the events file", c)
		}
		// Positive controls: the key is there only in base64 (a plain
		// search misses it), and the raw escapes reached the evidence.
		raw, _ := os.ReadFile(filepath.Join(out, "cases", "debian-12__hostile-text", "capture", "run", "activation", "events.jsonl"))
		if bytes.Contains(raw, []byte(key)) || !bytes.Contains(raw, []byte(`"raw_b64"`)) {
			t.Errorf("positive control: events file %q should hold the key only as raw_b64", raw)
		}
		c := checkOf(ev, "activation.result")
		if c.Status != reports.StatusFailed || !strings.Contains(c.Detail, "boom\x1bc\x1b[2J\u009b31m\b\b\bok") {
			t.Errorf("activation.result %+v: want the raw message in the evidence", c)
		}
		md, _ := os.ReadFile(filepath.Join(out, reports.MarkdownFile))
		if !strings.Contains(string(md), `boom␛c␛\[2J\\u009b31m␈␈␈ok␇`) {
			t.Errorf("report.md does not show the escapes visibly")
		}
	})

	t.Run("sqlite endless view", func(t *testing.T) {
		b64 := base64.StdEncoding.EncodeToString(endlessDB(t))
		script := "rm -f " + dbPath + " " + dbPath + "-wal " + dbPath + "-shm && echo " + b64 + " | base64 -d > " + dbPath
		m := hostileVariant(t, "miniagent-opencode", "hostile-sqlite", script, "")
		ev, _, _, err := run(t, m)
		if err != nil {
			t.Errorf("certify: %v", err)
		}
		if c := checkOf(ev, "activation.result"); c.Status != reports.StatusFailed || !strings.Contains(c.Detail, `"part" is a view, refused`) {
			t.Errorf("activation.result %+v, want failed: the table is a view", c)
		}
	})
}

// vmHWM is this process's peak resident set size, as /proc says it.
func vmHWM() string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
