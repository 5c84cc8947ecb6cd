package glibc

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/sandproof/sandproof/runner/host/artifact"
)

// ELF is what sandproof reads of an ELF file: its machine and type (what
// it runs on, executable or shared object), its interpreter and where
// that sits in the file (for the edit in place), and what it needs.
type ELF struct {
	Machine elf.Machine
	Type    elf.Type
	// Interp is the PT_INTERP string as the kernel takes it ("" for none:
	// static, or a shared object); InterpOff and InterpSize place its
	// segment in the file (InterpSize 0 when there is none).
	Interp     string
	InterpOff  int64
	InterpSize int64
	// Needed are the DT_NEEDED names, read only when asked for.
	Needed []string
}

// ErrNotELF means a file is not an ELF file (a script, a data file): its
// identification is not an ELF file's, or it is shorter than its header.
// Callers pass it over, as the kernel would not run it as one.
var ErrNotELF = errors.New("not an ELF file")

// The reader's bounds. A file past one is refused (artifact.ErrRefused)
// before a byte it names is read, so what one read costs is set here,
// never by the file: a few headers, one table of each kind, the
// interpreter and the DT_NEEDED names.
const (
	// MaxProgHeaderBytes caps the program header table: the kernel loads
	// no executable with a larger one (fs/binfmt_elf.c, load_elf_phdrs),
	// 1,170 entries of 56 bytes. Real files have about 15.
	MaxProgHeaderBytes = 64 << 10
	// MaxSections caps the section header table (256 KiB of 64-byte
	// entries). The largest linked file of a Debian host has 74.
	MaxSections = 4096
	// MaxDynamicBytes caps the dynamic section: 4,096 entries of 16
	// bytes. The largest of a Debian host is 816 bytes.
	MaxDynamicBytes = 64 << 10
	// MaxNeededName is the longest DT_NEEDED name read (NAME_MAX): a
	// longer one names no file in a library dir.
	MaxNeededName = 255
	// MaxNeeded caps the DT_NEEDED entries of a file, each a read of its
	// own: the layer holds no more libraries (MaxLayerFiles). The most a
	// file of a Debian host has is 21.
	MaxNeeded = MaxLayerFiles
)

// parseHook, when set, runs inside ReadELF's recovered scope after the
// header is parsed: the tests' way to make the parser panic.
var parseHook func()

// ReadELF reads r, size bytes long, as an ELF file, and its DT_NEEDED
// when needed is set. It is the one place sandproof parses an ELF file:
// every file of a runtime is the harness's (the glibc layer's scan, its
// edit, the npm preparer's platform check all come here), so every read
// is bounded before it is made, and a file past a bound is refused
// (artifact.ErrRefused) rather than read.
//
// It is a small parser of its own rather than debug/elf: elf.NewFile
// loads the whole section-name table and File.DynString the whole
// dynamic section and string table, inflating any of them marked
// SHF_COMPRESSED (or named .zdebug*), so a 1 MB file declaring a 1 GiB
// zlib section had certify inflate 1 GiB (3.5 GiB of peak RSS). A check
// in front of debug/elf would have had to agree with it on which section
// it inflates (the name table's index, the first dynamic section, its
// link): two parsers whose disagreement is the bomb again. This one has
// no decompressor, reads no section name, and takes only the fields
// sandproof uses. A panic in it (a bug on a crafted file) is recovered
// into a refusal all the same: it must not end certify.
func ReadELF(r io.ReaderAt, size int64, needed bool) (e ELF, err error) {
	defer func() {
		if p := recover(); p != nil {
			e, err = ELF{}, fmt.Errorf("%w: the ELF parser failed on it (%v)", artifact.ErrRefused, p)
		}
	}()
	x, h, err := readHeader(r, size)
	if err != nil {
		return ELF{}, err
	}
	if parseHook != nil {
		parseHook()
	}
	e = ELF{Machine: elf.Machine(h.Machine), Type: elf.Type(h.Type)}
	if e.Type != elf.ET_EXEC && e.Type != elf.ET_DYN {
		// An object file or a core: neither the kernel nor the loader
		// loads anything else of it, and nothing else is read.
		return e, nil
	}
	if e.Interp, e.InterpOff, e.InterpSize, err = x.interp(h); err != nil {
		return ELF{}, err
	}
	secs, err := x.sections(h)
	if err != nil {
		return ELF{}, err
	}
	if needed {
		if e.Needed, err = x.needed(secs); err != nil {
			return ELF{}, err
		}
	}
	return e, nil
}

