package glibc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
)

// hostBinary copies a dynamically linked host binary (Debian's coreutils)
// to dst, or skips when the host has none.
func hostBinary(t *testing.T, name, dst string) {
	t.Helper()
	src := "/bin/" + name
	if in, err := Interp(src); err != nil || in == "" || strings.Contains(in, "musl") {
		testenv.Missing(t, fmt.Sprintf("a glibc dynamic executable at %s (interpreter %q, %v)", src, in, err),
			"these tests need a glibc host such as Debian's coreutils; it cannot be installed on a musl host")
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// shortDir is a directory whose paths fit in a PT_INTERP (t.TempDir is
// under a long test-named path).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "gl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestSetInterpRewritesInPlace(t *testing.T) {
	p := filepath.Join(t.TempDir(), "true")
	hostBinary(t, "true", p)
	// A trailing payload, as a Bun binary carries: it must survive.
	payload := []byte("\x00PAYLOAD-after-the-ELF-image\x00")
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(payload)
	f.Close()
	before, _ := os.ReadFile(p)
	was, _ := Interp(p)

	old, err := SetInterp(p, "/x/ld.so")
	if err != nil {
		t.Fatal(err)
	}
	if old != was {
		t.Errorf("SetInterp returned old %q, want %q", old, was)
	}
	if got, err := Interp(p); err != nil || got != "/x/ld.so" {
		t.Fatalf("interpreter after the edit: %q, %v; want /x/ld.so", got, err)
	}
	after, _ := os.ReadFile(p)
	if len(after) != len(before) || !bytes.HasSuffix(after, payload) {
		t.Fatalf("edit changed the file's size (%d -> %d) or lost the payload", len(before), len(after))
	}
	// Only the PT_INTERP bytes changed.
	i := bytes.Index(before, []byte(was+"\x00"))
	for j := range before {
		if before[j] != after[j] && (j < i || j >= i+len(was)+1) {
			t.Fatalf("byte %d changed outside PT_INTERP [%d,%d)", j, i, i+len(was)+1)
		}
	}
	if out, err := exec.Command("readelf", "-l", p).Output(); err == nil && !strings.Contains(string(out), "[Requesting program interpreter: /x/ld.so]") {
		t.Errorf("readelf -l does not show the new interpreter:\n%s", out)
	}

	long := "/" + strings.Repeat("a", len(was)) + "/ld.so"
	if _, err := SetInterp(p, long); !errors.Is(err, ErrTooLong) {
		t.Errorf("SetInterp(%d bytes) = %v, want ErrTooLong", len(long), err)
	}
	if got, _ := Interp(p); got != "/x/ld.so" {
		t.Errorf("a refused edit changed the interpreter to %q", got)
	}
}

// TestBuildRunsThroughTheLayer builds a layer for a copy of the host's cat
// and runs it: the loader and libc it maps are the layer's files (read
// from its own /proc/self/maps), and with the layer moved away it cannot
// start at all, so the host's loader is not what ran it.
func TestBuildRunsThroughTheLayer(t *testing.T) {
	root := shortDir(t)
	cat := filepath.Join(root, "bin", "cat")
	hostBinary(t, "cat", cat)
	layer, err := Build(Options{Root: root, Dir: "g", SandboxDir: root + "/g", LibDirs: HostLibDirs(runtime.GOARCH)})
	if err != nil {
		t.Fatal(err)
	}
	if layer.Loader != root+"/g/ld.so" || layer.LibDir != root+"/g" {
		t.Errorf("layer loader %q lib dir %q", layer.Loader, layer.LibDir)
	}
	if !layer.Has("libc.so.6") || !layer.Has(LoaderName) {
		t.Fatalf("layer files %+v: want ld.so and libc.so.6", layer.Files)
	}
	for _, f := range layer.Files {
		sum, err := hashFile(filepath.Join(root, f.Path))
		if err != nil || sum != f.SHA256 {
			t.Errorf("%s: recorded sha256 %s, file hashes %s (%v)", f.Path, f.SHA256, sum, err)
		}
	}
	if len(layer.Patched) != 1 || layer.Patched[0].Path != "bin/cat" || layer.Patched[0].OldInterp == "" {
		t.Fatalf("patched %+v, want bin/cat", layer.Patched)
	}
	if got, _ := Interp(cat); got != root+"/g/ld.so" {
		t.Fatalf("bin/cat's interpreter is %q", got)
	}

	cmd := exec.Command(cat, "/proc/self/maps")
	cmd.Env = []string{"LD_LIBRARY_PATH=" + root + "/g"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("patched cat with the layer in place: %v: %s", err, out)
	}
	for _, want := range []string{root + "/g/ld.so", root + "/g/libc.so.6"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("cat's maps do not map %s:\n%s", want, out)
		}
	}

	if err := os.Rename(root+"/g", root+"/moved"); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(cat, "/proc/self/maps")
	cmd.Env = []string{"LD_LIBRARY_PATH=" + root + "/g"}
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("patched cat ran without the layer: %s", out)
	}
}

func TestBuildRefusesATreeWithoutGlibcExecutable(t *testing.T) {
	root := shortDir(t)
	os.WriteFile(filepath.Join(root, "script"), []byte("#!/bin/sh\n"), 0o755)
	if _, err := Build(Options{Root: root, Dir: "g", SandboxDir: "/g", LibDirs: HostLibDirs(runtime.GOARCH)}); err == nil || !strings.Contains(err.Error(), "no glibc executable") {
		t.Fatalf("Build = %v, want no glibc executable", err)
	}
}

func TestBuildNamesAMissingLibrary(t *testing.T) {
	root := shortDir(t)
	hostBinary(t, "cat", filepath.Join(root, "bin", "cat"))
	_, err := Build(Options{Root: root, Dir: "g", SandboxDir: root + "/g", LibDirs: []string{t.TempDir()}})
	if err == nil || !strings.Contains(err.Error(), "needs libc.so.6") {
		t.Fatalf("Build with empty lib dirs = %v, want it to name libc.so.6", err)
	}
}

// A DT_NEEDED name with a slash would reach a host file outside the
// library dirs: the closure refuses it, naming it, before it looks.
func TestClosureRefusesANeededNameThatIsAPath(t *testing.T) {
	root := shortDir(t)
	exe := filepath.Join(root, "bin", "cat")
	hostBinary(t, "cat", exe)
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	// Same length as libc.so.6, so dynstr keeps its layout.
	const crafted = "../libc.6"
	i := bytes.Index(b, []byte("\x00libc.so.6\x00"))
	if i < 0 {
		t.Fatal("positive control: the host's cat names libc.so.6 in its dynamic strings")
	}
	copy(b[i+1:], crafted)
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	// What the name reaches from the lib dir: an ELF file with no needs
	// of its own (the host's loader), so only the name check can refuse.
	libs := filepath.Join(root, "lib")
	if err := os.MkdirAll(libs, 0o755); err != nil {
		t.Fatal(err)
	}
	loader, err := Interp("/bin/cat")
	if err != nil || loader == "" {
		t.Fatalf("read the host's interpreter: %q, %v", loader, err)
	}
	ld, err := os.ReadFile(loader)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "libc.6"), ld, 0o644); err != nil {
		t.Fatal(err)
	}
	r := &resolver{dirs: []string{libs}, seen: map[string]string{}}
	err = r.closure(exe)
	if err == nil || !strings.Contains(err.Error(), `"../libc.6"`) {
		t.Fatalf("closure of a binary needing %q = %v (resolved %v), want it refused by name", crafted, err, r.seen)
	}
}
