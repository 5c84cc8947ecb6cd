// Package glibc makes a glibc layer for a runtime prepared on the host: the
// host's glibc loader, libc and every library the runtime's ELF files need
// (their DT_NEEDED, resolved from the host's library dirs), copied into one
// flat directory of the runtime tree, so a glibc build runs in an image
// without glibc (musl + BusyBox) with nothing installed into the image.
//
// The runtime's own copies of its glibc executables get the layer's loader
// as their ELF interpreter: PT_INTERP is rewritten in place, padded with
// NULs, no byte moved. Launching them as an argument of the loader instead
// (`ld.so ./opencode`) would make /proc/self/exe the loader, and a
// Bun-compiled binary finds its payload through /proc/self/exe. The
// libraries are found through LD_LIBRARY_PATH=LibDir in the harness's
// environment: musl programs the harness runs look for musl's libc, which
// the layer does not hold (one linking libstdc++.so.6 would find the
// layer's glibc build first: docs/adapters.md says so).
package glibc

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// LoaderName is the loader's file name inside the layer.
const LoaderName = "ld.so"

// ErrTooLong means the layer's loader path does not fit in an ELF file's
// PT_INTERP (the edit never moves bytes).
var ErrTooLong = errors.New("interpreter path does not fit")

// Interp returns the ELF file's interpreter ("" when it has none: static,
// or a shared object).
func Interp(p string) (string, error) {
	f, err := elf.Open(p)
	if err != nil {
		return "", fmt.Errorf("read ELF %s: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			b, err := io.ReadAll(prog.Open())
			if err != nil {
				return "", fmt.Errorf("read PT_INTERP of %s: %w", p, err)
			}
			return string(bytes.TrimRight(b, "\x00")), nil
		}
	}
	return "", nil
}

// SetInterp rewrites the PT_INTERP string of the ELF file p in place to
// interp, NUL-padded to the segment's size, and returns the old one. The
// file keeps its size and every other byte: data appended after the ELF
// image (a Bun binary's payload) survives. An interp that does not fit is
// ErrTooLong; a file without PT_INTERP is an error.
func SetInterp(p, interp string) (string, error) {
	f, err := elf.Open(p)
	if err != nil {
		return "", fmt.Errorf("set interpreter of %s: %w", p, err)
	}
	var seg *elf.Prog
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			seg = prog
			break
		}
	}
	if seg == nil {
		f.Close()
		return "", fmt.Errorf("set interpreter of %s: no PT_INTERP (a static binary or a library)", p)
	}
	old, err := io.ReadAll(seg.Open())
	f.Close()
	if err != nil {
		return "", fmt.Errorf("set interpreter of %s: %w", p, err)
	}
	if strings.IndexByte(interp, 0) >= 0 || !path.IsAbs(interp) {
		return "", fmt.Errorf("set interpreter of %s: %q is not an absolute path", p, interp)
	}
	if uint64(len(interp))+1 > seg.Filesz {
		return "", fmt.Errorf("%w: %q is %d bytes, the PT_INTERP of %s holds %d with its NUL", ErrTooLong, interp, len(interp), p, seg.Filesz)
	}
	buf := make([]byte, seg.Filesz)
	copy(buf, interp)
	w, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return "", fmt.Errorf("set interpreter of %s: %w", p, err)
	}
	if _, err := w.WriteAt(buf, int64(seg.Off)); err != nil {
		w.Close()
		return "", fmt.Errorf("set interpreter of %s: %w", p, err)
	}
	if err := w.Close(); err != nil {
		return "", fmt.Errorf("set interpreter of %s: %w", p, err)
	}
	return string(bytes.TrimRight(old, "\x00")), nil
}

// HostLibDirs are where a Debian host keeps the libraries of arch (GOARCH
// spelling), searched in order.
func HostLibDirs(arch string) []string {
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[arch]
	var dirs []string
	if triplet != "" {
		dirs = append(dirs, "/lib/"+triplet, "/usr/lib/"+triplet)
	}
	return append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
}

