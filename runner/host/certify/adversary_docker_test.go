package certify_test

import (
	"context"
	"encoding/base64"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// TestCertifyHarnessReachesOnlyTheRelay is a hostile harness (the task
// user, after the mini-agent's turn) looking for a way past the session
// agent (contract §7.1 and §7 session agent, threat model "The session
// agent"): every listening TCP port of its network namespace and every
// port of 127.0.0.1 and ::1 that accepts a connection, the unix sockets
// its namespace knows and the socket files it can see, writes into the
// owner's and the runtime's read-only volumes, and signals, fds and
// environment of the root agent. With network none it finds only the
// relay's port and the case still passes; the same script with network
// host (the positive control) finds the host's other ports and sockets,
// so the probes see what they look for.
func TestCertifyHarnessReachesOnlyTheRelay(t *testing.T) {
	t.Parallel() // waits on its harnesses more than it computes: beside the other waiting tests
	imgs := needEngine(t, "debian-12")
	warden, probe, _ := binaries(t)
	script, err := os.ReadFile(filepath.Join("testdata", "adversary-network.sh"))
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(script)
	m := hostileVariant(t, "miniagent-pi", "adversary-net",
		`bash -c "$(echo `+b64+` | base64 -d)" adv {model_url} {home} {runtime_dir} /var/lib/sandproof/owner`,
		"captures:\n  files:\n    - name: adv\n      path: \"{home}/adv\"\n")

	run := func(t *testing.T, network string) (*reports.Evidence, map[string]string) {
		t.Helper()
		out := t.TempDir()
		var progress syncBuf
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		_, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{m}, Images: imgs, APIKey: certify.NewCanary(),
			Warden: warden, Probe: probe, Out: out, Progress: &progress, Network: network})
		ev := readEvidence(t, out)["debian-12/"+m.Name]
		if ev == nil {
			t.Fatalf("no evidence: %v\n%s", err, progress.String())
		}
		found := map[string]string{}
		filepath.WalkDir(filepath.Join(out, "cases"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() && filepath.Base(filepath.Dir(p)) == "adv" {
				b, _ := os.ReadFile(p)
				found[d.Name()] = strings.TrimSpace(string(b))
			}
			return nil
		})
		if found["uid"] != "1000" || found["relay_port"] == "" {
			t.Fatalf("the harness's findings were not captured (uid %q, relay port %q): %v\n%s", found["uid"], found["relay_port"], found, progress.String())
		}
		// Positive controls inside the sandbox: the same writes and
		// signals work on what is the harness's own, and the socket
		// search finds the socket it made.
		if found["own_writes"] != "ok" || found["own_signals"] != "ok" {
			t.Errorf("positive control: own writes %q, own signals %q", found["own_writes"], found["own_signals"])
		}
		if !strings.Contains(found["socket_files"], "/ctl.sock") {
			t.Errorf("positive control: the socket search missed the harness's own socket: %q", found["socket_files"])
		}
		if found["agent_pid"] == "" {
			t.Errorf("the harness did not find the session agent in /proc")
		}
		// Whatever the network: the agent is out of reach and the
		// volumes are read-only (EROFS, not just the owner's modes).
		if found["agent_hits"] != "" {
			t.Errorf("the harness reached the root agent (%s): %q", network, found["agent_hits"])
		}
		if found["volume_writes"] != "" {
			t.Errorf("the harness wrote into a shared volume (%s): %q", network, found["volume_writes"])
		}
		t.Logf("%s: status %s, listen %q, scan %q, unix sockets %s, socket files %q, volume errors %q",
			network, ev.Status, found["listen"], found["scan"], found["unix_count"], found["socket_files"], found["volume_errors"])
		return ev, found
	}

	t.Run("none", func(t *testing.T) {
		ev, found := run(t, provider.NetworkNone)
		if ev.Status != reports.StatusPassed {
			t.Errorf("status %s, want passed: %+v", ev.Status, ev.Checks)
		}
		if ev.Sandbox == nil || ev.Sandbox.Network != provider.NetworkNone {
			t.Errorf("evidence sandbox %+v, want network none", ev.Sandbox)
		}
		port := found["relay_port"]
		if found["ifaces"] != "lo" {
			t.Errorf("interfaces %q, want lo alone", found["ifaces"])
		}
		if found["listen"] != port {
			t.Errorf("listening ports %q, want the relay's %s alone (the agent's listener)", found["listen"], port)
		}
		if found["scan"] != "127.0.0.1 "+port {
			t.Errorf("ports that accept a connection: %q, want 127.0.0.1 %s alone", found["scan"], port)
		}
		if found["unix_count"] != "0" {
			t.Errorf("%s unix sockets in the sandbox's network namespace, want 0", found["unix_count"])
		}
		if lines := strings.Split(found["socket_files"], "\n"); len(lines) != 1 {
			t.Errorf("socket files besides the harness's own: %q", lines)
		}
		if !strings.Contains(found["volume_errors"], "Read-only file system") {
			t.Errorf("the volume writes failed, but not as read-only: %q", found["volume_errors"])
		}
	})

	t.Run("host, the positive control", func(t *testing.T) {
		ev, found := run(t, provider.NetworkHost)
		if ev.Sandbox == nil || ev.Sandbox.Network != provider.NetworkHost {
			t.Errorf("evidence sandbox %+v, want network host", ev.Sandbox)
		}
		port := found["relay_port"]
		var others []string
		for _, l := range strings.Split(found["scan"], "\n") {
			if l != "" && l != "127.0.0.1 "+port {
				others = append(others, l)
			}
		}
		// The relay and the scripted model both listen on the host's
		// loopback: on network host the scan must see both.
		if !slices.Contains(strings.Split(found["scan"], "\n"), "127.0.0.1 "+port) || len(others) == 0 {
			t.Errorf("positive control: on network host the scan found %q; want the relay's %s and at least the scripted model's port", found["scan"], port)
		}
		if found["ifaces"] == "lo" {
			t.Errorf("positive control: on network host only lo is visible")
		}
	})
}
