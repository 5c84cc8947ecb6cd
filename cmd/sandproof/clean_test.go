package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"os/exec"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/testimage"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/provider/docker"
)

func TestCleanUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"clean", "--run", ""}, `--run: bad value ""`},
		{[]string{"clean", "--run", "x", "--all"}, "give at most one"},
		{[]string{"clean", "--all", "--all-hosts"}, "give at most one"},
		{[]string{"clean", "extra"}, `unknown command "extra"`},
		{[]string{"clean", "--provider", "kubernetes"}, `--provider: bad value "kubernetes" (want one of docker)`},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := run(&out, &errb, tt.args)
		if code != 2 || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("sandproof %s: exit %d, stderr %q; want 2 and %q", strings.Join(tt.args, " "), code, errb.String(), tt.want)
		}
	}
}

func TestCertifyLimitFlagsAreChecked(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--pids-limit", "3"}, `--pids-limit: bad value "3"`},
		{[]string{"--pids-limit", "many"}, `"many" for "--pids-limit"`},
		{[]string{"--memory", "2x"}, `--memory: bad value "2x"`},
		{[]string{"--memory", "1k"}, `--memory: bad value "1k"`},
		{[]string{"--cpu-shares", "1"}, `--cpu-shares: bad value "1"`},
		{[]string{"--network", "bridge"}, `--network: bad value "bridge" (want none or host)`},
		{[]string{"--baseline", "-1"}, `--baseline: bad value "-1"`},
		{[]string{"--relay-request-bytes", "8x"}, `--relay-request-bytes: bad value "8x"`},
		{[]string{"--relay-request-bytes", "1k"}, `--relay-request-bytes: bad value "1k"`},
		{[]string{"--relay-held-bytes", "1m"}, `--relay-held-bytes: bad value "1m" (want a size of at least 8m`},
		{[]string{"--relay-record-bytes", "0"}, `--relay-record-bytes: bad value "0"`},
		{[]string{"--relay-concurrent", "0"}, `--relay-concurrent: bad value "0"`},
		{[]string{"--relay-body-time", "10ms"}, `--relay-body-time: bad value "10ms"`},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		args := append([]string{"certify", "--adapter", "none.yaml", "--out", t.TempDir()}, tt.args...)
		code := run(&out, &errb, args)
		if code != 2 || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("sandproof %s: exit %d, stderr %q; want 2 and %q", strings.Join(args, " "), code, errb.String(), tt.want)
		}
	}
}

// TestCleanRunAgainstEngine runs the command itself, scoped to runs only
// this test knows (the engine is shared: the default scope would act on
// other runs' leftovers too).
func TestCleanRunAgainstEngine(t *testing.T) {
	testenv.Docker(t)
	const ref = "sandproof-test/clean-busybox:1"
	testimage.Import(t, ref, testimage.Rootfs{Applets: []string{"sleep"}})
	b := make([]byte, 6)
	rand.Read(b)
	runA, runB := "cli-a-"+hex.EncodeToString(b), "cli-b-"+hex.EncodeToString(b)
	start := func(runID string) string {
		t.Helper()
		own, err := docker.RunArgs(map[string]string{provider.LabelRun: runID}, provider.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("docker", append(append([]string{"run", "-d", "--network", "none"}, own...), ref, "sleep", "600")...).Output()
		if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSpace(string(out))
		t.Cleanup(func() { exec.Command("docker", "rm", "-f", id).Run() })
		return id
	}
	exists := func(id string) bool { return exec.Command("docker", "container", "inspect", id).Run() == nil }
	a, bID := start(runA), start(runB)
	if !exists(a) || !exists(bID) {
		t.Fatal("positive control: the containers are not there before the clean")
	}
	clean := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := run(&out, &errb, append([]string{"clean"}, args...)); code != 0 {
			t.Fatalf("clean %v: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	out := clean("--run", runA, "--dry-run")
	if !strings.Contains(out, "would remove "+a[:12]) || strings.Contains(out, bID[:12]) || !exists(a) {
		t.Fatalf("clean --run %s --dry-run printed:\n%s\nwant %.12s listed (and kept), %.12s not", runA, out, a, bID)
	}
	out = clean("--run", runA)
	if !strings.Contains(out, "removed "+a[:12]) || !strings.Contains(out, "(of run "+runA+")") || exists(a) {
		t.Errorf("clean --run %s printed:\n%s\nwant %.12s removed, of that run", runA, out, a)
	}
	if strings.Contains(out, bID[:12]) || !exists(bID) || !strings.Contains(out, "another run's") {
		t.Errorf("clean --run %s printed:\n%s\nwant %.12s (run %s) kept and counted", runA, out, bID, runB)
	}
}
