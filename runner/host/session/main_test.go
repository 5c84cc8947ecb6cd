package session_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sandproof/sandproof/runner/host/session"
)

// bins are the static builds every test uploads, built once; sandagent is
// the session agent, for the sessions over its channel.
var (
	bins      session.Binaries
	sandagent string
)

func TestMain(m *testing.M) {
	if os.Getenv(leaseChildEnv) != "" {
		os.Exit(leaseChild())
	}
	dir, err := os.MkdirTemp("", "session-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if err := buildBinaries(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

func buildBinaries(dir string) error {
	a := runtime.GOARCH
	bins = session.Binaries{
		Warden: map[string]string{a: filepath.Join(dir, "warden")},
		Probe:  map[string]string{a: filepath.Join(dir, "probe")},
		Rmtree: map[string]string{a: filepath.Join(dir, "rmtree")},
	}
	sandagent = filepath.Join(dir, "sandagent")
	if _, err := os.Stat("/bin/bash-static"); err == nil {
		bins.Bash = map[string]string{a: "/bin/bash-static"}
	}
	for _, b := range []struct{ out, pkg string }{
		{bins.Warden[a], "../../../cmd/warden"},
		{bins.Probe[a], "../../../cmd/probe"},
		{bins.Rmtree[a], "../../rmtree"},
		{sandagent, "../../../cmd/sandagent"},
	} {
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v\n%s", b.pkg, err, out)
		}
	}
	return nil
}
