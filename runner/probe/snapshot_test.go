package probe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"
)

func TestParseOSRelease(t *testing.T) {
	in := "# comment\nNAME=\"Debian GNU/Linux\"\nID=debian\nVERSION_ID=\"12\"\nPRETTY_NAME='Alpine \"x\"'\nQ=\"a\\\"b\\\\c\"\nbroken line\n"
	got := ParseOSRelease([]byte(in))
	want := map[string]string{"NAME": "Debian GNU/Linux", "ID": "debian", "VERSION_ID": "12", "PRETTY_NAME": `Alpine "x"`, "Q": `a"b\c`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseOSRelease = %q, want %q", got, want)
	}
}

func TestToolJSON(t *testing.T) {
	b, err := json.Marshal(Tool{})
	if err != nil || string(b) != `"none"` {
		t.Fatalf("Marshal(absent tool) = %s, %v; want \"none\"", b, err)
	}
	in := Tool{Path: "/opt/testbed/bin/python3", Resolved: "/usr/bin/python3.9", Version: "Python 3.9.2", SHA256: "ab"}
	b, err = json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Tool
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Fatalf("round trip of %s = %+v, %v", b, out, err)
	}
	out = in
	if err := json.Unmarshal([]byte(`"none"`), &out); err != nil || !out.Absent() {
		t.Fatalf(`Unmarshal("none") = %+v, %v; want absent`, out, err)
	}
	if err := json.Unmarshal([]byte(`"python"`), &out); err == nil {
		t.Fatal(`Unmarshal("python"): want an error`)
	}
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// TestTakeFakeImage points the probe at a hand-made image: an os-release,
// a python3 that is a symlink to a script printing an old version, a
// non-executable bash that must not count, marker files, and a fake proc.
func TestTakeFakeImage(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "etc/os-release"), "ID=ubuntu\nVERSION_ID=\"22.04\"\nPRETTY_NAME=\"Ubuntu 22.04\"\n", 0o644)
	py := "#!/bin/sh\necho 'Python 3.6.13' >&2\n"
	writeFile(t, filepath.Join(root, "usr/bin/python3.6"), py, 0o755)
	testbed := filepath.Join(root, "opt/testbed/bin")
	if err := os.MkdirAll(testbed, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "usr/bin/python3.6"), filepath.Join(testbed, "python3")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "usr/bin/bash"), "not executable", 0o644)
	marker := filepath.Join(root, "home/task/.config/m")
	writeFile(t, marker, "token", 0o600)
	missing := filepath.Join(root, "home/task/.cache/m")
	dirMarker := filepath.Join(root, "home")
	fp := newFakeProc(t)
	fp.add(1, 0, "sleep", "S", 10, 0)

	s, err := Take(context.Background(), Options{
		ProcRoot: fp.root, Root: root,
		Path:    testbed + ":" + filepath.Join(root, "usr/bin"),
		Markers: []string{marker, missing, dirMarker},
	})
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	if s.Schema != Schema || s.OS != "ubuntu-22.04" || s.OSName != "Ubuntu 22.04" {
		t.Errorf("schema/os = %q %q %q", s.Schema, s.OS, s.OSName)
	}
	wantPy := Tool{Path: filepath.Join(testbed, "python3"), Resolved: filepath.Join(root, "usr/bin/python3.6"), Version: "Python 3.6.13", SHA256: sum(py)}
	if s.Python3 != wantPy {
		t.Errorf("python3 = %+v, want %+v", s.Python3, wantPy)
	}
	if !s.Bash.Absent() {
		t.Errorf("bash = %+v; a non-executable file must not count", s.Bash)
	}
	if len(s.Markers) != 3 {
		t.Fatalf("markers = %+v, want 3", s.Markers)
	}
	if m := s.Markers[0]; m.Missing || m.SHA256 != sum("token") || m.Size != 5 {
		t.Errorf("marker = %+v, want sha256 of %q", m, "token")
	}
	if m := s.Markers[1]; !m.Missing {
		t.Errorf("missing marker = %+v, want missing", m)
	}
	if m := s.Markers[2]; m.Missing || m.Error == "" {
		t.Errorf("directory marker = %+v, want an error", m)
	}
	if len(s.Processes) != 1 || s.Processes[0].Comm != "sleep" {
		t.Errorf("processes = %+v, want the fake pid 1", s.Processes)
	}

	// The JSON a snapshot prints reads back the same.
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Snapshot
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, s) {
		t.Errorf("round trip:\n %+v\nwant\n %+v", back, s)
	}
}

