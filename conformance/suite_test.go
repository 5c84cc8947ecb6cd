package conformance_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sandproof/sandproof/conformance/framework"
	"github.com/sandproof/sandproof/internal/testsupport/testenv"
)

func TestConformance(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "sandproof conformance")
}

// The binaries are built once, on process 1, and their paths handed to every
// parallel process.
var _ = SynchronizedBeforeSuite(func() []byte {
	root := moduleRoot()
	dir, err := os.MkdirTemp("", "sandproof-bin-")
	Expect(err).NotTo(HaveOccurred())
	bins := framework.Binaries{FixtureDir: filepath.Join(dir, "fixtures")}
	build := func(out, pkg string) {
		cmd := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		outp, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "go build %s:\n%s", pkg, outp)
	}
	if w := os.Getenv("SANDPROOF_WARDEN"); w != "" {
		bins.Warden, err = filepath.Abs(w)
		Expect(err).NotTo(HaveOccurred())
	} else {
		bins.Warden = filepath.Join(dir, "warden")
		build(bins.Warden, "./cmd/warden")
	}
	entries, err := os.ReadDir(filepath.Join(root, "fixtures", "cmd"))
	Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		if e.IsDir() {
			build(filepath.Join(bins.FixtureDir, e.Name()), "./fixtures/cmd/"+e.Name())
		}
	}
	bins.Unbuilt = buildCFixtures(root, bins.FixtureDir)
	data, err := json.Marshal(bins)
	Expect(err).NotTo(HaveOccurred())
	return data
}, func(data []byte) {
	Expect(json.Unmarshal(data, &framework.Bin)).To(Succeed())
})

// buildCFixtures builds every fixtures/c/<name>.c as a static binary
// <name> with gcc -static -pthread: what Go cannot be (zombielead's main
// thread exits alone), static so the same binary runs in the glibc and the
// musl images. Without gcc, under SANDPROOF_STRICT=1 the suite fails here
// with one line naming it; otherwise the fixtures are left unbuilt, named
// with the reason, and each spec that needs one is skipped with that line
// (framework.Fixture). A compile error fails the suite either way.
func buildCFixtures(root, dir string) map[string]string {
	srcs, err := filepath.Glob(filepath.Join(root, "fixtures", "c", "*.c"))
	Expect(err).NotTo(HaveOccurred())
	unbuilt := map[string]string{}
	gcc, lookErr := exec.LookPath("gcc")
	for _, src := range srcs {
		name := strings.TrimSuffix(filepath.Base(src), ".c")
		if lookErr != nil {
			why := fmt.Sprintf("gcc (%v), to build the C fixture fixtures/c/%s.c", lookErr, name)
			if testenv.Strict() {
				Fail(testenv.Line(why, cFixtureHow))
			}
			unbuilt[name] = why
			continue
		}
		cmd := exec.Command(gcc, "-static", "-pthread", "-O2", "-Wall", "-Werror", "-o", filepath.Join(dir, name), src)
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "gcc -static -pthread %s (a static glibc needs libc6-dev):\n%s", src, out)
	}
	return unbuilt
}

// cFixtureHow says how to get what buildCFixtures needs.
const cFixtureHow = "apt-get install gcc libc6-dev (images/prereqs.sh installs both)"

// moduleRoot finds the module from this file's own path, so a precompiled
// suite run from another directory (the mutants runner does that) still
// builds the right fixtures; SANDPROOF_ROOT overrides it.
func moduleRoot() string {
	if r := os.Getenv("SANDPROOF_ROOT"); r != "" {
		return r
	}
	_, file, _, ok := runtime.Caller(0)
	Expect(ok).To(BeTrue(), "locate suite_test.go")
	return filepath.Dir(filepath.Dir(file))
}

var _ = SynchronizedAfterSuite(func() {}, func() {
	if framework.Bin.FixtureDir != "" {
		os.RemoveAll(filepath.Dir(framework.Bin.FixtureDir))
	}
})