// ReadELFFile is ReadELF of the file at p.
func ReadELFFile(p string, needed bool) (ELF, error) {
	f, err := os.Open(p)
	if err != nil {
		return ELF{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ELF{}, err
	}
	return ReadELF(f, fi.Size(), needed)
}

// elfReader reads one ELF file of either class and byte order.
type elfReader struct {
	r    io.ReaderAt
	size int64
	bo   binary.ByteOrder
	is64 bool
}

// refused is a refusal of the file for reason.
func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", artifact.ErrRefused, fmt.Sprintf(format, args...))
}

// inside refuses n bytes at off that are not all inside the file.
func (x elfReader) inside(off, n uint64, what string) error {
	if n > uint64(x.size) || off > uint64(x.size)-n {
		return refused("%s (%d bytes at offset %d) is not inside the file (%d bytes)", what, n, off, x.size)
	}
	return nil
}

// at reads n bytes at off, which must be inside the file; callers cap n
// first, so the file never sets what is allocated.
func (x elfReader) at(off, n uint64, what string) ([]byte, error) {
	if err := x.inside(off, n, what); err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if k, err := x.r.ReadAt(b, int64(off)); k < len(b) {
		return nil, artifact.Refusal(fmt.Errorf("read %s: %w", what, err))
	}
	return b, nil
}

// decode decodes b, whole, into v (a slice of fixed-size structs).
func (x elfReader) decode(b []byte, v any) {
	if err := binary.Read(bytes.NewReader(b), x.bo, v); err != nil {
		panic(err) // the callers size b for v: a bug, recovered by ReadELF
	}
}

// pick is a32 or a64 by the file's class.
func pick[T any](x elfReader, a32, a64 T) T {
	if x.is64 {
		return a64
	}
	return a32
}

// readHeader reads the identification and the ELF header: what is not
// an ELF file's is ErrNotELF.
func readHeader(r io.ReaderAt, size int64) (elfReader, elf.Header64, error) {
	var ident [elf.EI_NIDENT]byte
	if size < int64(len(ident)) {
		return elfReader{}, elf.Header64{}, fmt.Errorf("%w: %d bytes", ErrNotELF, size)
	}
	if _, err := r.ReadAt(ident[:], 0); err != nil {
		return elfReader{}, elf.Header64{}, fmt.Errorf("read ELF identification: %w", err)
	}
	x := elfReader{r: r, size: size}
	switch {
	case string(ident[:4]) != elf.ELFMAG:
		return x, elf.Header64{}, fmt.Errorf("%w: bad magic %q", ErrNotELF, ident[:4])
	case elf.Class(ident[elf.EI_CLASS]) != elf.ELFCLASS32 && elf.Class(ident[elf.EI_CLASS]) != elf.ELFCLASS64:
		return x, elf.Header64{}, fmt.Errorf("%w: unknown class %d", ErrNotELF, ident[elf.EI_CLASS])
	case elf.Data(ident[elf.EI_DATA]) == elf.ELFDATA2LSB:
		x.bo = binary.LittleEndian
	case elf.Data(ident[elf.EI_DATA]) == elf.ELFDATA2MSB:
		x.bo = binary.BigEndian
	default:
		return x, elf.Header64{}, fmt.Errorf("%w: unknown data encoding %d", ErrNotELF, ident[elf.EI_DATA])
	}
	if elf.Version(ident[elf.EI_VERSION]) != elf.EV_CURRENT {
		return x, elf.Header64{}, fmt.Errorf("%w: unknown version %d", ErrNotELF, ident[elf.EI_VERSION])
	}
	x.is64 = elf.Class(ident[elf.EI_CLASS]) == elf.ELFCLASS64
	n := uint64(pick(x, binary.Size(elf.Header32{}), binary.Size(elf.Header64{})))
	if uint64(size) < n {
		return x, elf.Header64{}, fmt.Errorf("%w: %d bytes, shorter than its header", ErrNotELF, size)
	}
	b, err := x.at(0, n, "the ELF header")
	if err != nil {
		return x, elf.Header64{}, err
	}
	var h elf.Header64
	if x.is64 {
		x.decode(b, &h)
	} else {
		var h32 elf.Header32
		x.decode(b, &h32)
		h = elf.Header64{Type: h32.Type, Machine: h32.Machine, Version: h32.Version, Phoff: uint64(h32.Phoff), Shoff: uint64(h32.Shoff),
			Phentsize: h32.Phentsize, Phnum: h32.Phnum, Shentsize: h32.Shentsize, Shnum: h32.Shnum}
	}
	if elf.Version(h.Version) != elf.EV_CURRENT {
		return x, elf.Header64{}, fmt.Errorf("%w: header version %d", ErrNotELF, h.Version)
	}
	return x, h, nil
}

