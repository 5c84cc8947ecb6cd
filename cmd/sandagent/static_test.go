package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
)

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
