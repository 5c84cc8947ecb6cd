package glibc

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"

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

// ErrNotELF means a file is not an ELF file debug/elf reads (a script, a
// data file): callers pass it over, as the kernel would not run it as one.
var ErrNotELF = errors.New("not an ELF file")

// parseHook, when set, runs inside ReadELF's recovered scope after the
// header is parsed: the tests' way to make the parser panic.
var parseHook func()

// ReadELF reads r as an ELF file, and its DT_NEEDED when needed is set.
// It is the one place sandproof parses an ELF file (every file of a
// runtime is the harness's: the glibc layer's scan, its edit, the npm
// preparer's platform check all come here). debug/elf was not written
// for hostile input, and a parser panic on a crafted file must not end
// certify: it is recovered into a refusal (artifact.ErrRefused), as any
// other harness artifact the host's readers will not take. A file the
// parser rejects is ErrNotELF.
func ReadELF(r io.ReaderAt, needed bool) (e ELF, err error) {
	defer func() {
		if p := recover(); p != nil {
			e, err = ELF{}, fmt.Errorf("%w: the ELF parser failed on it (%v)", artifact.ErrRefused, p)
		}
	}()
	f, err := elf.NewFile(r)
	if err != nil {
		return ELF{}, fmt.Errorf("%w: %v", ErrNotELF, err)
	}
	if parseHook != nil {
		parseHook()
	}
	e = ELF{Machine: f.Machine, Type: f.Type}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			e.InterpOff, e.InterpSize = int64(prog.Off), int64(prog.Filesz)
			break
		}
	}
	if e.Interp, err = interpOf(f); err != nil {
		return ELF{}, err
	}
	if needed {
		if e.Needed, err = f.ImportedLibraries(); err != nil {
			return ELF{}, fmt.Errorf("read DT_NEEDED: %w", err)
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
	return ReadELF(f, needed)
}
