package wardencli

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParseSecondsRefusesWhatIsNotADecimal(t *testing.T) {
	for _, v := range []string{"0x10", "1e2", "1e999", "Infinity", "inf", "nan", "NaN", "-1", "+1", "1 2", "", " 1", "1.", ".5", "1_000", "31536001", "31536000.5", "１"} {
		_, err := ParseSeconds("deadline", v, false)
		if err == nil {
			t.Errorf("ParseSeconds(%q) accepted", v)
			continue
		}
		if _, ok := err.(usageErr); !ok || !strings.Contains(err.Error(), "--deadline") || !strings.Contains(err.Error(), `"`+v+`"`) {
			t.Errorf("ParseSeconds(%q) error %q: want a usage error naming --deadline and quoting the value", v, err)
		}
	}
}

func TestParseSecondsAccepts(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"30": 30 * time.Second, "2.5": 2500 * time.Millisecond, "0.001": time.Millisecond,
		"31536000": 31536000 * time.Second, "007": 7 * time.Second,
	} {
		got, err := ParseSeconds("deadline", v, false)
		if err != nil || got != want {
			t.Errorf("ParseSeconds(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	if _, err := ParseSeconds("deadline", "0", false); err == nil {
		t.Error("--deadline 0 accepted")
	}
	if d, err := ParseSeconds("grace", "0", true); err != nil || d != 0 {
		t.Errorf("--grace 0: %v, %v", d, err)
	}
}

func TestParseSuperviseKeepsStateForRefusal(t *testing.T) {
	cfg, _, err := parseSupervise([]string{"--state", "/tmp/x", "--deadline", "nan", "--", "true"})
	if err == nil || cfg.State == "" {
		t.Fatalf("err %v, state %q: want an error and the state dir kept", err, cfg.State)
	}
	cfg, _, err = parseSupervise([]string{"--state=/tmp/y", "--bogus", "--", "true"})
	if err == nil || !strings.Contains(err.Error(), "--bogus") || cfg.State != "/tmp/y" {
		t.Fatalf("err %v, state %q", err, cfg.State)
	}
}

func TestParseSuperviseFlags(t *testing.T) {
	bad := map[string][]string{
		"missing deadline":  {"--state", "s", "--", "true"},
		"missing command":   {"--state", "s", "--deadline", "1"},
		"command no dashes": {"--state", "s", "--deadline", "1", "true"},
		"bad launch id":     {"--state", "s", "--deadline", "1", "--launch-id", "a/b", "--", "true"},
		"long launch id":    {"--state", "s", "--deadline", "1", "--launch-id", strings.Repeat("a", 65), "--", "true"},
		"bad user":          {"--state", "s", "--deadline", "1", "--user", "root", "--", "true"},
		"negative user":     {"--state", "s", "--deadline", "1", "--user", "-1", "--", "true"},
		"lease zero":        {"--state", "s", "--deadline", "1", "--lease", "0", "--", "true"},
		"twice":             {"--state", "s", "--deadline", "1", "--deadline", "2", "--", "true"},
		"detach value":      {"--state", "s", "--deadline", "1", "--detach=yes", "--", "true"},
	}
	for name, args := range bad {
		if _, _, err := parseSupervise(args); err == nil {
			t.Errorf("%s: %q accepted", name, args)
		}
	}
	cfg, detach, err := parseSupervise([]string{"--state", "s", "--deadline", "1.5", "--grace", "0", "--lease", "3", "--user", "1000:100", "--launch-id", "a.B-9_", "--detach", "--", "sh", "-c", "--"})
	if err != nil || !detach || cfg.Deadline != 1500*time.Millisecond || cfg.Grace != 0 || cfg.Lease != 3*time.Second ||
		cfg.User == nil || cfg.User.UID != 1000 || cfg.User.GID != 100 || cfg.LaunchID != "a.B-9_" || strings.Join(cfg.Argv, " ") != "sh -c --" {
		t.Fatalf("cfg %+v detach %v err %v", cfg, detach, err)
	}
}

// --tier (a sandproof extension) takes auto or subreaper, auto by default;
// anything else is a usage error that names the flag and quotes the value.
func TestParseSuperviseTier(t *testing.T) {
	for flag, want := range map[string]string{"": "auto", "--tier=auto": "auto", "--tier=subreaper": "subreaper"} {
		args := []string{"--state", "s", "--deadline", "1"}
		if flag != "" {
			args = append(args, flag)
		}
		cfg, _, err := parseSupervise(append(args, "--", "true"))
		if err != nil || cfg.Tier != want {
			t.Errorf("%q: tier %q, err %v; want %q", flag, cfg.Tier, err, want)
		}
	}
	for _, v := range []string{"cgroup", "", "Subreaper", "subreaper+pidfd"} {
		_, _, err := parseSupervise([]string{"--state", "s", "--deadline", "1", "--tier", v, "--", "true"})
		if err == nil || !strings.Contains(err.Error(), "--tier") || !strings.Contains(err.Error(), fmt.Sprintf("%q", v)) {
			t.Errorf("--tier %q: err %v, want a usage error naming --tier and quoting the value", v, err)
		}
	}
}
