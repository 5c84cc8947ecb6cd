package npm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/artifact"
	"github.com/sandproof/sandproof/runner/host/hostfile"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// SpecFor turns a manifest's npm block into the spec of its runtime for
// target. A target the block does not cover is adapter.ErrPlatform, named.
func SpecFor(c Config, target runtimes.Target) (runtimes.Spec, error) {
	return specFor(c, target, chooseNode)
}

// specFor is SpecFor with the choice of a JS entry's Node given: the
// host's Node decides whether npm's is fetched, and so the cache key, and
// a test pins the keys of every choice on any host.
func specFor(c Config, target runtimes.Target, chooseNode func(Config, runtimes.Target) (nodeSource, error)) (runtimes.Spec, error) {
	s := runtimes.Spec{
		Name: cacheName(c.Package), Version: c.Version, Target: target,
		Package: c.Package, Integrity: c.Integrity, PackagesSHA256: c.TreeSHA256,
		VersionArgs: c.VersionArgs,
	}
	if err := target.Valid(); err != nil {
		return s, err
	}
	for k, v := range c.VersionEnv {
		s.VersionEnv = append(s.VersionEnv, k+"="+v)
	}
	slices.Sort(s.VersionEnv)
	var pl *Platform
	if len(c.Platforms) > 0 {
		p, ok := c.platformFor(target)
		if !ok {
			var have []string
			for _, p := range c.Platforms {
				have = append(have, p.Target().String())
			}
			why := ""
			if target.Baseline {
				why = " (this CPU lacks AVX2: only a cpu: baseline build runs on it)"
			}
			return s, fmt.Errorf("%w: platform %s is not in the manifest's platforms (%s)%s", adapter.ErrPlatform, target, strings.Join(have, ", "), why)
		}
		pl = &p
		s.PackagesSHA256 = p.TreeSHA256
		s.Requires = slices.Clone(p.Requires)
	}
	s.Hash = c.contentHash(pl)
	if target.GlibcLayer {
		s.GlibcLayer = adapter.GlibcLayerMountDir
	}
	var node nodeSource
	switch {
	case c.EntryNode != "":
		// The host's Node, or the one the manifest pins, decides which
		// platforms a JS entry can have: fail early (before any
		// download) when neither fits.
		var err error
		if node, err = chooseNode(c, target); err != nil {
			if errors.Is(err, runtimes.ErrUnsupported) {
				why := strings.ReplaceAll(err.Error(), runtimes.ErrUnsupported.Error()+": ", "")
				return s, fmt.Errorf("%w: platform %s: %s", adapter.ErrPlatform, target, why)
			}
			return s, err
		}
		s.Hash = node.hashSuffix(s.Hash)
		s.Entry = []string{"bin/node", "./node_modules/" + c.Package + "/" + c.EntryNode}
		s.HostFiles = []string{"bin/node", "bin"}
		s.HostParts = func(rt *runtimes.Runtime) []adapter.HostPart { return []adapter.HostPart{nodePart(rt.Info)} }
	default:
		s.Entry = []string{"bin/" + path.Base(c.EntryBin)}
	}
	s.Stage = func(ctx context.Context, dir string, info map[string]any) error {
		return stage(ctx, c, pl, node, target, dir, info)
	}
	return s, nil
}

// cacheName makes a package name a file name: "@scope/name" ->
// "scope+name".
func cacheName(pkg string) string {
	return strings.ReplaceAll(strings.TrimPrefix(pkg, "@"), "/", "+")
}