// Options say where the layer goes and where it will be in the sandbox.
type Options struct {
	// Root is the runtime tree on the host; Dir the layer's directory,
	// relative to Root (slash-separated).
	Root, Dir string
	// SandboxDir is where the layer's directory is seen by the processes
	// in the sandbox: the patched executables' interpreter is
	// SandboxDir/ld.so, and LD_LIBRARY_PATH is SandboxDir.
	SandboxDir string
	// LibDirs are the host dirs DT_NEEDED names are looked up in.
	LibDirs []string
}

// File is a file of the layer: its path in the runtime tree, the host file
// it was copied from, and its sha256.
type File struct {
	Path   string `json:"path"`
	Source string `json:"source"`
	SHA256 string `json:"sha256"`
}

// Patched is an executable of the runtime tree whose interpreter was
// rewritten.
type Patched struct {
	Path      string `json:"path"`
	OldInterp string `json:"old_interp"`
	SHA256    string `json:"sha256"` // after the edit
}

// Layer is what Build made.
type Layer struct {
	// Loader is the patched executables' interpreter in the sandbox;
	// LibDir the LD_LIBRARY_PATH they need there.
	Loader  string    `json:"loader"`
	LibDir  string    `json:"lib_dir"`
	Files   []File    `json:"files"`
	Patched []Patched `json:"patched"`
}

// Has reports whether the layer holds a library of that name.
func (l *Layer) Has(name string) bool {
	return slices.ContainsFunc(l.Files, func(f File) bool { return path.Base(f.Path) == name })
}

// Build makes the layer under Root/Dir: the loader of the tree's glibc
// executables (every ELF file with a glibc interpreter), and the closure
// of the DT_NEEDED of those executables and of the tree's shared objects
// (Node addons) whose needs the host can meet; a shared object needing
// what the host lacks (a musl build beside a glibc one) is left alone, as
// the glibc runtime never loads it. Then it rewrites the executables'
// interpreter. A tree without a glibc executable is an error.
func Build(o Options) (*Layer, error) {
	tree, err := scanTree(o.Root)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(o.Root, filepath.FromSlash(o.Dir))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("build glibc layer: %w", err)
	}
	libs, err := tree.closure(o.LibDirs)
	if err != nil {
		return nil, err
	}
	l := &Layer{Loader: path.Join(o.SandboxDir, LoaderName), LibDir: o.SandboxDir}
	if err := l.copyLibs(o, dir, tree.interp, libs); err != nil {
		return nil, err
	}
	if err := l.patch(o.Root, tree.exes); err != nil {
		return nil, err
	}
	return l, nil
}

// elfTree is what a tree's ELF files say: its glibc executables (a glibc
// interpreter), the one interpreter they share, its shared objects
// (no interpreter) and each file's machine.
type elfTree struct {
	exes, libs []string
	interp     string
	machine    map[string]elf.Machine
}

// scanTree reads every regular file under root that is an ELF file. Two
// glibc executables wanting different loaders, or none at all, is an
// error.
func scanTree(root string) (elfTree, error) {
	t := elfTree{machine: map[string]elf.Machine{}}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := elf.Open(p)
		if err != nil {
			return nil // not an ELF file
		}
		defer f.Close()
		t.machine[p] = f.Machine
		interp := ""
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				b, _ := io.ReadAll(prog.Open())
				interp = string(bytes.TrimRight(b, "\x00"))
			}
		}
		switch {
		case interp != "" && !strings.Contains(interp, "musl"):
			if t.interp != "" && interp != t.interp {
				return fmt.Errorf("build glibc layer: %s wants loader %s, another file %s", p, interp, t.interp)
			}
			t.interp = interp
			t.exes = append(t.exes, p)
		case interp == "" && f.Type == elf.ET_DYN:
			t.libs = append(t.libs, p)
		}
		return nil
	})
	if err != nil {
		return t, err
	}
	if len(t.exes) == 0 {
		return t, fmt.Errorf("build glibc layer: no glibc executable in %s", root)
	}
	return t, nil
}

