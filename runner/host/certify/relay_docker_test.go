package certify_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/canary"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/model"
)

// peakRSS is this process's peak resident set size in bytes (VmHWM);
// reset sets the peak back to the current RSS first (clear_refs 5).
func peakRSS(t *testing.T, reset bool) int64 {
	t.Helper()
	if reset {
		if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
			t.Logf("cannot reset the peak RSS (%v): growth is measured from the peak so far", err)
		}
	}
	v := vmHWM()
	kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64)
	if err != nil {
		t.Fatalf("VmHWM %q: %v", v, err)
	}
	return kb << 10
}

// onDisk is the bytes the files under dir take on disk.
func onDisk(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			var st syscall.Stat_t
			if syscall.Lstat(p, &st) == nil {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// advFindings reads what the hostile harness wrote into {home}/adv (the
// capture "adv"): file name -> "sent=N status=S".
func advFindings(t *testing.T, out string) map[string]string {
	t.Helper()
	found := map[string]string{}
	filepath.WalkDir(filepath.Join(out, "cases"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && filepath.Base(filepath.Dir(p)) == "adv" {
			b, _ := os.ReadFile(p)
			found[d.Name()] = strings.TrimSpace(string(b))
		}
		return nil
	})
	return found
}

// relayLog reads the case's model_relay.jsonl: one refused reason (or
// "" for a forwarded call) per call, in order.
func relayLog(t *testing.T, out, caseDir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "cases", caseDir, "model_relay.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var c struct {
			Refused string `json:"refused"`
		}
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("relay log line %q: %v", l, err)
		}
		refused = append(refused, c.Refused)
	}
	return refused
}

