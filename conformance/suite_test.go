package conformance_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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
	root, err := filepath.Abs("..")
	Expect(err).NotTo(HaveOccurred())
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

var _ = SynchronizedAfterSuite(func() {}, func() {
	if framework.Bin.FixtureDir != "" {
		os.RemoveAll(filepath.Dir(framework.Bin.FixtureDir))
	}
})
