package glibc

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandproof/sandproof/runner/host/artifact"
	"github.com/sandproof/sandproof/runner/host/hostfile"
)

// Caps on a layer. A real one holds the loader (0.2 MB), libc.so.6 (2 MB)
// and, for Node or Bun builds, libstdc++.so.6 (2.4 MB), libm and libgcc_s:
// about 5 MB in 7 files, for one or two executables. The largest library
// of a Debian host is LLVM's (libLLVM-15.so, 117 MB). The caps sit well
// above a closure that holds it, and bound what a runtime whose ELF files
// need every library of the host (670 MB here) may put on the disk that
// holds the runtime cache, and how many lines the layer adds to a record.
const (
	// MaxFileBytes caps one library.
	MaxFileBytes = 256 << 20
	// MaxLayerBytes caps the layer's files together.
	MaxLayerBytes = 512 << 20
	// MaxLayerFiles caps the libraries, the loader included.
	MaxLayerFiles = 256
	// MaxExecutables caps the glibc executables patched (each is a line of
	// the evidence's glibc_layer).
	MaxExecutables = 64
)

// layerLimits are the artifact.Tree limits of a layer's directory.
var layerLimits = artifact.Limits{FileBytes: MaxFileBytes, TotalBytes: MaxLayerBytes, Entries: MaxLayerFiles}

