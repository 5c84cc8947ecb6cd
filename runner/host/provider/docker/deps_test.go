package docker_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// goList runs `go list -deps` (plus args) at the module root and returns
// the import paths.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	root, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), append([]string{"list", "-deps"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

// goListPkgs lists the packages pattern matches (no dependencies).
func goListPkgs(t *testing.T, pattern string) []string {
	t.Helper()
	root, err := filepath.Abs("../../../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", pattern)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pattern, err)
	}
	return strings.Fields(string(out))
}

// ory/dockertest (and the go-dockerclient under it) is for tests only:
// the shipped command and the runner's packages reach the engine through
// its own client.
func TestNoDockertestOutsideTests(t *testing.T) {
	banned := []string{"github.com/ory/dockertest", "github.com/fsouza/go-dockerclient"}
	has := func(pkgs []string, prefix string) []string {
		var out []string
		for _, p := range pkgs {
			if strings.HasPrefix(p, prefix) {
				out = append(out, p)
			}
		}
		return out
	}
	// The command and the runner's packages; the test support (the second
	// engine loads its images with dockertest) is in internal/testsupport,
	// outside ./runner/....
	args := append([]string{"./cmd/sandproof"}, goListPkgs(t, "./runner/...")...)
	shipped := goList(t, args...)
	// The listing is alive: the engine's client is in it.
	if !slices.Contains(shipped, "github.com/docker/docker/client") {
		t.Fatalf("go list -deps ./cmd/sandproof ./runner/... lacks github.com/docker/docker/client (%d packages): the listing is not what it seems", len(shipped))
	}
	for _, b := range banned {
		if got := has(shipped, b); len(got) > 0 {
			t.Errorf("non-test packages depend on %s: %v", b, got)
		}
	}
	// The check sees dockertest where it is: this package's tests use it
	// (it carries its own copy of go-dockerclient, under its own path).
	if withTests := goList(t, "-test", "./runner/host/provider/docker"); len(has(withTests, banned[0])) == 0 {
		t.Errorf("the docker provider's tests do not reach %s: this check could not see it either", banned[0])
	}
}
