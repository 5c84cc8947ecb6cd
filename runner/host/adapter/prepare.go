package adapter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/sandproof/sandproof/runner/host/glibc"
	"go.yaml.in/yaml/v3"
)

// PrepareRequest is what a preparer is given.
type PrepareRequest struct {
	// ManifestDir resolves relative paths in With.
	ManifestDir string
	// With holds the manifest's prepare.with scalar values; Node is its
	// YAML node (nil when absent), for nested values and errors that name
	// a line.
	With map[string]string
	Node *yaml.Node
	// GOOS and GOARCH are the sandbox's; Libc is the image's ("glibc",
	// "musl", or "" when not probed: a preparer that is not PerPlatform).
	GOOS, GOARCH, Libc string
	// Dir is an empty host directory the preparer fills; it becomes the
	// root of {runtime_dir}.
	Dir string
	// Out receives what the preparer reports about the tree (never nil).
	Out *Prepared
}

// Prepared is a prepared runtime: its host directory and what the
// preparer reported.
type Prepared struct {
	Dir string
	// Platform is the preparer's name for what it prepared for
	// ("linux-x64"); empty when it does not depend on the platform.
	Platform string
	// Host lists tree paths taken from the host rather than from the
	// pinned sources (the host's Node). The tree's digest leaves them out,
	// so the same pins give the same digest on every host; each is
	// recorded on its own.
	Host []HostPart
	// Requires are what the prepared build needs of the image on top of
	// the manifest's requires (a platform's own requires); nil adds
	// nothing.
	Requires []string
	// GlibcLayer is the glibc the runtime carries for an image without
	// one (nil: none). It is in the tree's glibc/ dir; its executables'
	// loader is GlibcLayerMountDir/ld.so, where the case mounts that dir,
	// and they need LD_LIBRARY_PATH=GlibcLayerMountDir.
	GlibcLayer *glibc.Layer
	// Provides are requirements the runtime meets itself (the layer's
	// glibc, libstdc++, libgcc): not asked of the image.
	Provides []string
	// VersionCheck is the check the preparer asks for and does not run
	// itself: it starts the harness's own code, which never runs on the
	// host, so certify runs it in a sandbox of the runtime's image before
	// any case (docs/threat-model.md, "Host-side readers of harness
	// artifacts"). nil asks for none.
	VersionCheck *VersionCheck
}

// VersionCheck is a runtime's version check: Argv, run in the runtime's
// dir in a sandbox, must print Want.
type VersionCheck struct {
	// Argv is the command; its first element, and any element starting
	// with "./", is a path relative to the runtime dir.
	Argv []string
	// Env is added to the check's environment ("K=V"), over HOME, PATH,
	// TMPDIR and the XDG dirs the runner gives it.
	Env []string
	// Want must be in what the command prints (stdout or stderr).
	Want string
}

// ArgvIn is v's argv with its runtime paths under dir (a sandbox path).
func (v VersionCheck) ArgvIn(dir string) []string {
	out := make([]string, 0, len(v.Argv))
	for i, a := range v.Argv {
		if i == 0 || strings.HasPrefix(a, "./") {
			a = path.Join(dir, a)
		}
		out = append(out, a)
	}
	return out
}

// HostPart is a file of the runtime tree from outside its pinned npm tree:
// the host's (its Node), or npm's Node package pinned apart from it.
type HostPart struct {
	Path    string // relative to the runtime dir, slash-separated
	Name    string // "node"
	Version string
	SHA256  string
	// Source is where the file came from: "host" (From is its host
	// path) or "npm" (From is PACKAGE@VERSION, Integrity its pinned
	// tarball's); "" when not said.
	Source, From, Integrity string
	// Interpreter marks the interpreter that runs the harness's entry
	// (npm's Node): the evidence records it as the harness_runtime's
	// node (its python, for Name "python"). False for any other part.
	Interpreter bool
	// Pinned marks a part pinned like the rest of the tree, the same
	// bytes on every host (a Python interpreter from pinned .debs): the
	// tree's digest covers it. Unpinned parts (the host's Node) are left
	// out of the digest and recorded alone.
	Pinned bool
}

// Pins are the main package, version and integrity a preparer's with
// block pins; the zero value pins nothing.
type Pins struct {
	Package, Version, Integrity string
}

// Preparer prepares a runtime on the host. It must not touch the network
// inside any sandbox; it should be deterministic (same request, same tree).
type Preparer func(ctx context.Context, req PrepareRequest) error

// FieldError is a problem in a preparer's `with` block, at a line of the
// manifest.
type FieldError struct {
	Line int
	Key  string // e.g. "runtime.prepare.with.platforms[0].integrity"
	Msg  string
}

