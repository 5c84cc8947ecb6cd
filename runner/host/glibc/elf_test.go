package glibc

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/artifact"
)

// panicking makes the ELF parser panic, as debug/elf has on crafted
// files before (golang/go#70584, #56429, #47445: index out of range in
// NewFile and its readers), until the test ends. sandproof's own bounded
// parser (ReadELF) is no less able to have such a bug; none is known,
// so the panic is injected where the parser runs.
func panicking(t *testing.T) {
	t.Helper()
	parseHook = func() { panic("runtime error: index out of range [3] with length 0") }
	t.Cleanup(func() { parseHook = nil })
}

// A parser panic on a harness's ELF file is a refusal (artifact.ErrRefused,
// so certify stops before any case and sandproof exits 2), at every place
// that reads one: the layer's scan of the runtime, the resolver's read of
// what a file needs, the interpreter's edit. Without the recover it ended
// certify, taking down every other adapter's run with it.
func TestReadELFRefusesAParserPanic(t *testing.T) {
	root := shortDir(t)
	exe := filepath.Join(root, "bin", "tool")
	hostBinary(t, "true", exe)
	// Positive control: the file reads, and builds a layer, unhurt.
	e, err := ReadELFFile(exe, true)
	if err != nil || e.Machine == 0 || e.Interp == "" || len(e.Needed) == 0 || e.InterpSize == 0 {
		t.Fatalf("positive control: %+v, %v", e, err)
	}
	f, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}

	panicking(t)
	if _, err := ReadELF(f, fi.Size(), true); !errors.Is(err, artifact.ErrRefused) || !strings.Contains(err.Error(), "index out of range") {
		t.Errorf("ReadELF with a parser panic: %v, want a refusal naming the panic", err)
	}
	if _, _, err := readNeeded(f, fi.Size()); !errors.Is(err, artifact.ErrRefused) {
		t.Errorf("readNeeded: %v, want refused", err)
	}
	if _, err := SetInterp(exe, "/x/ld.so"); !errors.Is(err, artifact.ErrRefused) {
		t.Errorf("SetInterp: %v, want refused", err)
	}
	_, err = Build(Options{Root: root, Dir: "g", SandboxDir: root + "/g", LibDirs: HostLibDirs(runtime.GOARCH)})
	if !errors.Is(err, artifact.ErrRefused) || !strings.Contains(err.Error(), "bin/tool") {
		t.Errorf("Build: %v, want refused naming bin/tool", err)
	}
	if _, err := os.Stat(filepath.Join(root, "g")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused layer left its dir: %v", err)
	}
}

// A file the parser rejects is not an ELF file (a script, data): passed
// over, never a refusal.
func TestReadELFOfWhatIsNotELF(t *testing.T) {
	p := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadELFFile(p, true); !errors.Is(err, ErrNotELF) || errors.Is(err, artifact.ErrRefused) {
		t.Errorf("a script: %v, want ErrNotELF", err)
	}
}