// Options say where the layer goes and where it will be in the sandbox.
type Options struct {
	// Root is the runtime tree on the host; Dir the layer's directory in
	// it, one name, which must not exist yet.
	Root, Dir string
	// SandboxDir is where the layer's directory is seen by the processes
	// in the sandbox: the patched executables' interpreter is
	// SandboxDir/ld.so, and LD_LIBRARY_PATH is SandboxDir.
	SandboxDir string
	// LibDirs are the host dirs the loader and the DT_NEEDED names are
	// looked up in; nothing outside their real paths is copied.
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

// Build makes the layer under Root/Dir: the host's glibc loader for the
// machine of the tree's glibc executables (every ELF file whose PT_INTERP
// names a glibc loader sandproof knows), and the closure of the DT_NEEDED
// of those executables and of the tree's shared objects (Node addons)
// whose needs the host can meet; a shared object needing what the host
// lacks (a musl build beside a glibc one) is left alone, as the glibc
// runtime never loads it. Then it rewrites the executables' interpreter.
// A tree without a glibc executable, or one whose ELF files break a rule
// of the layer or need what the host cannot give, is refused
// (artifact.ErrRefused) before anything is copied; so is an executable
// whose PT_INTERP cannot hold the layer's loader, found at the edit.
func Build(o Options) (*Layer, error) {
	if o.Dir == "" || o.Dir == "." || o.Dir == ".." || strings.ContainsAny(o.Dir, `/\`) {
		return nil, fmt.Errorf("build glibc layer: dir %q is not one name", o.Dir)
	}
	tree, err := scanTree(o.Root)
	if err != nil {
		return nil, err
	}
	r := newResolver(o.LibDirs, tree.machine)
	if err := tree.closure(r); err != nil {
		return nil, fmt.Errorf("build glibc layer: %w", err)
	}
	t, err := artifact.Create(filepath.Join(o.Root, o.Dir), layerLimits)
	if err != nil {
		return nil, fmt.Errorf("build glibc layer: %w", err)
	}
	defer t.Close()
	l := &Layer{Loader: path.Join(o.SandboxDir, LoaderName), LibDir: o.SandboxDir}
	if err := l.copyLibs(t, r, o.Dir, loaders[tree.machine]); err != nil {
		return nil, fmt.Errorf("build glibc layer: %w", err)
	}
	if err := l.patch(o.Root, tree.exes); err != nil {
		return nil, err
	}
	return l, nil
}

// elfTree is what a tree's ELF files say: its glibc executables (a glibc
// loader as interpreter), their one machine, its shared objects (no
// interpreter) and each file's machine.
type elfTree struct {
	exes, libs []string
	machine    elf.Machine
	machines   map[string]elf.Machine
}

// scanTree reads every regular file under root that is an ELF file. An
// interpreter that is neither a glibc loader sandproof knows for the
// file's machine nor a musl loader is refused, naming the file and the
// interpreter; so are glibc executables of two machines, or more than
// MaxExecutables. None at all is an error.
func scanTree(root string) (elfTree, error) {
	t := elfTree{machines: map[string]elf.Machine{}}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(root, p) // what errors name: the package's path
		f, err := ReadELFFile(p, false)
		if errors.Is(err, ErrNotELF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("build glibc layer: %s: %w", rel, err)
		}
		t.machines[p] = f.Machine
		interp := f.Interp
		switch {
		case interp == "" && f.Type == elf.ET_DYN:
			t.libs = append(t.libs, p)
		case interp == "" || isMuslLoader(interp):
		case !isGlibcLoader(interp, f.Machine):
			return fmt.Errorf("build glibc layer: %w: %s wants the loader %s, which is not the glibc loader of %s in a standard place (the layer's loader is the host's own)", artifact.ErrRefused, rel, quoteInterp(interp), f.Machine)
		case len(t.exes) > 0 && f.Machine != t.machine:
			return fmt.Errorf("build glibc layer: %w: %s is built for %s, another glibc executable for %s", artifact.ErrRefused, rel, f.Machine, t.machine)
		case len(t.exes) >= MaxExecutables:
			return fmt.Errorf("build glibc layer: %w: %s is one glibc executable more than the cap of %d", artifact.ErrRefused, rel, MaxExecutables)
		default:
			t.machine = f.Machine
			t.exes = append(t.exes, p)
		}
		return nil
	})
	if err != nil {
		return t, err
	}
	if len(t.exes) == 0 {
		return t, fmt.Errorf("build glibc layer: %w: no glibc executable in %s", artifact.ErrRefused, root)
	}
	return t, nil
}

// closure resolves in r the host's loader for the tree's machine, by its
// soname, then the DT_NEEDED closure of the executables (each must
// resolve) and of each shared object of their machine whose closure
// resolves whole.
func (t elfTree) closure(r *resolver) error {
	// The loader is its own soname's library (libc.so.6 needs
	// ld-linux-x86-64.so.2): rtld knows itself by it and never loads it
	// twice.
	if err := r.need("the "+t.machine.String()+" glibc loader", []string{loaders[t.machine]}); err != nil {
		return err
	}
	for _, e := range t.exes {
		// What an executable needs and the host cannot give (a library
		// it lacks), or cannot be read from the executable, is the
		// package's: refused, unless the host's system failed.
		if err := r.needFile(e); err != nil {
			return artifact.Refusal(err)
		}
	}
	for _, s := range t.libs {
		if t.machines[s] != t.machine {
			continue // another arch's addon, never loaded here
		}
		if err := r.try(s); err != nil {
			return err
		}
	}
	return nil
}

// copyLibs copies the loader (soname loader, as LoaderName) and every
// other library r resolved into t, in name order, recording each with
// its source and sha256. Each is opened again as r.open checks it.
func (l *Layer) copyLibs(t *artifact.Tree, r *resolver, dir, loader string) error {
	add := func(name string, lb lib) error {
		f, fi, err := r.open(lb.src)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if err := t.WriteFile(name, true, fi.Size(), io.TeeReader(f, h)); err != nil {
			return fmt.Errorf("copy %s: %w", lb.src, err)
		}
		l.Files = append(l.Files, File{Path: path.Join(dir, name), Source: lb.src, SHA256: hex.EncodeToString(h.Sum(nil))})
		return nil
	}
	if err := add(LoaderName, r.seen[loader]); err != nil {
		return err
	}
	names := make([]string, 0, len(r.seen))
	for n := range r.seen {
		if n != loader {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if err := add(n, r.seen[n]); err != nil {
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
			// A PT_INTERP too short for the layer's loader is the
			// package's (ErrTooLong): refused, as any error its bytes cause.
			return artifact.Refusal(fmt.Errorf("build glibc layer: %w", err))
		}
		sum, _, err := hostfile.SHA256File(e)
		if err != nil {
			return fmt.Errorf("build glibc layer: %w", err)
		}
		rel, _ := filepath.Rel(root, e)
		l.Patched = append(l.Patched, Patched{Path: filepath.ToSlash(rel), OldInterp: old, SHA256: sum})
	}
	return nil
}
