package testenv

import (
	"os/exec"
	"strings"
	"testing"
)

// NonStandardDeps lists the packages outside the standard library that the
// package in dir links (`go list -deps`): what a static in-sandbox binary
// (warden, sandagent) must keep to a short, named list.
func NonStandardDeps(t *testing.T, dir string) []string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		Missing(t, "the go command", "install Go 1.26")
	}
	cmd := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", dir, err)
	}
	return strings.Fields(string(out))
}
