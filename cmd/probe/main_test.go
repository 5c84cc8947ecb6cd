package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
		{"snapshot", "--place", "/only-one"},
		{"snapshot", "--place", "relative,/b"},
		{"snapshot", "--place", "/a,/b,/c"},
		{"snapshot", "--detail-uids", "task"},
		{"snapshot", "--detail-uids", "1000,,0"},
		{"snapshot", "--detail-uids", "-1"},
		{"snapshot", "--lines", "/a"},
		{"snapshot", "--markers", "/b", "--lines", "/a"},
		{"diff", "one.json"},
		{"setup"},
		{"setup", "--owner", "1000"},
		{"setup", "--owner", "1000:1000", "--dirs", "relative"},
		{"setup", "--owner", "1000:1000", "--write-markers", "/a,,/b"},
		{"setup", "--owner", "1000:1000", "extra"},
		{"setup", "--owner", "1000:1000", "--"},
		{"setup", "--owner", "1000:1000", "--", "relative/sandagent"},
		{"setup", "--owner", "1000:1000", "extra", "--", "/x/sandagent"},
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

// snapshot --detail-uids gives the processes of those uids with their
// command line and executable, and the others without: the test's own
// process (this uid) carries its argv[0] and its executable.
func TestSnapshotDetailUIDs(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, &bytes.Buffer{}, []string{"snapshot", "--no-exec", "--detail-uids", strconv.Itoa(os.Getuid())}); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	var s probe.Snapshot
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var self *probe.Process
	others := 0
	for i, p := range s.Processes {
		switch {
		case p.PID == os.Getpid():
			self = &s.Processes[i]
		case p.UID != os.Getuid() && p.Detail != nil:
			others++
		}
	}
	if self == nil || self.Detail == nil {
		t.Fatalf("own process %+v: want it with its detail", self)
	}
	if d := self.Detail; len(d.Cmdline) == 0 || d.Cmdline[0] != os.Args[0] || d.Exe != exe || d.TracerPID != 0 || d.GID != os.Getgid() {
		t.Errorf("own detail %+v, want argv[0] %q, exe %q, tracer 0, gid %d", d, os.Args[0], exe, os.Getgid())
	}
	if others > 0 {
		t.Errorf("%d processes of other uids carry a detail nobody asked for", others)
	}
}

