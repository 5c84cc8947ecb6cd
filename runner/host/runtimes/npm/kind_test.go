package npm

import (
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/runtimestest"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// npm keeps the contract of every runtime kind.
func TestNpmKindContract(t *testing.T) {
	runtimestest.Kind(t, Kind, runtimestest.Case{
		Dir: t.TempDir(), With: goodWith, Target: runtimes.Target{Arch: "amd64", Libc: "glibc"},
		Pins: adapter.Pins{Package: "@scope/tool", Version: "1.2.3", Integrity: goodIntegrity},
	})
}
