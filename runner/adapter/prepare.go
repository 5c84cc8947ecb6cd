package adapter

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// PrepareRequest is what a preparer is given.
type PrepareRequest struct {
	// ManifestDir resolves relative paths in With.
	ManifestDir string
	// With holds the manifest's prepare.with strings; Node is its YAML node
	// (nil when absent), for errors that name a line.
	With map[string]string
	Node *yaml.Node
	// GOOS and GOARCH are the sandbox's.
	GOOS, GOARCH string
	// Dir is an empty host directory the preparer fills; it becomes the
	// root of {runtime_dir}.
	Dir string
}

// Preparer prepares a runtime on the host. It must not touch the network
// inside any sandbox; it should be deterministic (same request, same tree).
type Preparer func(ctx context.Context, req PrepareRequest) error

var (
	prepMu    sync.Mutex
	preparers = map[string]Preparer{"go-build": goBuild}
)

// RegisterPreparer makes a preparer available to manifests under name
// (prepare.name). Registering a name twice replaces the first.
func RegisterPreparer(name string, fn Preparer) {
	prepMu.Lock()
	defer prepMu.Unlock()
	preparers[name] = fn
}

func lookupPreparer(name string) Preparer {
	prepMu.Lock()
	defer prepMu.Unlock()
	return preparers[name]
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

// PrepareRuntime builds the manifest's runtime for goarch into a new
// directory under work and returns it: the preparer's output, then the
// runtime files on top. The directory is the root of {runtime_dir}.
func (m *Manifest) PrepareRuntime(ctx context.Context, work, goarch string) (string, error) {
	dir, err := os.MkdirTemp(work, "runtime-"+m.Name+"-")
	if err != nil {
		return "", fmt.Errorf("prepare runtime of %s: %w", m.Name, err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", fmt.Errorf("prepare runtime of %s: %w", m.Name, err)
	}
	if p := m.Runtime.Prepare; p != nil {
		fn := lookupPreparer(p.Name)
		if fn == nil {
			return "", fmt.Errorf("prepare runtime of %s: no preparer %q", m.Name, p.Name)
		}
		req := PrepareRequest{ManifestDir: m.Dir, With: p.With, Node: p.Node, GOOS: "linux", GOARCH: goarch, Dir: dir}
		if err := fn(ctx, req); err != nil {
			return "", fmt.Errorf("prepare runtime of %s with %s (%s:%d): %w", m.Name, p.Name, m.Path, p.Line, err)
		}
	}
	for _, f := range m.Runtime.Files {
		if err := copyTree(f.Src, filepath.Join(dir, filepath.FromSlash(f.Dst)), f.Mode); err != nil {
			return "", fmt.Errorf("prepare runtime of %s: %w", m.Name, err)
		}
	}
	return dir, nil
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

// goBuild builds a Go package: with.package (relative to the manifest),
// with.output (path under the runtime dir), with.cgo ("true": link the
// host's libc dynamically; default a static binary).
func goBuild(ctx context.Context, req PrepareRequest) error {
	pkg, out := req.With["package"], req.With["output"]
	if pkg == "" || out == "" {
		return fmt.Errorf("go-build needs with.package and with.output")
	}
	if filepath.IsAbs(out) || strings.HasPrefix(filepath.Clean(out), "..") {
		return fmt.Errorf("go-build: output %q leaves the runtime dir", out)
	}
	cgo := "0"
	switch req.With["cgo"] {
	case "", "false":
	case "true":
		cgo = "1"
	default:
		return fmt.Errorf("go-build: cgo %q (want true or false)", req.With["cgo"])
	}
	args := []string{"build", "-trimpath", "-o", filepath.Join(req.Dir, filepath.FromSlash(out))}
	if cgo == "1" {
		// Force the dynamic link so the binary needs the image's libc, as
		// Node does.
		args = append(args, "-ldflags=-linkmode=external")
	}
	args = append(args, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = req.ManifestDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo, "GOOS="+req.GOOS, "GOARCH="+req.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v: %s", pkg, err, strings.TrimSpace(string(b)))
	}
	return nil
}
