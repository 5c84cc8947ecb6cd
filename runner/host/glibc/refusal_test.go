package glibc

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/hostile"
	"github.com/sandproof/sandproof/runner/host/artifact"
)

// A harness's own package that the layer cannot be built for is bad
// input (artifact.ErrRefused: sandproof exits 2); on main each of these
// failed prepare with a plain error, which sandproof takes for the host
// failing (exit 3, and CI retries the engine for a package that can
// never pass).
func TestBuildRefusesWhatThePackageCauses(t *testing.T) {
	so := hostLoader(t)
	t.Run("a library the host lacks", func(t *testing.T) {
		root := shortDir(t)
		exe := filepath.Join(root, "bin", "cat")
		hostBinary(t, "cat", exe)
		editBytes(t, exe, "\x00libc.so.6\x00", "\x00libq.so.6\x00")
		_, err := Build(Options{Root: root, Dir: "g", SandboxDir: root + "/g", LibDirs: HostLibDirs(runtime.GOARCH)})
		if !errors.Is(err, artifact.ErrRefused) || !strings.Contains(err.Error(), "needs libq.so.6") {
			t.Errorf("Build of an executable needing libq.so.6 = %v, want refused naming it", err)
		}
	})
	t.Run("a PT_INTERP too short for the layer's loader", func(t *testing.T) {
		root := shortDir(t)
		exe := filepath.Join(root, "bin", "tool")
		interp := "/lib/" + so // a glibc loader in a standard place
		hostile.ELF(t, exe, interp)
		sandbox := "/" + strings.Repeat("s", len(interp)) // its ld.so does not fit
		_, err := Build(Options{Root: root, Dir: "g", SandboxDir: sandbox, LibDirs: HostLibDirs(runtime.GOARCH)})
		if !errors.Is(err, ErrTooLong) {
			t.Fatalf("positive control: Build = %v, want ErrTooLong", err)
		}
		if !errors.Is(err, artifact.ErrRefused) {
			t.Errorf("Build of an executable whose PT_INTERP cannot hold the layer's loader = %v, want refused", err)
		}
	})
	t.Run("an executable whose DT_NEEDED cannot be read", func(t *testing.T) {
		root := shortDir(t)
		exe := filepath.Join(root, "bin", "cat")
		hostBinary(t, "cat", exe)
		dynamicPastTheEnd(t, exe)
		_, err := Build(Options{Root: root, Dir: "g", SandboxDir: root + "/g", LibDirs: HostLibDirs(runtime.GOARCH)})
		if !errors.Is(err, artifact.ErrRefused) {
			t.Errorf("Build of an executable whose dynamic section lies past its end = %v, want refused", err)
		}
	})
	t.Run("no glibc executable", func(t *testing.T) {
		root := shortDir(t)
		os.WriteFile(filepath.Join(root, "script"), []byte("#!/bin/sh\n"), 0o755)
		if _, err := Build(Options{Root: root, Dir: "g", SandboxDir: "/g", LibDirs: HostLibDirs(runtime.GOARCH)}); !errors.Is(err, artifact.ErrRefused) {
			t.Errorf("Build of a tree without a glibc executable = %v, want refused", err)
		}
	})
}

// PT_INTERP's bytes are the package's: a read of them that fails on the
// bytes (past the file's end, a format error) is refused; one the host's
// disk fails (EIO) is the host's.
func TestInterpBlamesThePackageNotTheHost(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "tool")
	hostile.ELF(t, exe, "/lib64/"+hostLoader(t))
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		fail    error
		refused bool
	}{
		{"its bytes", io.ErrUnexpectedEOF, true},
		{"the host's disk", &fs.PathError{Op: "read", Path: exe, Err: syscall.EIO}, false},
	} {
		_, err := ReadELF(failAt{b, interpOff(t, b), tc.fail}, int64(len(b)), false)
		if errors.Is(err, ErrNotELF) {
			t.Fatalf("positive control: the reader failed before PT_INTERP: %v", err)
		}
		if err == nil || errors.Is(err, artifact.ErrRefused) != tc.refused {
			t.Errorf("PT_INTERP unreadable by %s: %v, want an error, refused %t", tc.name, err, tc.refused)
		}
	}
}

// failAt reads b, failing with err on a read that touches offset off.
type failAt struct {
	b   []byte
	off int64
	err error
}

func (f failAt) ReadAt(p []byte, off int64) (int, error) {
	if off <= f.off && off+int64(len(p)) > f.off {
		return 0, f.err
	}
	if off >= int64(len(f.b)) {
		return 0, io.EOF
	}
	n := copy(p, f.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// interpOff is where the PT_INTERP of the ELF file b starts.
func interpOff(t *testing.T, b []byte) int64 {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return int64(p.Off)
		}
	}
	t.Fatal("positive control: no PT_INTERP")
	return 0
}

// editBytes replaces the one occurrence of old in the file p by new (the
// same length).
func editBytes(t *testing.T, p, old, new string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(b, []byte(old)) != 1 || len(old) != len(new) {
		t.Fatalf("positive control: %s holds %q %d times", p, old, bytes.Count(b, []byte(old)))
	}
	if err := os.WriteFile(p, bytes.Replace(b, []byte(old), []byte(new), 1), 0o755); err != nil {
		t.Fatal(err)
	}
}

// dynamicPastTheEnd moves the x86-64 or aarch64 (ELF64, little-endian)
// file p's SHT_DYNAMIC section past the file's end: the file still opens
// as ELF, its DT_NEEDED cannot be read.
func dynamicPastTheEnd(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	shoff, shentsize, shnum := le.Uint64(b[0x28:]), uint64(le.Uint16(b[0x3a:])), uint64(le.Uint16(b[0x3c:]))
	moved := false
	for i := range shnum {
		h := b[shoff+i*shentsize:]
		if elf.SectionType(le.Uint32(h[4:])) == elf.SHT_DYNAMIC {
			le.PutUint64(h[0x18:], uint64(len(b))+4096) // sh_offset
			moved = true
		}
	}
	if !moved {
		t.Fatal("positive control: no SHT_DYNAMIC section")
	}
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(p)
	if err != nil {
		t.Fatalf("positive control: the edited file no longer opens as ELF: %v", err)
	}
	defer f.Close()
	if _, err := f.ImportedLibraries(); err == nil {
		t.Fatal("positive control: DT_NEEDED still reads")
	}
}
