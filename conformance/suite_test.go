package conformance_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sandproof/sandproof/conformance/framework"
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
	data, err := json.Marshal(bins)
	Expect(err).NotTo(HaveOccurred())
	return data
}, func(data []byte) {
	Expect(json.Unmarshal(data, &framework.Bin)).To(Succeed())
})

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
