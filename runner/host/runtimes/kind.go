package runtimes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/sandproof/sandproof/runner/host/adapter"
)

// Kind is one kind of runtime: npm's packages (runtimes/npm) today,
// Python's next. A kind says what a manifest's prepare.with block means
// and plans the Spec of its runtime; everything after the plan is this
// package's and the same for every kind: the cache and its lock, the
// stage, the pins and tree sums, the stamp, the glibc layer, the version
// check handed to certify, the link into the case and what the evidence
// records (docs/add-runtime-kind.md).
type Kind interface {
	// Name is the kind's prepare.name in a manifest ("npm").
	Name() string
	// PerPlatform means the runtime depends on the image's libc
	// (adapter.PreparerSpec.PerPlatform).
	PerPlatform() bool
	// Check validates the with node when the manifest loads (dir is the
	// manifest's directory); its errors are the manifest's. A nil with
	// (none given) is an error: every kind needs its pins.
	Check(dir string, with *yaml.Node) []adapter.FieldError
	// Plan turns the request's with block into the Spec of its runtime
	// for target, the sandbox's arch and libc on this host. The spec's
	// Target may differ (a musl image given the glibc build and a glibc
	// layer). A target the block does not cover wraps adapter.ErrPlatform;
	// a source that cannot be reached at all (at Plan or at the spec's
	// Stage) wraps ErrUnreachable. Plan fetches nothing: the same request
	// plans the same spec, and so the same cache key.
	Plan(req adapter.PrepareRequest, target Target) (Spec, error)
	// Pins are the package, version and integrity the with block pins,
	// from its scalar values alone (certify records them as the harness's
	// provenance even when no runtime was prepared).
	Pins(with map[string]string) adapter.Pins
}

// ErrUnreachable means a kind's source (its registry) could not be
// reached at all; the preparer reports it as adapter.ErrUnavailable.
var ErrUnreachable = errors.New("runtime source unreachable")

// CacheEnv overrides the cache dir of every kind's preparer.
const CacheEnv = "SANDPROOF_RUNTIME_CACHE"

// Register makes kind k the preparer of manifests whose prepare.name is
// k.Name(). It is the one place a runtime kind becomes an adapter
// preparer: a kind's package calls it from init, and the product links
// the kind with a blank import (cmd/sandproof/runtimes.go).
func Register(k Kind) {
	adapter.Register(k.Name(), adapter.PreparerSpec{Prepare: Preparer(k), Check: k.Check, PerPlatform: k.PerPlatform(), Pins: k.Pins})
}

// HostTargetFor is the target of a sandbox of arch and libc on this host:
// baseline when this CPU lacks AVX2 (the sandbox runs on it).
func HostTargetFor(arch, libc string) Target {
	t := Target{Arch: arch, Libc: libc}
	if t.Libc == "" {
		t.Libc = "glibc"
	}
	if h := HostTarget(); h.Arch == t.Arch {
		t.Baseline = h.Baseline
	}
	return t
}

// Preparer is kind k's adapter preparer: the manifest's with block
// planned for the request's arch and libc, the runtime prepared in the
// cache ($SANDPROOF_RUNTIME_CACHE, default $XDG_CACHE_HOME/sandproof/runtimes)
// and hard-linked into req.Dir (copied where links fail).
func Preparer(k Kind) adapter.Preparer {
	return func(ctx context.Context, req adapter.PrepareRequest) error {
		if req.GOOS != "" && req.GOOS != "linux" {
			return fmt.Errorf("%w: GOOS %q", adapter.ErrPlatform, req.GOOS)
		}
		if req.Libc != "" && req.Libc != "glibc" && req.Libc != "musl" {
			// Certify found neither loader in the image.
			return fmt.Errorf("%w: the image has neither a glibc nor a musl loader (libc %q)", adapter.ErrPlatform, req.Libc)
		}
		spec, err := k.Plan(req, HostTargetFor(req.GOARCH, req.Libc))
		if err != nil {
			return err
		}
		rt, err := Prepare(ctx, spec, os.Getenv(CacheEnv))
		if err != nil {
			if errors.Is(err, ErrUnreachable) {
				return fmt.Errorf("%w: %v", adapter.ErrUnavailable, err)
			}
			return err
		}
		if err := linkTree(rt.Dir, req.Dir); err != nil {
			return fmt.Errorf("%s: %w", k.Name(), err)
		}
		if req.Out != nil {
			req.Out.Platform = spec.Target.String()
			// The check starts the harness: the caller runs it in a sandbox.
			req.Out.VersionCheck = rt.VersionCheck
			req.Out.Requires = slices.Clone(spec.Requires)
			if l := rt.GlibcLayer; l != nil {
				req.Out.GlibcLayer = l
				// What the layer holds is met by the runtime, not the image.
				req.Out.Provides = []string{"glibc"}
				for q, so := range map[string]string{"libstdc++": "libstdc++.so.6", "libgcc": "libgcc_s.so.1"} {
					if l.Has(so) {
						req.Out.Provides = append(req.Out.Provides, q)
					}
				}
				slices.Sort(req.Out.Provides)
			}
			if spec.HostParts != nil {
				req.Out.Host = append(req.Out.Host, spec.HostParts(rt)...)
			}
		}
		return nil
	}
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
				_, cerr := CopyFile(p, to, fi.Mode().Perm())
				return cerr
			}
			return fmt.Errorf("link runtime: %s exists", to)
		default:
			return fmt.Errorf("link runtime: %q is not a file or directory", rel)
		}
	})
}
