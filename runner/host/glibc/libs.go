package glibc

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandproof/sandproof/runner/host/artifact"
	"github.com/sandproof/sandproof/runner/host/hostfile"
)

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

// lib is a host library the layer takes: its soname, the path it was
// found at in a library dir (src, recorded), and its size then.
type lib struct {
	name, src string
	size      int64
}

// resolver finds libraries in the host's library dirs for one machine.
// The runtime's ELF files (the harness's) name what they need, so every
// file the resolver hands out is checked as a file the host may give away
// (open): its real path is inside the real path of a library dir, and it
// is a regular file every user may read. seen maps each soname resolved
// so far to its library.
type resolver struct {
	dirs    []string
	roots   []string // the real paths of dirs (Debian's /lib is usr/lib)
	machine elf.Machine
	seen    map[string]lib
	bytes   int64 // of the libraries in seen
}

func newResolver(dirs []string, m elf.Machine) *resolver {
	r := &resolver{dirs: dirs, machine: m, seen: map[string]lib{}}
	for _, d := range dirs {
		if real, err := filepath.EvalSymlinks(d); err == nil {
			r.roots = append(r.roots, real)
		}
	}
	return r
}

// within reports whether the real path p is inside a library dir's.
func (r *resolver) within(p string) bool {
	for _, root := range r.roots {
		if p == root || strings.HasPrefix(p, root+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// open opens the library at p for reading once it is one the layer may
// copy: its links resolved, it lies inside a library dir; opened without
// following a link (hostfile.Open) it is a regular file by fstat, which
// every user of the host may read (the layer goes where the harness reads
// it). The caller closes the file.
func (r *resolver) open(p string) (*os.File, os.FileInfo, error) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil, nil, fmt.Errorf("resolve %s: %w", p, err)
	}
	if !r.within(real) {
		return nil, nil, fmt.Errorf("%s is %s, outside the library dirs (%s)", p, real, strings.Join(r.roots, ", "))
	}
	f, err := hostfile.Open(real)
	if err != nil {
		return nil, nil, fmt.Errorf("library %s: %w", p, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("library %s: %w", p, err)
	}
	if fi.Mode().Perm()&0o004 == 0 {
		f.Close()
		return nil, nil, fmt.Errorf("library %s (%s) is not readable by every user (mode %v): the layer copies only what any user of the host may read", p, real, fi.Mode().Perm())
	}
	return f, fi, nil
}

// find looks name up in the library dirs, in order, as the loader does:
// the first ELF file of the resolver's machine by that name wins, one of
// another machine is passed over. It returns the library and what it
// needs (its DT_NEEDED).
func (r *resolver) find(name string) (lib, []string, error) {
	for _, d := range r.dirs {
		p := filepath.Join(d, name)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		f, fi, err := r.open(p)
		if err != nil {
			return lib{}, nil, err
		}
		needed, machine, err := readNeeded(f, fi.Size())
		f.Close()
		if err != nil {
			return lib{}, nil, fmt.Errorf("read ELF %s: %w", p, err)
		}
		if machine != r.machine {
			continue
		}
		return lib{name: name, src: p, size: fi.Size()}, needed, nil
	}
	return lib{}, nil, fmt.Errorf("%s is in none of %s on this host", name, strings.Join(r.dirs, ", "))
}

// readNeeded reads the DT_NEEDED and machine of an ELF file of size
// bytes (ReadELF).
func readNeeded(f io.ReaderAt, size int64) ([]string, elf.Machine, error) {
	e, err := ReadELF(f, size, true)
	if err != nil {
		return nil, 0, err
	}
	return e.Needed, e.Machine, nil
}

// need resolves what p needs (needed), and depth first what that needs,
// into r.seen. The names come from the harness's ELF files: a name that
// is not a file name, or one library more than the layer's cap, is
// refused.
func (r *resolver) need(p string, needed []string) error {
	for _, n := range needed {
		if _, ok := r.seen[n]; ok {
			continue
		}
		// A name with a slash ("../../etc/x") would have the host copy a
		// file from outside its library dirs into the layer, and write
		// it outside the layer's dir.
		if n == "" || n == "." || n == ".." || strings.ContainsRune(n, '/') {
			return fmt.Errorf("%w: %s needs %q, which is not a library file name", artifact.ErrRefused, p, n)
		}
		if len(r.seen) >= MaxLayerFiles {
			return fmt.Errorf("%w: %s needs %s, one library more than the layer's cap of %d", artifact.ErrRefused, p, n, MaxLayerFiles)
		}
		l, sub, err := r.find(n)
		if err != nil {
			return fmt.Errorf("%s needs %s: %w", p, n, err)
		}
		// The caps hold before anything is copied.
		if l.size > MaxFileBytes {
			return fmt.Errorf("%w: %s needs %s (%s), %d bytes, over the cap of %d per library", artifact.ErrRefused, p, n, l.src, l.size, MaxFileBytes)
		}
		if l.size > MaxLayerBytes-r.bytes {
			return fmt.Errorf("%w: %s needs %s (%s), %d bytes, which takes the layer over its cap of %d", artifact.ErrRefused, p, n, l.src, l.size, MaxLayerBytes)
		}
		r.seen[n], r.bytes = l, r.bytes+l.size
		if err := r.need(l.src, sub); err != nil {
			return err
		}
	}
	return nil
}

// needFile resolves the needs of the runtime's ELF file p.
func (r *resolver) needFile(p string) error {
	e, err := ReadELFFile(p, true)
	if err != nil {
		return fmt.Errorf("read ELF %s: %w", p, err)
	}
	return r.need(p, e.Needed)
}

// try resolves the needs of p as a whole or not at all: a shared object
// needing what the host lacks (a musl build beside a glibc one) is left
// out, as the glibc runtime never loads it. A refusal is not left out.
func (r *resolver) try(p string) error {
	sub := &resolver{dirs: r.dirs, roots: r.roots, machine: r.machine, seen: maps.Clone(r.seen), bytes: r.bytes}
	err := sub.needFile(p)
	if errors.Is(err, artifact.ErrRefused) {
		return err
	}
	if err == nil {
		r.seen, r.bytes = sub.seen, sub.bytes
	}
	return nil
}