// interp returns the first PT_INTERP (as the kernel takes it: up to its
// first NUL), its offset and its size; "" and 0 when there is none. A
// segment over MaxInterp is refused unread.
func (x elfReader) interp(h elf.Header64) (string, int64, int64, error) {
	if h.Phnum == 0 {
		return "", 0, 0, nil
	}
	want := uint64(pick(x, binary.Size(elf.Prog32{}), binary.Size(elf.Prog64{})))
	if uint64(h.Phentsize) != want {
		return "", 0, 0, refused("program headers of %d bytes (an ELF%d file's are %d)", h.Phentsize, pick(x, 32, 64), want)
	}
	if n := uint64(h.Phnum) * want; n > MaxProgHeaderBytes {
		return "", 0, 0, refused("%d program headers, %d bytes (at most %d, as the kernel)", h.Phnum, n, MaxProgHeaderBytes)
	}
	b, err := x.at(h.Phoff, uint64(h.Phnum)*want, "the program header table")
	if err != nil {
		return "", 0, 0, err
	}
	progs := make([]elf.Prog64, h.Phnum)
	if x.is64 {
		x.decode(b, progs)
	} else {
		p32 := make([]elf.Prog32, h.Phnum)
		x.decode(b, p32)
		for i, p := range p32 {
			progs[i] = elf.Prog64{Type: p.Type, Off: uint64(p.Off), Filesz: uint64(p.Filesz)}
		}
	}
	i := slices.IndexFunc(progs, func(p elf.Prog64) bool { return elf.ProgType(p.Type) == elf.PT_INTERP })
	if i < 0 {
		return "", 0, 0, nil
	}
	p := progs[i]
	if p.Filesz > MaxInterp {
		return "", 0, 0, refused("PT_INTERP of %d bytes (at most %d)", p.Filesz, MaxInterp)
	}
	v, err := x.at(p.Off, p.Filesz, "PT_INTERP")
	if err != nil {
		return "", 0, 0, err
	}
	s, _, _ := bytes.Cut(v, []byte{0})
	return string(s), int64(p.Off), int64(p.Filesz), nil
}

// section is what ReadELF takes of a section header.
type section struct {
	typ   elf.SectionType
	flags elf.SectionFlag
	off   uint64
	size  uint64
	link  uint32
}

// sections reads the section header table: at most MaxSections entries
// of the class's size, inside the file. A compressed section that is not
// debug info is refused (compressedRule).
func (x elfReader) sections(h elf.Header64) ([]section, error) {
	want := uint64(pick(x, binary.Size(elf.Section32{}), binary.Size(elf.Section64{})))
	switch {
	case h.Shnum == 0 && h.Shoff == 0:
		return nil, nil
	case h.Shnum == 0:
		// ELF's extension for 65,280 sections or more: the count is in
		// section 0.
		return nil, refused("its section count is in section 0 (65,280 or more; at most %d)", MaxSections)
	case h.Shnum > MaxSections:
		return nil, refused("%d sections (at most %d)", h.Shnum, MaxSections)
	case uint64(h.Shentsize) != want:
		return nil, refused("section headers of %d bytes (an ELF%d file's are %d)", h.Shentsize, pick(x, 32, 64), want)
	case h.Shoff == 0:
		return nil, refused("%d section headers at offset 0, over its ELF header", h.Shnum)
	}
	b, err := x.at(h.Shoff, uint64(h.Shnum)*want, "the section header table")
	if err != nil {
		return nil, err
	}
	secs := make([]section, h.Shnum)
	if x.is64 {
		s64 := make([]elf.Section64, h.Shnum)
		x.decode(b, s64)
		for i, s := range s64 {
			secs[i] = section{elf.SectionType(s.Type), elf.SectionFlag(s.Flags), s.Off, s.Size, s.Link}
		}
	} else {
		s32 := make([]elf.Section32, h.Shnum)
		x.decode(b, s32)
		for i, s := range s32 {
			secs[i] = section{elf.SectionType(s.Type), elf.SectionFlag(s.Flags), uint64(s.Off), uint64(s.Size), s.Link}
		}
	}
	for i, s := range secs {
		if err := compressedRule(i, s); err != nil {
			return nil, err
		}
	}
	return secs, nil
}