// stage fills dir: the package (by npm ci from the lock, or from its own
// tarball), the platform package, the entry in bin/.
func stage(ctx context.Context, c Config, pl *Platform, nodeFrom nodeSource, target runtimes.Target, dir string, info map[string]any) error {
	dl, err := os.MkdirTemp(dir, ".download-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dl)
	pkgDir := filepath.Join(dir, "node_modules", filepath.FromSlash(c.Package))
	if c.LockData != nil {
		if err := npmCI(ctx, c, dir); err != nil {
			return err
		}
		// Before anything below reads or moves a path in the tree, which
		// would follow a link npm made out of it.
		if err := runtimes.FilesOnly(dir); err != nil {
			return fmt.Errorf("npm ci: %w", err)
		}
	} else {
		tgz, err := npmPack(ctx, dl, c.Package, c.Version, c.Integrity)
		if err != nil {
			return err
		}
		if err := extractPackage(tgz, pkgDir); err != nil {
			return err
		}
		if deps := dependencies(pkgDir); len(deps) > 0 {
			return fmt.Errorf("%w: %s@%s depends on %s: give the manifest a lock file (with.lock) that pins them", artifact.ErrRefused, c.Package, c.Version, strings.Join(deps, ", "))
		}
	}
	if err := prune(pkgDir, c.Keep); err != nil {
		return fmt.Errorf("%s: %w", c.Package, err)
	}
	binFrom := pkgDir
	if pl != nil {
		var err error
		if binFrom, err = stagePlatform(ctx, pl, dl, dir, info); err != nil {
			return err
		}
	}
	if c.EntryBin != "" {
		if err := placeEntryBin(c.EntryBin, binFrom, target, dir, info); err != nil {
			return err
		}
	}
	if c.EntryNode != "" {
		js := filepath.Join(pkgDir, filepath.FromSlash(c.EntryNode))
		if fi, err := os.Stat(js); err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("%w: entry.node %s is not a file in %s", artifact.ErrRefused, c.EntryNode, c.Package)
		}
		if err := putNode(ctx, nodeFrom, target, dir, info); err != nil {
			return err
		}
	}
	return nil
}

// putNode copies the chosen Node to bin/node (a copy, not a link: a glibc
// layer rewrites the tree's interpreters in place) and says in info what
// it is and where it came from.
func putNode(ctx context.Context, from nodeSource, target runtimes.Target, dir string, info map[string]any) error {
	node, err := from.provide(ctx, target)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return err
	}
	sum, err := runtimes.CopyFile(node.Path, filepath.Join(dir, "bin", "node"), 0o755)
	if err != nil {
		return fmt.Errorf("copy node: %w", err)
	}
	info["node_path"], info["node_version"], info["node_sha256"], info["node_interp"] = node.Path, node.Version, sum, node.Interp
	info["node_source"] = "host"
	if node.Package != "" {
		info["node_source"], info["node_package"], info["node_integrity"] = "npm", node.Package, node.Integrity
	}
	return nil
}

// stagePlatform unpacks the platform package pl (checked against its
// pin) into dir's node_modules, keeping its keep paths; it returns the
// package's dir, where entry.bin is.
func stagePlatform(ctx context.Context, pl *Platform, dl, dir string, info map[string]any) (string, error) {
	tgz, err := npmPack(ctx, dl, pl.Package, pl.Version, pl.Integrity)
	if err != nil {
		return "", err
	}
	pdir := filepath.Join(dir, "node_modules", filepath.FromSlash(pl.Package))
	if _, err := os.Stat(pdir); err == nil {
		return "", fmt.Errorf("%w: platform package %s is already in node_modules (from the lock?)", artifact.ErrRefused, pl.Package)
	}
	if err := extractPackage(tgz, pdir); err != nil {
		return "", err
	}
	if err := prune(pdir, pl.Keep); err != nil {
		return "", fmt.Errorf("%s: %w", pl.Package, err)
	}
	info["platform_package"], info["platform_integrity"] = pl.Package+"@"+pl.Version, pl.Integrity
	return pdir, nil
}

// placeEntryBin moves entry.bin from its package (binFrom) to bin/,
// executable, after checking it is built for target.
func placeEntryBin(entryBin, binFrom string, target runtimes.Target, dir string, info map[string]any) error {
	src := filepath.Join(binFrom, filepath.FromSlash(entryBin))
	if fi, err := os.Lstat(src); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: entry.bin %s is not a file in %s", artifact.ErrRefused, entryBin, filepath.Base(binFrom))
	}
	if err := checkBinary(src, target); errors.Is(err, artifact.ErrRefused) {
		return err
	} else if err != nil {
		return fmt.Errorf("%w: %v", adapter.ErrPlatform, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return err
	}
	bin := filepath.Join(dir, "bin", path.Base(entryBin))
	if err := os.Rename(src, bin); err != nil {
		return err
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		return err
	}
	sum, _, err := hostfile.SHA256File(bin)
	if err != nil {
		return err
	}
	info["binary_sha256"] = sum
	return nil
}

