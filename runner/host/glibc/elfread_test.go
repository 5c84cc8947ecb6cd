package glibc

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/hostile"
	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/artifact"
)

// allocated returns the bytes the heap allocated while fn ran: every
// allocation, freed or not (MemStats.TotalAlloc), so it bounds what fn
// can have added to the process's peak RSS through the heap.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// peakRSS is the process's VmHWM in bytes (0 when unknown), for the log.
func peakRSS() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			var kb int64
			for _, c := range f[1] {
				kb = kb*10 + int64(c-'0')
			}
			return kb << 10
		}
	}
	return 0
}

// A harness file whose section-name table (or dynamic section) is a zlib
// bomb is refused by the reader with what it allocated set by the
// reader's bounds, not by what the section declares; plain debug/elf on
// the same file (the positive control) inflates all of it. On main
// ReadELF was elf.NewFile: the red team's 1,043,904-byte file declaring
// 1 GiB had prepare take 3,578 MiB of peak RSS and return no error.
func TestReadELFRefusesACompressionBomb(t *testing.T) {
	const inflates = 64 << 20
	for _, dynamic := range []bool{false, true} {
		name := map[bool]string{false: "section-name table", true: "dynamic section"}[dynamic]
		t.Run(name, func(t *testing.T) {
			bomb := hostile.ELFBomb(inflates, dynamic)
			rss := peakRSS()
			var err error
			got := allocated(func() { _, err = ReadELF(bytes.NewReader(bomb), int64(len(bomb)), true) })
			t.Logf("%d-byte file inflating to %d: ReadELF allocated %d bytes (peak RSS %d -> %d): %v", len(bomb), inflates, got, rss, peakRSS(), err)
			if !errors.Is(err, artifact.ErrRefused) || !strings.Contains(err.Error(), "compressed (SHF_COMPRESSED)") {
				t.Errorf("ReadELF: %v, want refused naming the compressed section", err)
			}
			if got > 1<<20 {
				t.Errorf("ReadELF allocated %d bytes for a %d-byte file, want under 1 MiB whatever the section declares", got, len(bomb))
			}
			// Positive control: debug/elf inflates it.
			control := allocated(func() {
				f, err := elf.NewFile(bytes.NewReader(bomb))
				if err == nil && dynamic {
					_, err = f.ImportedLibraries()
				}
				if err != nil {
					t.Errorf("positive control: debug/elf: %v", err)
				}
			})
			if control < inflates {
				t.Fatalf("positive control: debug/elf allocated %d bytes, under the %d the section inflates to: not a bomb", control, inflates)
			}
		})
	}
}