// TestCertifyHostileRelay is the model relay's part of issue 20: a
// hostile harness (the task user, after the mini-agent's turn) attacks
// {model_url} from inside a real container. Each attack fails its case
// with the check that names the limit, certify's peak RSS grows by less
// than 300 MiB and the run dir stays under 300 MiB; the positive controls
// are the harness's own record of the bytes it sent and the relay's
// transcript of every request it saw.
func TestCertifyHostileRelay(t *testing.T) {
	imgs := needEngine(t, "debian-12")
	warden, probe, _ := binaries(t)
	script, err := os.ReadFile(filepath.Join("testdata", "adversary-relay.sh"))
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(script)
	variant := func(mode string) *adapter.Manifest {
		return hostileVariant(t, "miniagent-pi", "hostile-relay-"+mode,
			`sh -c "$(echo `+b64+` | base64 -d)" adv `+mode+` {model_url} {home}`,
			"captures:\n  files:\n    - name: adv\n      path: \"{home}/adv\"\n")
	}
	run := func(t *testing.T, m *adapter.Manifest, o certify.Options) (*reports.Evidence, string) {
		t.Helper()
		out := t.TempDir()
		var progress syncBuf
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		o.Adapters, o.Images, o.Warden, o.Probe, o.Out, o.Progress = []*adapter.Manifest{m}, imgs, warden, probe, out, &progress
		if o.APIKey == "" {
			o.APIKey = certify.NewCanary()
		}
		before := peakRSS(t, true)
		start := time.Now()
		_, err := certify.Run(ctx, o)
		grew := peakRSS(t, false) - before
		disk := onDisk(out)
		t.Logf("certify %s: %.1fs, peak RSS grew by %d MiB, run dir %d MiB on disk", m.Name, time.Since(start).Seconds(), grew>>20, disk>>20)
		ev := readEvidence(t, out)["debian-12/"+m.Name]
		if ev == nil {
			t.Fatalf("no evidence for %s: %v\n%s", m.Name, err, progress.String())
		}
		if ev.Status != reports.StatusFailed {
			t.Errorf("status %s, want failed", ev.Status)
		}
		if grew > 300<<20 {
			t.Errorf("certify's peak RSS grew by %d MiB, want < 300 MiB", grew>>20)
		}
		if disk > 300<<20 {
			t.Errorf("the run dir holds %d MiB, want < 300 MiB", disk>>20)
		}
		return ev, out
	}

	t.Run("stalled bodies", func(t *testing.T) {
		m := variant("stall")
		ev, out := run(t, m, certify.Options{})
		found := advFindings(t, out)
		var sent int64
		for i := 1; i <= 16; i++ {
			var n int64
			var st int
			fmt.Sscanf(found[fmt.Sprintf("stall_%d", i)], "sent=%d status=%d", &n, &st)
			sent += n
			if st != http.StatusRequestEntityTooLarge {
				t.Errorf("stall %d: %q, want status 413 from the relay", i, found[fmt.Sprintf("stall_%d", i)])
			}
		}
		// Positive controls: the harness sent body bytes on all 16, and
		// the relay saw and refused each.
		t.Logf("the harness sent %d MiB of bodies", sent>>20)
		if sent == 0 {
			t.Errorf("positive control: the harness sent no body byte: %v", found)
		}
		if n := count(relayLog(t, out, "debian-12__"+m.Name), "body_too_large"); n != 16 {
			t.Errorf("positive control: the relay refused %d requests as too large, want 16", n)
		}
		if c := checkOf(ev, "close.relay_bounded"); c.Status != reports.StatusFailed || !strings.Contains(c.Detail, "refused 16 too large") {
			t.Errorf("close.relay_bounded %+v, want failed with 16 too large", c)
		}
	})

	t.Run("flood", func(t *testing.T) {
		m := variant("flood")
		ev, out := run(t, m, certify.Options{})
		found := advFindings(t, out)
		for i := 1; i <= 40; i++ {
			if f := found[fmt.Sprintf("flood_%d", i)]; !strings.HasSuffix(f, "status=413") {
				t.Errorf("flood %d: %q, want status 413 from the relay", i, f)
			}
		}
		if n := count(relayLog(t, out, "debian-12__"+m.Name), "body_too_large"); n != 40 {
			t.Errorf("positive control: the relay refused %d requests as too large, want 40", n)
		}
		if c := checkOf(ev, "close.relay_bounded"); c.Status != reports.StatusFailed || !strings.Contains(c.Detail, "refused 40 too large") {
			t.Errorf("close.relay_bounded %+v, want failed with 40 too large", c)
		}
	})

	t.Run("the canary", func(t *testing.T) {
		// A real-model run (--model URL): the scripted model behind a
		// recorder of every request that reaches the upstream whole.
		const real = "sk-real-upstream-relay-test"
		srv, err := model.Start(model.Options{APIKey: real})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		target, _ := url.Parse(strings.TrimSuffix(srv.URL(), "/v1"))
		proxy := httputil.NewSingleHostReverseProxy(target)
		proxy.FlushInterval = -1
		var mu sync.Mutex
		var seen []string
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			b, _ := io.ReadAll(req.Body)
			var h strings.Builder
			req.Header.Write(&h)
			mu.Lock()
			seen = append(seen, req.URL.RequestURI()+"\n"+h.String()+"\n"+string(b))
			mu.Unlock()
			req.Body = io.NopCloser(strings.NewReader(string(b)))
			proxy.ServeHTTP(w, req)
		}))
		defer up.Close()
		key := certify.NewCanary()
		m := variant("canary")
		ev, out := run(t, m, certify.Options{ModelURL: up.URL + "/v1", APIKey: real, Canary: key})
		found := advFindings(t, out)
		for _, n := range []string{"canary_query", "canary_header", "canary_user", "canary_hex"} {
			if !strings.HasSuffix(found[n], "status=403") {
				t.Errorf("%s: %q, want status 403 from the relay", n, found[n])
			}
		}
		// Positive control: a clean request from the same harness got
		// through, and the upstream saw it.
		if !strings.HasSuffix(found["clean"], "status=200") {
			t.Errorf("positive control: the clean request: %q, want 200", found["clean"])
		}
		m2 := canary.New(key)
		mu.Lock()
		var clean, pieces int
		for _, s := range seen {
			if how, ok := m2.Find([]byte(s)); ok {
				t.Errorf("the upstream saw the canary (%s): %.300q", how, s)
			}
			if strings.Contains(s, `"content":"hello"`) {
				clean++
			}
			if strings.Contains(s, `"tool_call_id":"c2"`) {
				pieces++
			}
		}
		mu.Unlock()
		if clean != 1 {
			t.Errorf("positive control: the upstream saw the clean request %d times, want 1", clean)
		}
		// The documented gap (docs/threat-model.md): a key split into
		// pieces is not recognised; it is forwarded.
		if pieces != 1 || !strings.HasSuffix(found["split_reversed"], "status=200") {
			t.Errorf("split and reversed: %q, upstream saw it %d times; the threat model says it is forwarded", found["split_reversed"], pieces)
		}
		c := checkOf(ev, "secrets.canary")
		if c.Status != reports.StatusFailed || !strings.Contains(c.Detail, "refused by the relay: 4") {
			t.Errorf("secrets.canary %+v, want failed naming 4 refused requests", c)
		}
		if n := count(relayLog(t, out, "debian-12__"+m.Name), "canary"); n != 4 {
			t.Errorf("the relay's transcript records %d canary refusals, want 4", n)
		}
	})
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}
