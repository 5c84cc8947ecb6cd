package runtimes

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sandproof/sandproof/runner/adapter"
)

// PreparerName is the name manifests use: prepare.name: npm-runtime.
const PreparerName = "npm-runtime"

//go:embed setup/*
var setupFiles embed.FS

// SetupDir is where the preparer puts the setup scripts in the runtime
// (pi-setup.mjs, opencode-setup.js).
const SetupDir = "share/sandproof"

func init() { adapter.RegisterPreparer(PreparerName, Preparer) }

// CacheEnv overrides the cache dir of the preparer.
const CacheEnv = "SANDPROOF_RUNTIME_CACHE"

// SpecFor returns the built-in spec whose package, version and integrity
// are exactly these, for target.
func SpecFor(pkg, version, integrity string, target Target) (Spec, error) {
	var s Spec
	var err error
	switch pkg {
	case PiPackage:
		s, err = Pi(target)
	case OpenCodePackage:
		s, err = OpenCode(target)
	default:
		return s, fmt.Errorf("unknown package %q (known: %s, %s)", pkg, PiPackage, OpenCodePackage)
	}
	if err != nil {
		return s, err
	}
	if version != s.Version || integrity != s.Integrity {
		return s, fmt.Errorf("%s@%s (%s) is not the pinned %s@%s (%s) for %s", pkg, version, integrity, pkg, s.Version, s.Integrity, target)
	}
	return s, nil
}

// Preparer is the adapter preparer: with.package, with.version and
// with.integrity must name a pinned runtime; with.libc is glibc (default)
// or musl. The runtime is prepared in the cache ($SANDPROOF_RUNTIME_CACHE,
// default $XDG_CACHE_HOME/sandproof/runtimes) and hard-linked into req.Dir
// (copied where links fail), with the setup scripts under share/sandproof.
func Preparer(ctx context.Context, req adapter.PrepareRequest) error {
	if req.GOOS != "" && req.GOOS != "linux" {
		return fmt.Errorf("%w: GOOS %q", ErrUnsupported, req.GOOS)
	}
	for k := range req.With {
		switch k {
		case "package", "version", "integrity", "libc":
		default:
			return fmt.Errorf("%s: unknown with.%s (known: package, version, integrity, libc)", PreparerName, k)
		}
	}
	t := Target{Arch: req.GOARCH, Libc: "glibc"}
	if l := req.With["libc"]; l != "" {
		t.Libc = l
	}
	if h := HostTarget(); h.Arch == t.Arch {
		t.Baseline = h.Baseline // the sandbox runs on this CPU
	}
	spec, err := SpecFor(req.With["package"], req.With["version"], req.With["integrity"], t)
	if err != nil {
		return fmt.Errorf("%s: %w", PreparerName, err)
	}
	cache := os.Getenv(CacheEnv)
	rt, err := Prepare(ctx, spec, cache)
	if err != nil {
		return err
	}
	if err := linkTree(rt.Dir, req.Dir); err != nil {
		return fmt.Errorf("%s: %w", PreparerName, err)
	}
	return writeSetup(filepath.Join(req.Dir, filepath.FromSlash(SetupDir)))
}

func writeSetup(dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := fs.ReadDir(setupFiles, "setup")
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := setupFiles.ReadFile("setup/" + e.Name())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// linkTree mirrors src into dst (which exists) with hard links, copying a
// file where linking fails (another filesystem). The stamp is left out. The
// links share inodes with the cache: a runtime mounted read-only cannot
// change them, and a change made on the host is caught by the next
// Prepare's checksum.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "." {
			return nil
		}
		if rel == StampFile {
			return nil
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type().IsRegular():
			if err := os.Link(p, to); err == nil {
				return nil
			} else if !errors.Is(err, os.ErrExist) {
				fi, serr := d.Info()
				if serr != nil {
					return serr
				}
				_, cerr := copyFile(p, to, fi.Mode().Perm())
				return cerr
			}
			return fmt.Errorf("link runtime: %s exists", to)
		default:
			return fmt.Errorf("link runtime: %q is not a file or directory", rel)
		}
	})
}