// The bomb in a runtime stops the layer's build, naming the file: a
// refusal (exit 2), no layer.
func TestBuildRefusesAnELFBomb(t *testing.T) {
	root := shortDir(t)
	hostBinary(t, "true", filepath.Join(root, "bin", "tool"))
	if err := os.MkdirAll(filepath.Join(root, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "lib", "addon.node"), hostile.ELFBomb(64<<20, false), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	got := allocated(func() {
		_, err = Build(Options{Root: root, Dir: "g", SandboxDir: root + "/g", LibDirs: HostLibDirs(runtime.GOARCH)})
	})
	if !errors.Is(err, artifact.ErrRefused) || !strings.Contains(err.Error(), "lib/addon.node") || !strings.Contains(err.Error(), "compressed") {
		t.Errorf("Build: %v, want refused naming lib/addon.node and its compressed section", err)
	}
	if got > 16<<20 {
		t.Errorf("Build allocated %d bytes", got)
	}
	if layerMade(root) {
		t.Error("a refused layer left its dir")
	}
}

// goBinary builds a small Go program into the test's dir: a file with
// Go's compressed DWARF (the linker compresses it unless -w).
func goBinary(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "the go command (the test builds a Go binary)", "install Go 1.26")
	}
	dir := t.TempDir()
	for name, body := range map[string]string{"go.mod": "module x\n\ngo 1.22\n", "main.go": "package main\n\nfunc main() { println(\"hi\") }\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(dir, "x")
	cmd := exec.Command(gobin, "build", "-o", exe, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return exe
}

// Compression is for debug info, and a compressed debug section is left
// alone (nothing reads it): every Go binary built without -w has one,
// its DWARF.
func TestReadELFLeavesCompressedDebugInfo(t *testing.T) {
	exe := goBinary(t)
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Positive control: the file has a compressed debug section.
	if !slices.ContainsFunc(f.Sections, func(s *elf.Section) bool {
		return s.Flags&elf.SHF_COMPRESSED != 0 && s.Type == elf.SHT_PROGBITS && strings.HasPrefix(s.Name, ".debug_")
	}) {
		t.Fatalf("positive control: %s has no compressed .debug_ section", exe)
	}
	e, err := ReadELFFile(exe, true)
	if err != nil || e.Machine != f.Machine || e.Type != f.Type {
		t.Fatalf("ReadELFFile(%s): %+v, %v; want it read (%s %s)", exe, e, err, f.Machine, f.Type)
	}
	// A tiny file with one is read too.
	tf := newTinyELF("/lib64/ld-linux-x86-64.so.2", []string{"libc.so.6"}, 64)
	tf.secs = append(tf.secs, elf.Section64{Type: uint32(elf.SHT_PROGBITS), Flags: uint64(elf.SHF_COMPRESSED), Off: tf.pad, Size: 24})
	tf.h.Shnum++
	b := tf.bytes()
	if e, err := ReadELF(bytes.NewReader(b), int64(len(b)), true); err != nil || !slices.Equal(e.Needed, []string{"libc.so.6"}) {
		t.Errorf("a file with compressed debug info: %+v, %v", e, err)
	}
}

// ReadELF takes what debug/elf takes of a well-formed file (machine,
// type, interpreter, DT_NEEDED), of either class and byte order, and of
// the host's own executables and libraries.
func TestReadELFReadsWhatDebugELFReads(t *testing.T) {
	check := func(t *testing.T, what string, b []byte) {
		t.Helper()
		f, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: debug/elf: %v", what, err)
		}
		want := ELF{Machine: f.Machine, Type: f.Type}
		if want.Needed, err = f.ImportedLibraries(); err != nil {
			t.Fatalf("%s: debug/elf: %v", what, err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				v := make([]byte, p.Filesz)
				p.ReadAt(v, 0)
				s, _, _ := bytes.Cut(v, []byte{0})
				want.Interp, want.InterpOff, want.InterpSize = string(s), int64(p.Off), int64(p.Filesz)
				break
			}
		}
		got, err := ReadELF(bytes.NewReader(b), int64(len(b)), true)
		if err != nil || got.Machine != want.Machine || got.Type != want.Type || got.Interp != want.Interp ||
			got.InterpOff != want.InterpOff || got.InterpSize != want.InterpSize || !slices.Equal(got.Needed, want.Needed) {
			t.Errorf("%s: ReadELF %+v, %v; debug/elf %+v", what, got, err, want)
		}
	}
	needed := []string{"libc.so.6", "libm.so.6", "libstdc++.so.6"}
	for _, c := range []struct {
		class elf.Class
		bo    binary.ByteOrder
		m     elf.Machine
	}{
		{elf.ELFCLASS64, binary.LittleEndian, elf.EM_X86_64},
		{elf.ELFCLASS32, binary.LittleEndian, elf.EM_ARM},
		{elf.ELFCLASS64, binary.BigEndian, elf.EM_S390},
		{elf.ELFCLASS32, binary.BigEndian, elf.EM_PPC},
	} {
		tf := newTinyELFOf(c.class, c.bo, c.m, "/lib/ld-linux.so.3", needed, 0)
		check(t, c.m.String()+" "+c.class.String()+" "+c.bo.String(), tf.bytes())
	}
	n := 0
	for _, d := range append(HostLibDirs(runtime.GOARCH), "/usr/bin") {
		entries, _ := os.ReadDir(d)
		for _, de := range entries {
			if n >= 300 || !de.Type().IsRegular() {
				continue
			}
			b, err := os.ReadFile(filepath.Join(d, de.Name()))
			if err != nil || len(b) < 64 || string(b[:4]) != elf.ELFMAG {
				continue
			}
			if ty := elf.Type(binary.LittleEndian.Uint16(b[16:])); ty != elf.ET_EXEC && ty != elf.ET_DYN {
				continue
			}
			n++
			check(t, filepath.Join(d, de.Name()), b)
		}
	}
	if n < 10 {
		t.Fatalf("positive control: %d ELF files of the host compared", n)
	}
	t.Logf("%d host ELF files compared", n)
}

