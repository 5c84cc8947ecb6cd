package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
)

// agentDeps are the only non-standard packages sandagent may link. It runs
// as root in every sandbox, must stay static and small, and must never
// pull in the host side (Docker clients, SQLite, reports), warden's
// packages or the probe's by an innocent-looking import.
var agentDeps = []string{
	"github.com/sandproof/sandproof/cmd/sandagent",
	"github.com/sandproof/sandproof/runner/agent",
	"github.com/sandproof/sandproof/runner/warden/version",
	// runner/agent holds the host end too (it uses provider's types and
	// its tar consumer); provider brings hostfile and proc, all standard
	// library underneath. Nothing else may join them.
	"github.com/sandproof/sandproof/runner/host/provider",
	"github.com/sandproof/sandproof/runner/host/hostfile",
	"github.com/sandproof/sandproof/runner/warden/proc",
	// proc's liveness rule carries warden's zskip mutation switch; in
	// every build without a mutant tag (the only builds shipped) it is a
	// constant false and links no code of its own.
	"github.com/sandproof/sandproof/runner/warden/mutant",
	"golang.org/x/sys/unix",
}

func TestSandagentLinksOnlyItsOwnPackagesAndXSys(t *testing.T) {
	deps := testenv.NonStandardDeps(t, ".")
	// Positive control: the listing is real.
	for _, must := range []string{"github.com/sandproof/sandproof/cmd/sandagent", "github.com/sandproof/sandproof/runner/agent"} {
		if !slices.Contains(deps, must) {
			t.Fatalf("go list -deps does not list %s: %q", must, deps)
		}
	}
	for _, d := range deps {
		if !slices.Contains(agentDeps, d) {
			t.Errorf("sandagent links %s: only its own packages and golang.org/x/sys may be (cmd/sandagent/deps_test.go says why)", d)
		}
	}
}

// The binary is static: no interpreter, whatever the image has.
func TestSandagentIsStatic(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "the go command", "install Go 1.26")
	}
	bin := t.TempDir() + "/sandagent"
	cmd := exec.Command(gobin, "build", "-o", bin, ".")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(gobin, "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "CGO_ENABLED=0") {
		t.Fatalf("sandagent built with cgo:\n%s", out)
	}
}
