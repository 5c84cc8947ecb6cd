package python

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// PreparerName is the name manifests use: prepare.name: python.
const PreparerName = "python"

// Kind is the python runtime kind, registered from init.
var Kind runtimes.Kind = kind{}

func init() { runtimes.Register(Kind) }

type kind struct{}

func (kind) Name() string { return PreparerName }

// PerPlatform: the interpreter and a wheel with native code are one
// machine's build (the libc does not matter: the tree carries its own).
func (kind) PerPlatform() bool { return true }

func (kind) Check(dir string, with *yaml.Node) []adapter.FieldError {
	_, errs := ParseConfig(dir, with)
	return errs
}

// Plan reads the with block and plans the runtime for target. Every
// image, glibc or musl, gets the same tree: it carries its own glibc and
// starts the interpreter through its own loader.
func (kind) Plan(req adapter.PrepareRequest, target runtimes.Target) (runtimes.Spec, error) {
	c, errs := ParseConfig(req.ManifestDir, req.Node)
	if len(errs) > 0 {
		return runtimes.Spec{}, runtimes.FieldErrors(PreparerName, errs)
	}
	return SpecFor(c, runtimes.Target{Arch: target.Arch, Libc: "glibc"})
}

// Pins are the harness's distribution and version; a Python lock pins
// many files, so its integrity is the lock's own sha256 (recorded with
// the tree's).
func (kind) Pins(with map[string]string) adapter.Pins {
	return adapter.Pins{Package: with["package"], Version: with["version"]}
}

// layoutVersion changes when the tree this package stages changes shape
// for the same pins (a new cache entry, not a wrong reuse).
const layoutVersion = "python-tree-3"

// specHash is a hash of every pin that shapes the tree.
func specHash(c Config, arch string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", layoutVersion, c.Python, arch)
	if pins, ok := interpPins[arch]; ok {
		fmt.Fprintf(h, "%s\n", pinsSum(pins))
	}
	for _, r := range c.Requirements {
		fmt.Fprintf(h, "%s==%s %s\n", r.Name, r.Version, strings.Join(r.Hashes, ","))
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