// Every bound of the reader: a file past one is refused, naming what
// (artifact.ErrRefused), before a byte it names is read; one at a bound
// is read. The tables a case points at its padding are there (zeros), so
// a case fails only on its bound, not on the file's end.
func TestReadELFBounds(t *testing.T) {
	const pad = 300 << 10
	for _, c := range []struct {
		name   string
		needed []string
		edit   func(*tinyELF)
		want   string // "" for read
		whole  bool   // read, and what it read is the file's interpreter and needs
	}{
		{name: "as laid out", edit: func(*tinyELF) {}, whole: true},
		{name: "program headers at the kernel's cap", edit: func(t *tinyELF) { t.h.Phnum, t.h.Phoff = MaxProgHeaderBytes/56, t.pad }},
		{name: "program headers over the kernel's cap", edit: func(t *tinyELF) { t.h.Phnum, t.h.Phoff = MaxProgHeaderBytes/56+1, t.pad },
			want: "1171 program headers, 65576 bytes (at most 65536"},
		{name: "program header size", edit: func(t *tinyELF) { t.h.Phentsize = 64 }, want: "program headers of 64 bytes"},
		{name: "program headers past the end", edit: func(t *tinyELF) { t.h.Phoff = t.size - 8 }, want: "the program header table (56 bytes at offset"},
		{name: "PT_INTERP past the end", edit: func(t *tinyELF) { t.progs[0].Off = 1 << 40 }, want: "PT_INTERP (28 bytes at offset 1099511627776) is not inside the file"},
		{name: "PT_INTERP over a path", edit: func(t *tinyELF) { t.progs[0].Filesz = MaxInterp + 1 }, want: "PT_INTERP of 4097 bytes"},
		{name: "sections at the cap", edit: func(t *tinyELF) { t.h.Shnum, t.h.Shoff = MaxSections, t.pad }},
		{name: "sections over the cap", edit: func(t *tinyELF) { t.h.Shnum, t.h.Shoff = MaxSections+1, t.pad }, want: "4097 sections (at most 4096)"},
		{name: "section count in section 0", edit: func(t *tinyELF) { t.h.Shnum = 0 }, want: "section count is in section 0"},
		{name: "section header size", edit: func(t *tinyELF) { t.h.Shentsize = 40 }, want: "section headers of 40 bytes"},
		{name: "section headers past the end", edit: func(t *tinyELF) { t.h.Shoff = t.size - 64 }, want: "the section header table (192 bytes"},
		{name: "section headers at offset 0", edit: func(t *tinyELF) { t.h.Shoff = 0 }, want: "at offset 0"},
		{name: "compressed string table", edit: func(t *tinyELF) { t.secs[2].Flags |= uint64(elf.SHF_COMPRESSED) }, want: "section 2 is compressed (SHF_COMPRESSED) and is a SHT_STRTAB"},
		{name: "compressed dynamic section", edit: func(t *tinyELF) { t.secs[1].Flags |= uint64(elf.SHF_COMPRESSED) }, want: "section 1 is compressed"},
		{name: "compressed allocated PROGBITS", edit: func(t *tinyELF) {
			t.secs = append(t.secs, elf.Section64{Type: uint32(elf.SHT_PROGBITS), Flags: uint64(elf.SHF_COMPRESSED | elf.SHF_ALLOC), Off: t.pad, Size: 24})
			t.h.Shnum++
		}, want: "section 3 is compressed"},
		{name: "dynamic section at the cap", edit: func(t *tinyELF) { t.secs[1].Off, t.secs[1].Size = t.pad, MaxDynamicBytes }},
		{name: "dynamic section over the cap", edit: func(t *tinyELF) { t.secs[1].Off, t.secs[1].Size = t.pad, MaxDynamicBytes+16 }, want: "a dynamic section of 65552 bytes (at most 65536)"},
		{name: "dynamic section past the end", edit: func(t *tinyELF) { t.secs[1].Off = 1 << 40 }, want: "the dynamic section (32 bytes at offset 1099511627776)"},
		{name: "dynamic section not whole entries", edit: func(t *tinyELF) { t.secs[1].Size = 17 }, want: "not a multiple of its 16-byte entries"},
		{name: "string table link to none", edit: func(t *tinyELF) { t.secs[1].Link = 9 }, want: "string table is section 9, which is none"},
		{name: "string table link to no string table", edit: func(t *tinyELF) { t.secs[1].Link = 1 }, want: "(section 1) is a SHT_DYNAMIC"},
		{name: "string table past the end", edit: func(t *tinyELF) { t.secs[2].Size = 1 << 40 }, want: "the dynamic string table"},
		{name: "a name past its string table", edit: func(t *tinyELF) { t.secs[2].Size = 1 }, want: "a DT_NEEDED name at 1, past its string table (1 bytes)"},
		{name: "a name of NAME_MAX", needed: []string{strings.Repeat("n", MaxNeededName)}, edit: func(*tinyELF) {}, whole: true},
		{name: "a name over NAME_MAX", needed: []string{strings.Repeat("n", MaxNeededName+1)}, edit: func(*tinyELF) {}, want: "a DT_NEEDED name at 1 over 255 bytes"},
		{name: "DT_NEEDED entries at the cap", needed: slices.Repeat([]string{"libc.so.6"}, MaxNeeded), edit: func(*tinyELF) {}, whole: true},
		{name: "DT_NEEDED entries over the cap", needed: slices.Repeat([]string{"libc.so.6"}, MaxNeeded+1), edit: func(*tinyELF) {}, want: "more than 256 DT_NEEDED entries"},
	} {
		t.Run(c.name, func(t *testing.T) {
			needed := c.needed
			if needed == nil {
				needed = []string{"libc.so.6"}
			}
			tf := newTinyELF("/lib64/ld-linux-x86-64.so.2", needed, pad)
			c.edit(tf)
			b := tf.bytes()
			e, err := ReadELF(bytes.NewReader(b), int64(len(b)), true)
			if c.want == "" {
				if err != nil || c.whole && (e.Interp != "/lib64/ld-linux-x86-64.so.2" || !slices.Equal(e.Needed, needed)) {
					t.Fatalf("ReadELF: %+v, %v; want it read", e, err)
				}
				return
			}
			if !errors.Is(err, artifact.ErrRefused) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ReadELF: %v; want refused naming %q", err, c.want)
			}
		})
	}
}

// A file shorter than its header, or whose identification is not an ELF
// file's, is not ELF: passed over, not refused.
func TestReadELFOfTruncatedFiles(t *testing.T) {
	b := newTinyELF("/lib64/ld-linux-x86-64.so.2", []string{"libc.so.6"}, 0).bytes()
	for _, n := range []int{0, 4, 16, 63} {
		if _, err := ReadELF(bytes.NewReader(b[:n]), int64(n), true); !errors.Is(err, ErrNotELF) || errors.Is(err, artifact.ErrRefused) {
			t.Errorf("the first %d bytes: %v, want ErrNotELF", n, err)
		}
	}
	other := bytes.Clone(b)
	other[elf.EI_CLASS] = 3
	if _, err := ReadELF(bytes.NewReader(other), int64(len(other)), true); !errors.Is(err, ErrNotELF) {
		t.Errorf("class 3: %v, want ErrNotELF", err)
	}
}
