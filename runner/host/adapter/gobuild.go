package adapter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sandproof/sandproof/runner/host/artifact"
	"github.com/sandproof/sandproof/runner/host/hostfile"
)

// goBuildDeadline bounds each go command the go-build preparer runs (a
// variable for the tests): a cold build of the fixtures' agent takes
// about a minute on two cores.
var goBuildDeadline = 10 * time.Minute

// goBuildOutput is what is kept of a go command's output (for its
// error); the rest is read and dropped.
const goBuildOutput = 8 << 10

// goBuild builds a Go package: with.package (a path relative to the
// manifest), with.output (path under the runtime dir), with.cgo ("true":
// link the host's libc dynamically; default a static binary).
//
// It runs the host's go command over the package's source, so nothing in
// that source steers what the command does beyond compiling it (goEnv):
// no other toolchain, no VCS command, no go.mod rewrite, no go.work,
// modules from GOPROXY only, under goBuildDeadline. The host's C
// toolchain runs only with cgo: "true", and then only over the standard
// library's C (noOwnC).
func goBuild(ctx context.Context, req PrepareRequest) error {
	pkg, out := req.With["package"], req.With["output"]
	if pkg == "" || out == "" {
		return fmt.Errorf("go-build needs with.package and with.output")
	}
	if strings.HasPrefix(pkg, "-") {
		return fmt.Errorf("go-build: package %q is a flag, not a package", pkg)
	}
	if filepath.IsAbs(out) || strings.HasPrefix(filepath.Clean(out), "..") {
		return fmt.Errorf("go-build: output %q leaves the runtime dir", out)
	}
	cgo := "0"
	switch req.With["cgo"] {
	case "", "false":
	case "true":
		cgo = "1"
	default:
		return fmt.Errorf("go-build: cgo %q (want true or false)", req.With["cgo"])
	}
	env := goEnv(req, cgo)
	if cgo == "1" {
		if err := noOwnC(ctx, req.ManifestDir, env, pkg); err != nil {
			return err
		}
	}
	args := []string{"build", "-trimpath", "-o", filepath.Join(req.Dir, filepath.FromSlash(out))}
	if cgo == "1" {
		// Force the dynamic link so the binary needs the image's libc, as
		// Node does.
		args = append(args, "-ldflags=-linkmode=external")
	}
	args = append(args, pkg)
	if _, err := runGo(ctx, req.ManifestDir, env, args...); err != nil {
		return fmt.Errorf("go build %s: %w", pkg, err)
	}
	return nil
}

// goEnv is the go command's environment: the host's (its GOPROXY, its
// caches), with every setting the package's files could otherwise steer
// fixed.
func goEnv(req PrepareRequest, cgo string) []string {
	return append(os.Environ(),
		// A go.mod's go or toolchain line never has go fetch and run
		// another toolchain: a newer one than the host's is an error.
		"GOTOOLCHAIN=local",
		// go.mod and go.sum are not rewritten (what they pin is what is
		// built), and no VCS command runs in the package's dir to stamp
		// the binary: git status there runs what the package's own
		// .git/config names (core.fsmonitor), as sandproof's user.
		"GOFLAGS=-mod=readonly -buildvcs=false",
		// No go.work above the package chooses the modules.
		"GOWORK=off",
		// Modules come from GOPROXY alone: no git or hg is run against a
		// host a go.mod names (with the host's credentials, for a path
		// GOPRIVATE matches).
		"GOVCS=*:off",
		"CGO_ENABLED="+cgo, "GOOS="+req.GOOS, "GOARCH="+req.GOARCH)
}

// cFiles are the go list fields of files the host's C toolchain would
// compile or link with cgo on: C and its kin, cgo's own Go files (their
// preamble and #cgo flags), SWIG, and .syso objects (handed to the
// external linker, which takes a linker script as readily). Go assembly
// (.s) is not among them: the Go assembler takes it, cgo or not.
const cFiles = ".CgoFiles .CFiles .CXXFiles .MFiles .FFiles .HFiles .SwigFiles .SwigCXXFiles .SysoFiles"

// noOwnC refuses a package that, with what it imports outside the
// standard library, brings files for the host's C toolchain: with cgo on
// the toolchain may compile the standard library's C (runtime/cgo, net)
// and link, nothing of the harness's.
func noOwnC(ctx context.Context, dir string, env []string, pkg string) error {
	tmpl := `{{if and (not .Standard) (or ` + cFiles + `)}}{{.ImportPath}}:{{range .CgoFiles}} {{.}}{{end}}{{range .CFiles}} {{.}}{{end}}{{range .CXXFiles}} {{.}}{{end}}{{range .MFiles}} {{.}}{{end}}{{range .FFiles}} {{.}}{{end}}{{range .HFiles}} {{.}}{{end}}{{range .SwigFiles}} {{.}}{{end}}{{range .SwigCXXFiles}} {{.}}{{end}}{{range .SysoFiles}} {{.}}{{end}}{{"\n"}}{{end}}`
	out, err := runGo(ctx, dir, env, "list", "-deps", "-f", tmpl, pkg)
	if err != nil {
		return fmt.Errorf("go list %s: %w", pkg, err)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		return fmt.Errorf("go-build: %w: with cgo the host's C toolchain compiles only the standard library's C, and %s brings its own: %s", artifact.ErrRefused, pkg, strings.ReplaceAll(s, "\n", "; "))
	}
	return nil
}

// runGo runs the go command in dir with env, under goBuildDeadline (its
// whole process group killed at the deadline), and returns its stdout;
// what is kept of stdout and stderr is goBuildOutput bytes each.
func runGo(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, goBuildDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	stdout, stderr := &hostfile.HeadBuffer{Max: goBuildOutput}, &hostfile.HeadBuffer{Max: goBuildOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) && parent.Err() == nil {
		return nil, fmt.Errorf("did not end within %s: %s", goBuildDeadline, headText(stderr))
	}
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, headText(stderr))
	}
	if stdout.Dropped() {
		return nil, fmt.Errorf("printed more than %d bytes: %s", goBuildOutput, headText(stdout))
	}
	return stdout.Bytes(), nil
}

// headText is what h kept, trimmed, marked when the rest was dropped.
func headText(h *hostfile.HeadBuffer) string {
	s := strings.TrimSpace(h.String())
	if h.Dropped() {
		s += " [...]"
	}
	return s
}