// npmCI installs the lock's tree into dir with npm ci (which checks every
// tarball against the lock's sha512; the lock's own pin of the package was
// checked against the manifest when it loaded). Install scripts are not
// run: they would run code from the network on the host, and a runtime
// must be a pure function of its pins.
func npmCI(ctx context.Context, c Config, dir string) error {
	var lock struct {
		Name     string `json:"name"`
		Packages map[string]struct {
			Dependencies map[string]string `json:"dependencies"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(c.LockData, &lock); err != nil {
		return fmt.Errorf("lock %s: %w", c.Lock, err)
	}
	pj, err := json.MarshalIndent(map[string]any{"name": lock.Name, "private": true, "dependencies": lock.Packages[""].Dependencies}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), append(pj, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "package-lock.json"), c.LockData, 0o644); err != nil {
		return err
	}
	if _, err := npmCmd(ctx, dir, "ci", "--prefix", dir, "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"); err != nil {
		return err
	}
	return dropBinLinks(dir)
}

// dropBinLinks removes every node_modules/.bin directory under dir, the
// top one and the nested node_modules/*/node_modules/.bin that npm ci makes
// for a package's own dependencies: they hold links to the packages'
// scripts, for npm run. The harness is started by path, an upload (which
// follows links) would duplicate them, and a runtime holds only files and
// directories (linkTree).
func dropBinLinks(dir string) error {
	var bins []string
	err := filepath.WalkDir(filepath.Join(dir, "node_modules"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".bin" && filepath.Base(filepath.Dir(p)) == "node_modules" {
			bins = append(bins, p)
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("drop .bin links: %w", err)
	}
	for _, b := range bins {
		if err := os.RemoveAll(b); err != nil {
			return fmt.Errorf("drop .bin links: %w", err)
		}
	}
	return nil
}

// dependencies lists the package.json's dependencies (not the optional
// ones: platform packages are named in the manifest).
func dependencies(pkgDir string) []string {
	b, err := os.ReadFile(filepath.Join(pkgDir, "package.json"))
	if err != nil {
		return nil
	}
	var pj struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if json.Unmarshal(b, &pj) != nil {
		return nil
	}
	var out []string
	for k := range pj.Dependencies {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// prune removes from dir everything that is neither a keep path, inside
// one, nor a directory leading to one. Every keep path must exist.
func prune(dir string, keep []string) error {
	if keep == nil {
		return nil
	}
	for _, k := range keep {
		if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(k))); err != nil {
			return fmt.Errorf("%w: keep: %s is not in the package", artifact.ErrRefused, k)
		}
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		for _, k := range keep {
			if rel == k || strings.HasPrefix(rel, k+"/") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasPrefix(k, rel+"/") {
				return nil // leads to a kept path
			}
		}
		if err := os.RemoveAll(p); err != nil {
			return err
		}
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
}

// nodePart is the evidence's record of bin/node, from a stamp's info:
// the host's Node by its host path, npm's by package and integrity. A
// stamp from before node_source was recorded is the host's.
func nodePart(info map[string]any) adapter.HostPart {
	str := func(k string) string {
		if v, ok := info[k].(string); ok {
			return v
		}
		return ""
	}
	hp := adapter.HostPart{Path: "bin/node", Name: "node", Version: str("node_version"), SHA256: str("node_sha256"), Source: "host", From: str("node_path"), Interpreter: true}
	if str("node_source") == "npm" {
		hp.Source, hp.From, hp.Integrity = "npm", str("node_package"), str("node_integrity")
	}
	return hp
}
