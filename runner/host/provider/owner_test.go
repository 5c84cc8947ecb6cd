package provider

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// fakeProc writes ROOT/PID/stat lines in the kernel's format.
func fakeProc(t *testing.T, stats map[int]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, line := range stats {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestJudge(t *testing.T) {
	// 100 runs (start 5000), 200 is a zombie (start 6000).
	root := fakeProc(t, map[int]string{
		100: "100 (sandproof) S 1 100 100 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 5000 0 0",
		200: "200 (ginkgo) Z 1 200 200 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 6000 0 0",
	})
	own := func(host, pid, start, run string) map[string]string {
		return map[string]string{LabelKey: "1", LabelHost: host, LabelOwnerPID: pid, LabelOwnerStart: start, LabelRun: run}
	}
	const here, there = "h1", "h2"
	tests := []struct {
		name   string
		scope  CleanScope
		labels map[string]string
		remove bool
		reason string
	}{
		{"live owner", CleanScope{}, own(here, "100", "5000", "r1"), false, ReasonOwnerAlive},
		{"pid reused", CleanScope{}, own(here, "100", "4999", "r1"), true, ReasonOwnerGone},
		{"zombie owner", CleanScope{}, own(here, "200", "6000", "r1"), true, ReasonOwnerGone},
		{"no such pid", CleanScope{}, own(here, "300", "1", "r1"), true, ReasonOwnerGone},
		{"another host, owner gone", CleanScope{}, own(there, "300", "1", "r1"), false, ReasonOtherHost},
		{"no owner labels", CleanScope{}, map[string]string{LabelKey: "1"}, false, ReasonNoOwner},
		{"garbled owner", CleanScope{}, own(here, "x", "5000", "r1"), false, ReasonBadOwner},
		{"--run, live owner", CleanScope{Run: "r1"}, own(here, "100", "5000", "r1"), true, ReasonRun + " r1"},
		{"--run, another run", CleanScope{Run: "r2"}, own(here, "300", "1", "r1"), false, ReasonOtherRun},
		{"--run, another host", CleanScope{Run: "r1"}, own(there, "100", "5000", "r1"), false, ReasonOtherHost},
		{"--all, live owner", CleanScope{All: true}, own(here, "100", "5000", "r1"), true, ReasonAll},
		{"--all, another host", CleanScope{All: true}, own(there, "100", "5000", "r1"), false, ReasonOtherHost},
		{"--all, no owner labels", CleanScope{All: true}, map[string]string{LabelKey: "1"}, false, ReasonNoOwner},
		{"--all-hosts, another host", CleanScope{AllHosts: true}, own(there, "100", "5000", "r1"), true, ReasonAllHosts},
		{"--all-hosts, no owner labels", CleanScope{AllHosts: true}, map[string]string{LabelKey: "1"}, true, ReasonAllHosts},
	}
	for _, tt := range tests {
		tt.scope.Host, tt.scope.ProcRoot = here, root
		remove, reason := tt.scope.Judge(tt.labels)
		if remove != tt.remove || reason != tt.reason {
			t.Errorf("%s: Judge = %v %q, want %v %q", tt.name, remove, reason, tt.remove, tt.reason)
		}
	}
}

func TestSelfIsAlive(t *testing.T) {
	o, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if o.PID != os.Getpid() || o.StartTime == 0 || len(o.Host) != 16 {
		t.Fatalf("Self() = %+v, want pid %d, a start time and a 16-digit host id", o, os.Getpid())
	}
	if !Alive("", o.PID, o.StartTime) || Alive("", o.PID, o.StartTime+1) {
		t.Fatal("Alive: this process must be alive with its start time and not with another")
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"2g": 2 << 30, "512m": 512 << 20, "64K": 64 << 10, "1000": 1000, "10b": 10} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "g", "-1m", "2x", "1.5g", "0"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q): want an error", in)
		}
	}
}
