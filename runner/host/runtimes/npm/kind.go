package npm

import (
	"go.yaml.in/yaml/v3"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// PreparerName is the name manifests use: prepare.name: npm.
const PreparerName = "npm"

// Kind is the npm runtime kind, registered from init.
var Kind runtimes.Kind = kind{}

func init() { runtimes.Register(Kind) }

type kind struct{}

func (kind) Name() string { return PreparerName }

// PerPlatform: a native entry is a platform's build, and a JS entry's
// Node is one.
func (kind) PerPlatform() bool { return true }

func (kind) Check(dir string, with *yaml.Node) []adapter.FieldError { return check(dir, with) }

// Plan reads the with block and plans the runtime for target: the glibc
// build and a glibc layer for a musl image the block has no build of,
// when it asks for one (glibc_layer: true).
func (kind) Plan(req adapter.PrepareRequest, target runtimes.Target) (runtimes.Spec, error) {
	c, errs := ParseConfig(req.ManifestDir, req.Node)
	if len(errs) > 0 {
		return runtimes.Spec{}, runtimes.FieldErrors(PreparerName, errs)
	}
	if _, native := c.platformFor(target); c.GlibcLayer && target.Libc == "musl" && !native {
		// No build of the image's own libc: the glibc one, carrying glibc.
		target.Libc, target.GlibcLayer = "glibc", true
	}
	return SpecFor(c, target)
}

// Pins are the main package's: package, version, integrity.
func (kind) Pins(with map[string]string) adapter.Pins {
	return adapter.Pins{Package: with["package"], Version: with["version"], Integrity: with["integrity"]}
}