func TestTakeNoOSRelease(t *testing.T) {
	fp := newFakeProc(t)
	s, err := Take(context.Background(), Options{ProcRoot: fp.root, Root: t.TempDir(), Path: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if s.OS != "unknown" || !s.Python3.Absent() || !s.Bash.Absent() {
		t.Errorf("empty image: os=%q python3=%v bash=%v", s.OS, s.Python3, s.Bash)
	}
}

func TestToolVersionFailureIsRecorded(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "python3"), "#!/bin/sh\necho broken >&2\nexit 3\n", 0o755)
	s, err := Take(context.Background(), Options{ProcRoot: newFakeProc(t).root, Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	if s.Python3.Absent() || s.Python3.Version != "broken" || s.Python3.Error == "" {
		t.Errorf("python3 = %+v; want present, version %q, an error", s.Python3, "broken")
	}
}

// python3 and bash are looked at side by side: each fake here answers
// --version only once the other has started, so one after the other the
// first would wait out its ToolTimeout and carry an error. Both are
// still whole (hash and version), and done before the process table.
func TestTakeLooksAtToolsSideBySide(t *testing.T) {
	dir := t.TempDir()
	tool := func(me, other, answer string) string {
		return "#!/bin/sh\ntouch " + filepath.Join(dir, me+".started") + "\n" +
			"while [ ! -e " + filepath.Join(dir, other+".started") + " ]; do sleep 0.01; done\necho '" + answer + "'\n"
	}
	py, bash := tool("python3", "bash", "Python 3.11.2"), tool("bash", "python3", "GNU bash, version 5.2.15")
	writeFile(t, filepath.Join(dir, "python3"), py, 0o755)
	writeFile(t, filepath.Join(dir, "bash"), bash, 0o755)
	// The fakes find touch and sleep after themselves on the PATH.
	s, err := Take(context.Background(), Options{ProcRoot: newFakeProc(t).root, Path: dir + ":/usr/bin:/bin", ToolTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if s.Python3.Version != "Python 3.11.2" || s.Python3.SHA256 != sum(py) || s.Python3.Error != "" {
		t.Errorf("python3 = %+v, want its version and hash, no error", s.Python3)
	}
	if s.Bash.Version != "GNU bash, version 5.2.15" || s.Bash.SHA256 != sum(bash) || s.Bash.Error != "" {
		t.Errorf("bash = %+v, want its version and hash, no error", s.Bash)
	}
}

// A fifo where a marker (or the deliverable) should be is reported, not
// waited on: a plain open would block until a writer came.
func TestReadMarkerFifoDoesNotBlock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "deliverable.txt")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(p)
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("positive control: %v is not a fifo: %v", p, err)
	}
	m := readMarker(context.Background(), p, MaxMarkerBytes)
	if m.Error == "" || m.SHA256 != "" {
		t.Errorf("fifo marker = %+v, want an error and no hash", m)
	}
}

// The owner's looks at the scenarios' writer (Options.Lines, ResolveSh):
// a marker asked for gives its lines and last line, every readable
// marker its owner and permission bits by fstat, and the snapshot where
// sh on the PATH resolves, links followed (what /proc/PID/exe of a
// process running it names).
func TestTakeLinesOwnerModeAndSh(t *testing.T) {
	root := t.TempDir()
	writer := filepath.Join(root, "task/sandproof-writer.log")
	writeFile(t, writer, "0 1800000000\n1 1800000000\n", 0o444)
	other := filepath.Join(root, "task/other")
	writeFile(t, other, "0 1800000000\n", 0o644)
	dash := filepath.Join(root, "usr/bin/dash")
	writeFile(t, dash, "#!/bin/true\n", 0o755)
	bin := filepath.Join(root, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dash, filepath.Join(bin, "sh")); err != nil {
		t.Fatal(err)
	}
	fp := newFakeProc(t)
	s, err := Take(context.Background(), Options{ProcRoot: fp.root, Root: root, Path: bin, NoExec: true,
		Markers: []string{writer, other}, Lines: []string{writer}, ResolveSh: true})
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Markers[0]; m.Lines != 2 || m.LastLine != "1 1800000000" || m.File == nil || int(m.File.UID) != os.Getuid() || m.File.Mode&0o7777 != 0o444 {
		t.Errorf("the writer's file %+v: want 2 lines, the last \"1 1800000000\", uid %d, mode 0444", m, os.Getuid())
	}
	if m := s.Markers[1]; m.Lines != 0 || m.LastLine != "" || m.File == nil || m.File.Mode&0o7777 != 0o644 {
		t.Errorf("a marker not in Lines %+v: want no lines counted, mode 0644", m)
	}
	if s.Sh != dash {
		t.Errorf("sh resolved to %q, want %q", s.Sh, dash)
	}
	if s, err := Take(context.Background(), Options{ProcRoot: fp.root, Root: root, Path: bin, NoExec: true}); err != nil || s.Sh != "" {
		t.Errorf("sh %q (%v) unasked, want none", s.Sh, err)
	}
}
