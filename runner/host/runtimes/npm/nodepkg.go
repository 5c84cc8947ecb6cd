package npm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sandproof/sandproof/runner/host/artifact"
	"github.com/sandproof/sandproof/runner/host/glibc"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// nodeSource is where a JS entry's Node comes from: the host's (host set)
// or npm's node-linux-<arch> package at a pinned version and integrity.
type nodeSource struct {
	host *Node
	// Package, Version and Integrity pin the npm build (when host is nil).
	Package, Version, Integrity string
	// field names the integrity's manifest key, for errors.
	field string
}

func (s nodeSource) String() string {
	if s.host != nil {
		return "the host's Node " + s.host.Path
	}
	return s.Package + "@" + s.Version
}

// chooseNode picks the Node for target: the host's when it fits target
// and with.node; else npm's build pinned in with.node_package, which is a
// glibc build of one architecture. When neither will do it is
// ErrUnsupported, naming why.
func chooseNode(c Config, target runtimes.Target) (nodeSource, error) {
	n, err := hostNode(target, c.NodeRange)
	if err == nil {
		return nodeSource{host: &n}, nil
	}
	if !errors.Is(err, runtimes.ErrUnsupported) {
		return nodeSource{}, err
	}
	np := c.NodePackage
	if np == nil {
		if !c.NodeRange.IsZero() && n.Version != "" && !c.NodeRange.Contains(n.Version) {
			return nodeSource{}, fmt.Errorf("%w (pin a Node in with.node_package to have one fetched)", err)
		}
		return nodeSource{}, err
	}
	if target.Libc != "glibc" {
		return nodeSource{}, fmt.Errorf("%w; with.node_package's %s is a glibc build, not for %s", err, NodePackageName(target.Arch), target)
	}
	integrity, ok := np.Integrity[target.Arch]
	if !ok {
		return nodeSource{}, fmt.Errorf("%w; with.node_package.integrity has no %s entry (for %s)", err, target.Arch, NodePackageName(target.Arch))
	}
	runtimes.Logf("runtimes: %v; using %s@%s", err, NodePackageName(target.Arch), np.Version)
	return nodeSource{Package: NodePackageName(target.Arch), Version: np.Version, Integrity: integrity,
		field: withKey + ".node_package.integrity." + target.Arch}, nil
}

// hashSuffix folds a fetched Node's pins into a runtime's cache key: the
// same manifest gets another entry on a host whose own Node will do.
func (s nodeSource) hashSuffix(hash string) string {
	if s.host != nil {
		return hash
	}
	h := sha256.Sum256([]byte(hash + "\x00" + s.Package + "@" + s.Version + "\x00" + s.Integrity))
	return hex.EncodeToString(h[:])[:12]
}

// provide returns the chosen Node: the host's as found, or npm's build,
// prepared in the runtime cache as a runtime of its own (bin/node, its
// tarball checked against the pin before it is unpacked), so every harness
// pinning the same Node shares one download. npm's build is never started
// on the host (it is the manifest's pick, as the harness is): its version
// is the pin's, and it runs first in the harness's own version check, in
// a sandbox.
func (s nodeSource) provide(ctx context.Context, target runtimes.Target) (Node, error) {
	if s.host != nil {
		return *s.host, nil
	}
	nodeTarget := runtimes.Target{Arch: target.Arch, Libc: "glibc", Baseline: target.Baseline}
	spec := runtimes.Spec{
		Name: s.Package, Version: s.Version, Target: nodeTarget,
		Package: s.Package, Integrity: s.Integrity, Entry: []string{"bin/node"},
		Hash: s.hashSuffix(""),
		Stage: func(ctx context.Context, dir string, info map[string]any) error {
			return s.stage(ctx, dir, info, nodeTarget)
		},
	}
	rt, err := runtimes.Prepare(ctx, spec, os.Getenv(runtimes.CacheEnv))
	if err != nil {
		return Node{}, err
	}
	n := Node{Path: filepath.Join(rt.Dir, "bin", "node"), Version: "v" + s.Version, Arch: target.Arch,
		Package: s.Package + "@" + s.Version, Integrity: s.Integrity}
	if f, err := glibc.ReadELFFile(n.Path, false); err == nil {
		n.Interp = f.Interp
	}
	return n, nil
}

// stage fills a Node runtime: the package's bin/node, nothing else (its
// headers and docs are no use to a harness).
func (s nodeSource) stage(ctx context.Context, dir string, info map[string]any, target runtimes.Target) error {
	dl, err := os.MkdirTemp(dir, ".download-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dl)
	tgz, err := npmPack(ctx, dl, s.Package, s.Version, s.Integrity)
	if err != nil {
		return fmt.Errorf("%s: %w", s.field, err)
	}
	pkg := filepath.Join(dl, "package")
	if err := extractPackage(tgz, pkg); err != nil {
		return err
	}
	src := filepath.Join(pkg, "bin", "node")
	if fi, err := os.Lstat(src); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s@%s has no bin/node", artifact.ErrRefused, s.Package, s.Version)
	}
	if err := checkBinary(src, target); err != nil {
		return fmt.Errorf("%s@%s: %w", s.Package, s.Version, err)
	}
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		return err
	}
	if err := os.Rename(src, filepath.Join(dir, "bin", "node")); err != nil {
		return err
	}
	info["package"], info["integrity"] = s.Package+"@"+s.Version, s.Integrity
	return nil
}