// compressedRule refuses a compressed section (SHF_COMPRESSED) that is
// not debug info: allocated, or of another type than PROGBITS (a string
// table, the dynamic section, a symbol table). Toolchains compress only
// debug info (every Go binary's DWARF is compressed, and is left alone:
// nothing here reads it); a compressed string or dynamic table exists to
// make a reader that inflates it (debug/elf does) take gigabytes from a
// small file, so no reader is ever handed one.
func compressedRule(i int, s section) error {
	if s.flags&elf.SHF_COMPRESSED == 0 || s.typ == elf.SHT_PROGBITS && s.flags&elf.SHF_ALLOC == 0 {
		return nil
	}
	return refused("section %d is compressed (SHF_COMPRESSED) and is a %s, not debug info (%d bytes in the file; a reader that inflates it takes what its header declares)", i, s.typ, s.size)
}

// needed returns the DT_NEEDED names of the first dynamic section (as
// debug/elf did), up to its DT_NULL (as the loader reads it). The
// section and its string table are bounded and inside the file; each
// name is read alone, at most MaxNeededName bytes and its NUL, and at
// most MaxNeeded of them.
func (x elfReader) needed(secs []section) ([]string, error) {
	i := slices.IndexFunc(secs, func(s section) bool { return s.typ == elf.SHT_DYNAMIC })
	if i < 0 {
		return nil, nil
	}
	dyn, ent := secs[i], uint64(pick(x, binary.Size(elf.Dyn32{}), binary.Size(elf.Dyn64{})))
	switch {
	case dyn.size > MaxDynamicBytes:
		return nil, refused("a dynamic section of %d bytes (at most %d)", dyn.size, MaxDynamicBytes)
	case dyn.size%ent != 0:
		return nil, refused("a dynamic section of %d bytes, not a multiple of its %d-byte entries", dyn.size, ent)
	case dyn.link == 0 || int(dyn.link) >= len(secs):
		return nil, refused("the dynamic section's string table is section %d, which is none", dyn.link)
	case secs[dyn.link].typ != elf.SHT_STRTAB:
		return nil, refused("the dynamic section's string table (section %d) is a %s", dyn.link, secs[dyn.link].typ)
	}
	str := secs[dyn.link]
	if err := x.inside(str.off, str.size, "the dynamic string table"); err != nil {
		return nil, err
	}
	b, err := x.at(dyn.off, dyn.size, "the dynamic section")
	if err != nil {
		return nil, err
	}
	dyns := make([]elf.Dyn64, dyn.size/ent)
	if x.is64 {
		x.decode(b, dyns)
	} else {
		d32 := make([]elf.Dyn32, len(dyns))
		x.decode(b, d32)
		for i, d := range d32 {
			dyns[i] = elf.Dyn64{Tag: int64(d.Tag), Val: uint64(d.Val)}
		}
	}
	var out []string
	for _, d := range dyns {
		if elf.DynTag(d.Tag) == elf.DT_NULL {
			break
		}
		if elf.DynTag(d.Tag) != elf.DT_NEEDED {
			continue
		}
		if len(out) == MaxNeeded {
			return nil, refused("more than %d DT_NEEDED entries", MaxNeeded)
		}
		n, err := x.name(str, d.Val)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// name reads the string at off in the string table t (inside the file):
// at most MaxNeededName bytes before its NUL.
func (x elfReader) name(t section, off uint64) (string, error) {
	if off >= t.size {
		return "", refused("a DT_NEEDED name at %d, past its string table (%d bytes)", off, t.size)
	}
	b, err := x.at(t.off+off, min(t.size-off, MaxNeededName+1), "a DT_NEEDED name")
	if err != nil {
		return "", err
	}
	s, _, ok := bytes.Cut(b, []byte{0})
	if !ok {
		return "", refused("a DT_NEEDED name at %d over %d bytes, or not ended in its string table: %q...", off, MaxNeededName, b[:min(len(b), 64)])
	}
	return string(s), nil
}
