package witness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// specReceipt is the example of contract §3.
const specReceipt = `{
  "schema": "warden.receipt/v1",
  "warden_version": "0.1.0+abc1234",
  "launch_id": "9f2c",
  "cleanup_confirmed": true,
  "return_code": 0,
  "signal": null,
  "timed_out": false,
  "stopped": false,
  "error": null,
  "cause": "exited",
  "started_at": "2026-11-29T10:00:00.000000001Z",
  "ended_at": "2026-11-29T10:00:01.250000000Z",
  "stop_seconds": 0.012,
  "tier": "subreaper+pidfd",
  "reached":    [{"pid": 41, "start_time": 123456, "comm": "sleep", "why": "orphan"}],
  "survivors":  [],
  "unverified": [],
  "preserved":  []
}`

func TestParseReceiptSpecExample(t *testing.T) {
	r, err := ParseReceipt([]byte(specReceipt))
	if err != nil {
		t.Fatal(err)
	}
	if !r.CleanupConfirmed || r.ReturnCode == nil || *r.ReturnCode != 0 || r.Signal != nil || r.Cause != "exited" {
		t.Errorf("receipt %+v", r)
	}
	if m, ok := Find(r.Reached, ID{41, 123456}); !ok || m.Why != "orphan" || m.Comm != "sleep" {
		t.Errorf("Find reached 41@123456 = %+v, %v", m, ok)
	}
	if _, ok := Find(r.Reached, ID{41, 1}); ok {
		t.Error("Find matched a reused pid")
	}
	// Readers must accept unknown fields.
	extra := strings.Replace(specReceipt, `"schema"`, `"future": {"x": 1}, "schema"`, 1)
	if _, err := ParseReceipt([]byte(extra)); err != nil {
		t.Errorf("unknown field: %v", err)
	}
	// fenced and refused start nothing and may have no tier.
	fenced := strings.NewReplacer(`"cause": "exited"`, `"cause": "fenced"`, `"tier": "subreaper+pidfd"`, `"tier": ""`).Replace(specReceipt)
	if _, err := ParseReceipt([]byte(fenced)); err != nil {
		t.Errorf("fenced without tier: %v", err)
	}
}

func TestParseReceiptRejects(t *testing.T) {
	for _, tt := range []struct{ name, old, new string }{
		{"missing field", `"stopped": false,`, ``},
		{"null list", `"survivors":  []`, `"survivors": null`},
		{"bool as string", `"timed_out": false`, `"timed_out": "false"`},
		{"null bool", `"cleanup_confirmed": true`, `"cleanup_confirmed": null`},
		{"return code as string", `"return_code": 0`, `"return_code": "0"`},
		{"schema", `warden.receipt/v1`, `warden.receipt/v2`},
		{"empty version", `"0.1.0+abc1234"`, `""`},
		{"cause", `"exited"`, `"killed"`},
		{"tier", `"subreaper+pidfd"`, `"pidfd"`},
		{"empty tier of a launch that ran", `"subreaper+pidfd"`, `""`},
		{"why", `"orphan"`, `"guess"`},
		{"member without start time", `"start_time": 123456, `, ``},
		{"member with start time 0", `"start_time": 123456`, `"start_time": 0`},
		{"ended before started", `2026-11-29T10:00:01.250000000Z`, `2026-11-29T09:00:00Z`},
		{"bad time", `2026-11-29T10:00:00.000000001Z`, `yesterday`},
		{"negative stop seconds", `0.012`, `-1`},
	} {
		data := strings.Replace(specReceipt, tt.old, tt.new, 1)
		if data == specReceipt {
			t.Fatalf("%s: %q is not in the example", tt.name, tt.old)
		}
		if r, err := ParseReceipt([]byte(data)); err == nil {
			t.Errorf("%s: ParseReceipt = %+v, want an error", tt.name, r)
		}
	}
	if _, err := ParseReceipt([]byte(`[1]`)); err == nil {
		t.Error("an array parsed as a receipt")
	}
}

func TestReadReceipt(t *testing.T) {
	state := t.TempDir()
	if _, err := ReadReceipt(state); !os.IsNotExist(err) {
		t.Errorf("ReadReceipt without a receipt: %v, want not-exist", err)
	}
	if err := os.WriteFile(filepath.Join(state, ReceiptFile), []byte(specReceipt), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := ReadReceipt(state); err != nil || r.LaunchID != "9f2c" {
		t.Errorf("ReadReceipt = %+v, %v", r, err)
	}
}

func TestParseDetached(t *testing.T) {
	d, err := ParseDetached(`{"launch_id":"L","supervisor_pid":42,"state":"/s"}` + "\n")
	if err != nil || d != (Detached{"L", 42, "/s"}) {
		t.Errorf("ParseDetached = %+v, %v", d, err)
	}
	for _, out := range []string{
		"",
		`{"launch_id":"L","supervisor_pid":42,"state":"/s"}` + "\n" + `{"launch_id":"L","supervisor_pid":42,"state":"/s"}`,
		`{"launch_id":"L","supervisor_pid":0,"state":"/s"}`,
		`{"launch_id":"","supervisor_pid":42,"state":"/s"}`,
		`started 42`,
	} {
		if d, err := ParseDetached(out); err == nil {
			t.Errorf("ParseDetached(%q) = %+v, want an error", out, d)
		}
	}
}
