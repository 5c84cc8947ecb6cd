// Package framework is the thin core every conformance spec uses: one wrapper
// that tags a spec as conformance and names the contract clause it checks, the
// frozen set of labels, the paths of the binaries under test, and Missing,
// the one way a spec gives up on a prerequisite. Helpers for processes,
// images and cases live beside it and are never imported by it.
package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/onsi/ginkgo/v2"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
)

// Labels. They are registered here once; specs use these values, never
// ad-hoc strings, so --label-filter expressions stay meaningful.
var (
	// Fakeproc specs drive a supervisor against fake /proc trees: no
	// privileges, no real signal, any OS.
	Fakeproc = ginkgo.Label("fakeproc")
	// Local specs start real processes on the Linux host.
	Local = ginkgo.Label("local")
	// Root specs need uid 0 (for --user, tmpfs mounts); they call Missing
	// otherwise.
	Root = ginkgo.Label("root")
	// Docker specs run inside containers of the test images.
	Docker = ginkgo.Label("docker")
	// Hostile specs run the adversary's hardest roles (a fork-and-exit
	// hopper, a bounded fork bomb, a process claiming to be a service)
	// against a real supervisor on this host.
	Hostile = ginkgo.Label("hostile")
)

// ConformanceIt declares a spec that certifies one clause of docs/contract.md. The
// clause ("2 stop rules", "5 events mode", ...) becomes part of the spec's
// text and a label, so reports can cite it and filters can select it.
func ConformanceIt(clause, text string, args ...any) bool {
	ginkgo.GinkgoHelper()
	args = append(args, ginkgo.Label("conformance", ClauseLabel(clause)))
	return ginkgo.It(fmt.Sprintf("[Conformance] [§%s] %s", clause, text), args...)
}

// ClauseLabel turns a clause into a label: "2 stop rules" -> "spec:2-stop-rules".
func ClauseLabel(clause string) string {
	return "spec:" + strings.Join(strings.Fields(strings.ToLower(clause)), "-")
}

// Missing ends the spec because the machine lacks what (how says how to
// get it): under SANDPROOF_STRICT=1, which `make test` sets, the spec fails
// with one line; otherwise it is skipped, so an ad-hoc run (a non-root
// `ginkgo --label-filter='!docker'` gating another supervisor) still works.
// It does not return.
func Missing(what, how string) {
	ginkgo.GinkgoHelper()
	if testenv.Strict() {
		ginkgo.Fail(testenv.Line(what, how))
	}
	ginkgo.Skip(testenv.Line(what, how))
}

// Binaries holds the paths of the executables under test, built once per
// suite run and handed to every parallel process.
type Binaries struct {
	// Warden is the supervisor under test: $SANDPROOF_WARDEN when set,
	// otherwise the project's own build.
	Warden string `json:"warden"`
	// FixtureDir holds one static binary per fixtures/cmd/<name> and per
	// fixtures/c/<name>.c.
	FixtureDir string `json:"fixture_dir"`
	// Unbuilt names the fixtures that could not be built on this machine
	// (a C fixture without gcc), with what is missing; nil when all were.
	Unbuilt map[string]string `json:"unbuilt,omitempty"`
}

// Bin is set by the suite's SynchronizedBeforeSuite.
var Bin Binaries

// Fixture returns the path of the fixture program name (fixtures/cmd/<name>).
func Fixture(name string) string {
	ginkgo.GinkgoHelper()
	if why, ok := Bin.Unbuilt[name]; ok {
		Missing(why, "apt-get install gcc libc6-dev (images/prereqs.sh installs both)")
	}
	p := filepath.Join(Bin.FixtureDir, name)
	if _, err := os.Stat(p); err != nil {
		ginkgo.Fail(fmt.Sprintf("fixture %q was not built: %v (have: %s)", name, err, strings.Join(fixtureNames(), ", ")))
	}
	return p
}

func fixtureNames() []string {
	entries, _ := os.ReadDir(Bin.FixtureDir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}