// closure resolves, in libDirs, the DT_NEEDED closure of the executables
// (each must resolve) and of each shared object of their machine whose
// closure resolves whole: a soname to its host file, the loader's own
// included.
func (t elfTree) closure(libDirs []string) (map[string]string, error) {
	// The loader is its own soname's library (libc.so.6 needs
	// ld-linux-x86-64.so.2): rtld knows itself by it and never loads it twice.
	r := &resolver{dirs: libDirs, seen: map[string]string{path.Base(t.interp): t.interp}}
	for _, e := range t.exes {
		if err := r.closure(e); err != nil {
			return nil, fmt.Errorf("build glibc layer: %w", err)
		}
	}
	for _, s := range t.libs {
		if t.machine[s] != t.machine[t.exes[0]] {
			continue // another arch's addon, never loaded here
		}
		sub := &resolver{dirs: r.dirs, seen: maps.Clone(r.seen)}
		if sub.closure(s) == nil {
			r.seen = sub.seen
		}
	}
	return r.seen, nil
}

// copyLibs copies the loader (as LoaderName) and every other library of
// libs into dir, in name order, recording each with its source and
// sha256.
func (l *Layer) copyLibs(o Options, dir, interp string, libs map[string]string) error {
	add := func(name, src string) error {
		real, err := filepath.EvalSymlinks(src)
		if err != nil {
			return fmt.Errorf("build glibc layer: %w", err)
		}
		sum, err := copyFile(real, filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("build glibc layer: copy %s: %w", real, err)
		}
		l.Files = append(l.Files, File{Path: path.Join(o.Dir, name), Source: src, SHA256: sum})
		return nil
	}
	if err := add(LoaderName, interp); err != nil {
		return err
	}
	names := make([]string, 0, len(libs))
	for n := range libs {
		if n != path.Base(interp) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if err := add(n, libs[n]); err != nil {
			return err
		}
	}
	return nil
}

// patch rewrites each executable's interpreter to the layer's loader,
// recording its path under root, the interpreter it had and its new
// sha256.
func (l *Layer) patch(root string, exes []string) error {
	for _, e := range exes {
		old, err := SetInterp(e, l.Loader)
		if err != nil {
			return fmt.Errorf("build glibc layer: %w", err)
		}
		sum, err := hashFile(e)
		if err != nil {
			return fmt.Errorf("build glibc layer: %w", err)
		}
		rel, _ := filepath.Rel(root, e)
		l.Patched = append(l.Patched, Patched{Path: filepath.ToSlash(rel), OldInterp: old, SHA256: sum})
	}
	return nil
}

// resolver walks DT_NEEDED: seen maps each soname to the host file.
type resolver struct {
	dirs []string
	seen map[string]string
}

func (r *resolver) closure(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return fmt.Errorf("read ELF %s: %w", p, err)
	}
	needed, err := f.ImportedLibraries()
	f.Close()
	if err != nil {
		return fmt.Errorf("read DT_NEEDED of %s: %w", p, err)
	}
	for _, n := range needed {
		if _, ok := r.seen[n]; ok {
			continue
		}
		// A soname is a file name. The runtime's ELF files are the
		// harness's, so a name with a slash ("../../etc/x") would have the
		// host copy a file from outside its library dirs into the layer,
		// and write it outside the layer's dir.
		if n == "" || n == "." || n == ".." || strings.ContainsRune(n, '/') {
			return fmt.Errorf("%s needs %q, which is not a library file name", p, n)
		}
		src := ""
		for _, d := range r.dirs {
			if fi, err := os.Stat(filepath.Join(d, n)); err == nil && fi.Mode().IsRegular() {
				src = filepath.Join(d, n)
				break
			}
		}
		if src == "" {
			return fmt.Errorf("%s needs %s, which is in none of %s on this host", p, n, strings.Join(r.dirs, ", "))
		}
		r.seen[n] = src
		if err := r.closure(src); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(out, h), in); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