// PreparerSpec is a registered preparer.
type PreparerSpec struct {
	Prepare Preparer
	// Check validates the `with` node when the manifest loads (dir is the
	// manifest's directory); its errors are the manifest's. Nil: with is
	// a mapping of strings, checked by Prepare only.
	Check func(dir string, with *yaml.Node) []FieldError
	// PerPlatform means the runtime depends on the image's libc: it is
	// prepared once per libc the run's images have, and a preparer error
	// wrapping ErrPlatform skips that platform's cases.
	PerPlatform bool
	// Pins reads the pins of the with block's scalars (certify records
	// them as the harness's provenance). Nil: the preparer pins nothing.
	Pins func(with map[string]string) Pins
}

// Errors a preparer wraps to have certify skip cases instead of stopping
// the run.
var (
	// ErrPlatform: the manifest does not cover this platform (arch x
	// libc); the message names it.
	ErrPlatform = errors.New("platform not covered")
	// ErrUnavailable: the runtime's source could not be reached at all
	// (no network) and nothing is cached.
	ErrUnavailable = errors.New("runtime source unavailable")
	// ErrVersion: the runtime's version check (VersionCheck) did not
	// answer the pinned version; the run stops before any case.
	ErrVersion = errors.New("version check failed")
)

var (
	prepMu    sync.Mutex
	preparers = map[string]PreparerSpec{"go-build": {Prepare: goBuild}}
)

// RegisterPreparer makes a preparer available to manifests under name
// (prepare.name). Registering a name twice replaces the first.
func RegisterPreparer(name string, fn Preparer) {
	Register(name, PreparerSpec{Prepare: fn})
}

// Register is RegisterPreparer with a validator and platform dependence.
func Register(name string, s PreparerSpec) {
	prepMu.Lock()
	defer prepMu.Unlock()
	preparers[name] = s
}

func lookupPreparer(name string) (PreparerSpec, bool) {
	prepMu.Lock()
	defer prepMu.Unlock()
	s, ok := preparers[name]
	return s, ok
}

func preparerNames() []string {
	prepMu.Lock()
	defer prepMu.Unlock()
	var out []string
	for n := range preparers {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// PerPlatform reports whether the manifest's runtime depends on the
// image's libc (its preparer says so).
func (m *Manifest) PerPlatform() bool {
	if m.Runtime.Prepare == nil {
		return false
	}
	s, ok := lookupPreparer(m.Runtime.Prepare.Name)
	return ok && s.PerPlatform
}

// RuntimePins are the pins of the manifest's runtime, as its preparer
// reads them (the zero value when it has no preparer or pins nothing).
func (m *Manifest) RuntimePins() Pins {
	if m.Runtime.Prepare == nil {
		return Pins{}
	}
	s, ok := lookupPreparer(m.Runtime.Prepare.Name)
	if !ok || s.Pins == nil {
		return Pins{}
	}
	return s.Pins(m.Runtime.Prepare.With)
}

// PrepareRuntime builds the manifest's runtime for goarch into a new
// directory under work and returns it (PrepareFor without a libc).
func (m *Manifest) PrepareRuntime(ctx context.Context, work, goarch string) (string, error) {
	p, err := m.PrepareFor(ctx, work, goarch, "")
	if err != nil {
		return "", err
	}
	return p.Dir, nil
}

// PrepareFor builds the manifest's runtime for goarch and libc into a new
// directory under work: the preparer's output, then the runtime files on
// top. The directory is the root of {runtime_dir}.
func (m *Manifest) PrepareFor(ctx context.Context, work, goarch, libc string) (*Prepared, error) {
	dir, err := os.MkdirTemp(work, "runtime-"+m.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("prepare runtime of %s: %w", m.Name, err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("prepare runtime of %s: %w", m.Name, err)
	}
	out := &Prepared{Dir: dir}
	if p := m.Runtime.Prepare; p != nil {
		spec, ok := lookupPreparer(p.Name)
		if !ok {
			return nil, fmt.Errorf("prepare runtime of %s: no preparer %q", m.Name, p.Name)
		}
		req := PrepareRequest{ManifestDir: m.Dir, With: p.With, Node: p.Node, GOOS: "linux", GOARCH: goarch, Libc: libc, Dir: dir, Out: out}
		if err := spec.Prepare(ctx, req); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("prepare runtime of %s with %s (%s:%d): %w", m.Name, p.Name, m.Path, p.Line, err)
		}
		out.Dir = dir
	}
	for _, f := range m.Runtime.Files {
		if err := copyTree(f.Src, filepath.Join(dir, filepath.FromSlash(f.Dst)), f.Mode); err != nil {
			return nil, fmt.Errorf("prepare runtime of %s: %w", m.Name, err)
		}
	}
	return out, nil
}

func copyTree(src, dst string, mode os.FileMode) error {
	return filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("copy runtime file: %w", err)
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !e.Type().IsRegular() {
			return fmt.Errorf("copy runtime file %q: not a regular file", p)
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		m := fi.Mode().Perm()
		if mode != 0 {
			m = mode
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, m)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
		return os.Chmod(to, m)
	})
}