// snapshot --lines counts the lines of a marker and gives its last, with
// the file's owner and mode; --resolve-sh gives where sh on the PATH
// resolves (the writer's looks, runner/host/certify).
func TestSnapshotLinesAndSh(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "writer.log")
	if err := os.WriteFile(marker, []byte("0 1800000000\n1 1800000000\n2 1800000001\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	shell := filepath.Join(dir, "dash")
	if err := os.WriteFile(shell, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(shell, filepath.Join(bin, "sh")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	var out bytes.Buffer
	if err := run(&out, &bytes.Buffer{}, []string{"snapshot", "--no-exec", "--markers", marker, "--lines", marker, "--resolve-sh"}); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	var s probe.Snapshot
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Markers) != 1 {
		t.Fatalf("markers %+v, want one", s.Markers)
	}
	if m := s.Markers[0]; m.Lines != 3 || m.LastLine != "2 1800000001" || m.File == nil || int(m.File.UID) != os.Getuid() || m.File.Mode&0o7777 != 0o640 {
		t.Errorf("marker %+v, want 3 lines, the last \"2 1800000001\", uid %d, mode 0640", m, os.Getuid())
	}
	if s.Sh != shell {
		t.Errorf("sh %q, want %q (the link on PATH resolved)", s.Sh, shell)
	}
	// Without the flags, neither is given.
	out.Reset()
	if err := run(&out, &bytes.Buffer{}, []string{"snapshot", "--no-exec", "--markers", marker}); err != nil {
		t.Fatal(err)
	}
	s = probe.Snapshot{}
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if m := s.Markers[0]; m.Lines != 0 || m.LastLine != "" || s.Sh != "" {
		t.Errorf("unasked: marker %+v, sh %q; want no lines and no sh", m, s.Sh)
	}
}

// snapshot --place copies before it hashes: the marker's hash is the placed
// file's (a session's seed verifies the warden it placed, not its source).
func TestSnapshotPlacesThenHashesThePlacedFile(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "warden"), filepath.Join(dir, "bin-warden")
	if err := os.WriteFile(src, []byte("the build"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(&out, &bytes.Buffer{}, []string{"snapshot", "--no-exec", "--place", src + "," + dst, "--markers", dst}); err != nil {
		t.Fatalf("snapshot --place: %v", err)
	}
	var s probe.Snapshot
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("snapshot output: %v\n%s", err, out.Bytes())
	}
	if len(s.Markers) != 1 || s.Markers[0].Missing || s.Markers[0].SHA256 != sha256hex("the build") {
		t.Fatalf("markers %+v, want %s hashed as %s", s.Markers, dst, sha256hex("the build"))
	}
	// A source that cannot be placed fails the run before any snapshot.
	out.Reset()
	if err := run(&out, &bytes.Buffer{}, []string{"snapshot", "--place", filepath.Join(dir, "none") + "," + dst, "--markers", dst}); err == nil || out.Len() != 0 {
		t.Fatalf("snapshot --place of a missing source: %v, output %q; want an error and no snapshot", err, out.Bytes())
	}
}

func sha256hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
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

func TestSetupWritesSecretFromStdin(t *testing.T) {
	root := t.TempDir()
	secret := filepath.Join(root, "task", "challenge.txt")
	owner := fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	args := []string{"setup", "--owner", owner, "--dirs", filepath.Dir(secret), "--secret", secret}
	defer func(r io.Reader) { stdin = r }(stdin)
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{"one line", frame(probe.TagSecret, "sandproof-challenge-ab\n"), true},
		{"empty stdin", "", false},
		{"an empty frame", frame(probe.TagSecret, ""), false},
		{"unframed", "sandproof-challenge-ab\n", false},
		{"short header", frame(probe.TagSecret, "x")[:5], false},
		{"short payload", frame(probe.TagSecret, "sandproof-challenge-ab\n")[:12], false},
		{"too much", frame(probe.TagSecret, strings.Repeat("x", maxSecret+1)), false},
	} {
		os.Remove(secret)
		stdin = strings.NewReader(tc.in)
		var out, errb bytes.Buffer
		err := run(&out, &errb, args)
		if (err == nil) != tc.ok {
			t.Errorf("%s: setup = %v, want ok %v", tc.name, err, tc.ok)
			continue
		}
		b, rerr := os.ReadFile(secret)
		switch {
		case tc.ok && (rerr != nil || string(b) != tc.in[8:]):
			t.Errorf("%s: secret = %q, %v; want %q", tc.name, b, rerr, tc.in[8:])
		case !tc.ok && rerr == nil:
			t.Errorf("%s: a refused secret was written (%d bytes)", tc.name, len(b))
		}
	}
	var ue usageError
	for _, bad := range []string{"relative", "/a,/b"} {
		stdin = strings.NewReader(frame(probe.TagSecret, "x\n"))
		if err := run(io.Discard, io.Discard, []string{"setup", "--owner", owner, "--secret", bad}); !errors.As(err, &ue) {
			t.Errorf("--secret %q = %v, want a usage error", bad, err)
		}
	}
}

func frame(tag, data string) string {
	var b bytes.Buffer
	if err := probe.WriteFrame(&b, tag, []byte(data)); err != nil {
		panic(err)
	}
	return b.String()
}

// TestSetupBecomesItsCommand: with `-- ARGV` setup reads exactly the
// secret's frame, prints the snapshot as one frame and nothing else, and
// then becomes ARGV with the rest of stdin unread (the agent's).
func TestSetupBecomesItsCommand(t *testing.T) {
	root := t.TempDir()
	secret := filepath.Join(root, "task", "challenge.txt")
	owner := fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	defer func(r io.Reader, e func([]string) error) { stdin, execve = r, e }(stdin, execve)
	const agentBytes = "the agent's first frame"
	in := strings.NewReader(frame(probe.TagSecret, "sandproof-challenge-cd\n") + agentBytes)
	stdin = in
	var became []string
	var leftAtExec string
	execve = func(argv []string) error {
		became = argv
		rest, _ := io.ReadAll(in)
		leftAtExec = string(rest)
		return nil
	}
	var out bytes.Buffer
	if err := run(&out, io.Discard, []string{"setup", "--owner", owner, "--dirs", filepath.Dir(secret), "--secret", secret,
		"--", "/owner/sandagent", "serve", "--listen", "127.0.0.1:1"}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	if want := []string{"/owner/sandagent", "serve", "--listen", "127.0.0.1:1"}; fmt.Sprint(became) != fmt.Sprint(want) {
		t.Fatalf("became %q, want %q", became, want)
	}
	if leftAtExec != agentBytes {
		t.Errorf("stdin left to the command = %q, want %q (setup must read the secret's frame and nothing more)", leftAtExec, agentBytes)
	}
	b, err := probe.ReadFrame(&out, probe.TagSnapshot, 1<<20)
	if err != nil {
		t.Fatalf("setup's stdout: %v", err)
	}
	var s probe.Snapshot
	if err := json.Unmarshal(b, &s); err != nil || s.Schema != probe.Schema || s.Self.PID != os.Getpid() {
		t.Fatalf("snapshot frame = %v, schema %q, self %+v; want this process as self", err, s.Schema, s.Self)
	}
	if out.Len() != 0 {
		t.Errorf("setup wrote %q past its snapshot frame", out.String())
	}

	execve = func([]string) error { return errors.New("no such file") }
	stdin = strings.NewReader(frame(probe.TagSecret, "c\n"))
	err = run(io.Discard, io.Discard, []string{"setup", "--owner", owner, "--secret", secret, "--", "/nope"})
	if err == nil || !strings.Contains(err.Error(), `exec "/nope"`) {
		t.Errorf("setup whose exec failed = %v, want the exec's error", err)
	}
}

// snapshot ends at its own --deadline with probe.ErrDeadline (main exits
// probe.ExitDeadline on it), and refuses a cap or a deadline of zero.
func TestSnapshotEndsAtItsDeadline(t *testing.T) {
	var fired []time.Duration
	was := atDeadline
	atDeadline = func(d time.Duration) { fired = append(fired, d) }
	t.Cleanup(func() { atDeadline = was })
	var out bytes.Buffer
	err := run(&out, &bytes.Buffer{}, []string{"snapshot", "--no-exec", "--deadline", "1ns"})
	if !errors.Is(err, probe.ErrDeadline) || out.Len() != 0 {
		t.Fatalf("snapshot --deadline 1ns: %v, printed %d bytes; want ErrDeadline and nothing printed", err, out.Len())
	}
	// Positive control: the same snapshot with the default deadline ends well.
	if err := run(&out, &bytes.Buffer{}, []string{"snapshot", "--no-exec"}); err != nil || out.Len() == 0 {
		t.Fatalf("positive control: %v", err)
	}
	for _, args := range [][]string{{"snapshot", "--max-hash", "0"}, {"snapshot", "--deadline", "0s"}, {"setup", "--owner", "1:1", "--deadline", "0s"}} {
		var ue usageError
		if err := run(&out, &bytes.Buffer{}, args); !errors.As(err, &ue) {
			t.Errorf("run(%q) = %v, want a usage error", args, err)
		}
	}
	if len(fired) != 0 {
		t.Errorf("the watchdog fired %v: the context ended the run first", fired)
	}
}
