package glibc

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
)

// LoaderName is the loader's file name inside the layer.
const LoaderName = "ld.so"

// MaxInterp is the longest PT_INTERP read, PATH_MAX with its NUL: the
// kernel opens no longer path, and a segment claiming more is refused
// before it is read.
const MaxInterp = 4096

// ErrTooLong means the layer's loader path does not fit in an ELF file's
// PT_INTERP (the edit never moves bytes).
var ErrTooLong = errors.New("interpreter path does not fit")

// loaders are the glibc loaders sandproof knows, by the machine they run
// on: the soname the host's library dirs hold each under. The layer's
// loader is always the host's file of that soname, found in the library
// dirs; a runtime's PT_INTERP is only compared with these (isGlibcLoader).
var loaders = map[elf.Machine]string{
	elf.EM_X86_64:  "ld-linux-x86-64.so.2",
	elf.EM_AARCH64: "ld-linux-aarch64.so.1",
}

// triplets are the Debian multiarch names of the machines in loaders.
var triplets = map[elf.Machine]string{elf.EM_X86_64: "x86_64-linux-gnu", elf.EM_AARCH64: "aarch64-linux-gnu"}

// interpDirs are where a glibc build's PT_INTERP may name its loader: the
// psABIs' /lib64 (x86-64) and /lib (aarch64), the /usr spellings of a
// merged /usr, and the multiarch dirs.
func interpDirs(m elf.Machine) []string {
	t := triplets[m]
	return []string{"/lib64", "/usr/lib64", "/lib", "/usr/lib", "/lib/" + t, "/usr/lib/" + t}
}

// isGlibcLoader reports whether interp names the glibc loader of machine
// m in a standard place (a clean absolute path).
func isGlibcLoader(interp string, m elf.Machine) bool {
	so, ok := loaders[m]
	if !ok || path.Clean(interp) != interp || path.Base(interp) != so {
		return false
	}
	return slices.Contains(interpDirs(m), path.Dir(interp))
}

// isMuslLoader reports whether interp names a musl loader
// (/lib/ld-musl-x86_64.so.1): a musl build, which the layer leaves alone.
func isMuslLoader(interp string) bool {
	b := path.Base(interp)
	return strings.HasPrefix(b, "ld-musl-") && strings.HasSuffix(b, ".so.1")
}

// quoteInterp quotes a PT_INTERP for an error, clipped: it is the
// harness's text.
func quoteInterp(s string) string {
	if len(s) > 200 {
		return fmt.Sprintf("%q...", s[:200])
	}
	return fmt.Sprintf("%q", s)
}

// Interp returns the interpreter of the ELF file at p (ReadELF).
func Interp(p string) (string, error) {
	e, err := ReadELFFile(p, false)
	if err != nil {
		return "", fmt.Errorf("read ELF %s: %w", p, err)
	}
	return e.Interp, nil
}

// SetInterp rewrites the PT_INTERP string of the ELF file p in place to
// interp, NUL-padded to the segment's size, and returns the old one. The
// file keeps its size and every other byte: data appended after the ELF
// image (a Bun binary's payload) survives. An interp that does not fit is
// ErrTooLong; a file without PT_INTERP is an error.
func SetInterp(p, interp string) (string, error) {
	e, err := ReadELFFile(p, false)
	if err != nil {
		return "", fmt.Errorf("set interpreter of %s: %w", p, err)
	}
	if e.InterpSize == 0 {
		return "", fmt.Errorf("set interpreter of %s: no PT_INTERP (a static binary or a library)", p)
	}
	if strings.IndexByte(interp, 0) >= 0 || !path.IsAbs(interp) {
		return "", fmt.Errorf("set interpreter of %s: %q is not an absolute path", p, interp)
	}
	if int64(len(interp))+1 > e.InterpSize {
		return "", fmt.Errorf("%w: %q is %d bytes, the PT_INTERP of %s holds %d with its NUL", ErrTooLong, interp, len(interp), p, e.InterpSize)
	}
	buf := make([]byte, e.InterpSize)
	copy(buf, interp)
	w, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return "", fmt.Errorf("set interpreter of %s: %w", p, err)
	}
	if _, err := w.WriteAt(buf, e.InterpOff); err != nil {
		w.Close()
		return "", fmt.Errorf("set interpreter of %s: %w", p, err)
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("set interpreter of %s: %w", p, err)
	}
	return e.Interp, nil
}
