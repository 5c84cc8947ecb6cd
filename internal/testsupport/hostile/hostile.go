// Package hostile builds what a hostile harness package ships to the host
// side of sandproof, for the tests of the host's readers of harness
// artifacts: an ELF executable whose interpreter (PT_INTERP) names any host
// path, and a process whose own environment holds a marker, so a test can
// show that a host file (here /proc/self/environ) was or was not copied.
package hostile

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
)

// ELF links a small C program at dst whose ELF interpreter is interp
// (gcc's -Wl,--dynamic-linker), dynamically linked against the host's libc
// like any glibc build, so only its PT_INTERP is hostile.
func ELF(t testing.TB, dst, interp string) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Missing(t, "gcc (the test links an ELF file with a chosen interpreter)", "apt-get install gcc")
	}
	if err := Link(dst, interp); err != nil {
		t.Fatal(err)
	}
}

// Link is ELF for a caller without a testing.TB (a test's preparer).
func Link(dst, interp string) error {
	dir, err := os.MkdirTemp("", "hostile-elf-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "main.c")
	if err := os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if out, err := exec.Command("gcc", "-o", dst, src, "-Wl,--dynamic-linker="+interp).CombinedOutput(); err != nil {
		return fmt.Errorf("gcc -Wl,--dynamic-linker=%s: %v: %s", interp, err, out)
	}
	return nil
}

// MarkerEnv holds the marker in the environment of the process that runs
// the test.
const MarkerEnv = "SANDPROOF_HOSTILE_MARKER"

// EnvironMarker returns a marker that is in this process's
// /proc/self/environ. That file shows the environment a process was
// started with (os.Setenv does not change it), so the first call starts
// the test t again in a child whose environment holds a fresh marker,
// fails t when the child's run of t did not pass (skips it as the child
// did, when the child lacked a prerequisite), and returns "": the
// caller then returns, the child having done the work.
func EnvironMarker(t *testing.T) string {
	t.Helper()
	if m := os.Getenv(MarkerEnv); m != "" {
		b, err := os.ReadFile("/proc/self/environ")
		if err != nil || !bytes.Contains(b, []byte(m)) {
			t.Fatalf("positive control: /proc/self/environ (%d bytes, %v) does not hold the marker %q", len(b), err, m)
		}
		return m
	}
	m := fmt.Sprintf("host-environ-marker-%d-%d", os.Getpid(), time.Now().UnixNano())
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), MarkerEnv+"="+m)
	out, err := cmd.CombinedOutput()
	if err == nil && bytes.Contains(out, []byte("--- SKIP: "+t.Name())) {
		testenv.Missing(t, fmt.Sprintf("what %s needs, in the child that ran it:\n%s", t.Name(), out), "see the child's line above")
	}
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("%s in a child with %s=%s in its environment: %v\n%s", t.Name(), MarkerEnv, m, err, out)
	}
	t.Logf("ran in a child with the marker in its environment:\n%s", out)
	return ""
}

// LimitFileSize caps the size of every file this process writes at max
// bytes (RLIMIT_FSIZE) until t ends, with SIGXFSZ ignored, so a write past
// the cap fails with EFBIG instead of ending the process: a test of a copy
// that may never end (a loader read from /dev/zero, on a broken build)
// cannot fill the disk. It affects the whole process, so call it only in
// the child EnvironMarker starts.
func LimitFileSize(t *testing.T, max uint64) {
	t.Helper()
	if os.Getenv(MarkerEnv) == "" {
		t.Fatal("LimitFileSize outside the child EnvironMarker starts")
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	signal.Ignore(syscall.SIGXFSZ)
	lim := old
	lim.Cur = min(max, old.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old)
		signal.Reset(syscall.SIGXFSZ)
	})
}
