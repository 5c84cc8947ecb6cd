package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandproof/sandproof/runner/probe"
)

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"nope"},
		{"snapshot", "extra"},
		{"snapshot", "--markers", "relative/path"},
		{"snapshot", "--markers", "/a,,/b"},
		{"snapshot", "--bogus"},
		{"diff", "one.json"},
		{"setup"},
		{"setup", "--owner", "1000"},
		{"setup", "--owner", "1000:1000", "--dirs", "relative"},
		{"setup", "--owner", "1000:1000", "--write-markers", "/a,,/b"},
		{"setup", "--owner", "1000:1000", "extra"},
	} {
		var out, errb bytes.Buffer
		err := run(&out, &errb, args)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("run(%q) = %v, want a usage error", args, err)
		}
	}
}

func writeSnap(t *testing.T, s probe.Snapshot) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "snap.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSnapshotThenDiff(t *testing.T) {
	var out bytes.Buffer
	marker := filepath.Join(t.TempDir(), "m")
	if err := os.WriteFile(marker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(&out, &bytes.Buffer{}, []string{"snapshot", "--markers", marker}); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	var s probe.Snapshot
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("snapshot output is not a snapshot: %v\n%s", err, out.Bytes())
	}
	if len(s.Markers) != 1 || s.Markers[0].Missing || len(s.Processes) == 0 {
		t.Fatalf("snapshot = markers %+v, %d processes", s.Markers, len(s.Processes))
	}

	same := writeSnap(t, s)
	out.Reset()
	if err := run(&out, &bytes.Buffer{}, []string{"diff", same, same}); err != nil {
		t.Fatalf("diff of a snapshot with itself: %v\n%s", err, out.Bytes())
	}

	changed := s
	changed.Markers = []probe.Marker{{Path: marker, Missing: true}}
	out.Reset()
	err := run(&out, &bytes.Buffer{}, []string{"diff", same, writeSnap(t, changed)})
	if !errors.Is(err, errDirty) {
		t.Fatalf("diff with a lost marker = %v, want errDirty", err)
	}
	var r probe.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Clean || len(r.Changes) != 1 {
		t.Fatalf("diff report = %+v, %v; want one change", r, err)
	}
}

func TestDiffRejectsOtherSchema(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.json")
	if err := os.WriteFile(p, []byte(`{"schema":"other"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	err := run(&bytes.Buffer{}, &bytes.Buffer{}, []string{"diff", p, p})
	var ue usageError
	if err == nil || errors.As(err, &ue) || errors.Is(err, errDirty) {
		t.Fatalf("diff of a foreign file = %v, want a plain error", err)
	}
}

func TestSetupPrintsSnapshotWithWrittenMarkers(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "xdg", "owner")
	marker := filepath.Join(dir, "marker")
	extra := filepath.Join(root, "absent")
	owner := fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	var out, errb bytes.Buffer
	if err := run(&out, &errb, []string{"setup", "--owner", owner, "--dirs", filepath.Dir(dir) + "," + dir,
		"--write-markers", marker, "--markers", extra}); err != nil {
		t.Fatalf("setup: %v (%s)", err, errb.String())
	}
	var s probe.Snapshot
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Markers) != 2 || s.Markers[0].Path != marker || s.Markers[0].Missing || s.Markers[0].SHA256 == "" ||
		s.Markers[1].Path != extra || !s.Markers[1].Missing {
		t.Fatalf("markers = %+v, want the written marker hashed, then %s missing", s.Markers, extra)
	}
	if len(s.Processes) == 0 {
		t.Error("no process table in the setup snapshot")
	}
}
