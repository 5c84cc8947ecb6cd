package adapter

import (
	"context"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/artifact"
)

// goModule writes a main package (a module of its own) with files into a
// new dir, and sets the environment a host has by default (Go's own
// defaults, not this machine's go env: toolchain switching on, VCS
// stamping on), which the preparer must not depend on.
func goModule(t *testing.T, files map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		testenv.Missing(t, "the go command (the go-build preparer runs it)", "install Go 1.26")
	}
	t.Setenv("GOTOOLCHAIN", "auto")
	t.Setenv("GOFLAGS", "-buildvcs=auto")
	dir := t.TempDir()
	if _, ok := files["go.mod"]; !ok {
		files["go.mod"] = "module example.com/tool\n\ngo 1.22\n"
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const mainGo = "package main\n\nfunc main() { println(\"tool\") }\n"

// buildIn runs the go-build preparer over the package in dir.
func buildIn(dir, cgo string) (string, error) {
	out := filepath.Join(dir, "out")
	with := map[string]string{"package": ".", "output": "bin/tool"}
	if cgo != "" {
		with["cgo"] = cgo
	}
	return filepath.Join(out, "bin", "tool"), goBuild(context.Background(), PrepareRequest{ManifestDir: dir, With: with, GOOS: "linux", GOARCH: runtime.GOARCH, Dir: out})
}

// go build stamps a binary with its VCS state by running git status in
// the package's dir, and git runs the command the repository's own
// config names (core.fsmonitor): the package's code, on the host, as
// root. The preparer runs no VCS command. On main the marker was written.
func TestGoBuildRunsNoVCSCommand(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Missing(t, "git (the test makes the package a repository)", "apt-get install git")
	}
	dir := goModule(t, map[string]string{"main.go": mainGo})
	marker := filepath.Join(t.TempDir(), "ran-on-the-host")
	for _, args := range [][]string{{"init", "-q"}, {"config", "core.fsmonitor", "touch '" + marker + "'; false"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	// Positive control: git status there runs the package's command.
	exec.Command("git", "-C", dir, "status", "--porcelain").Run()
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("positive control: git status did not run core.fsmonitor: %v", err)
	}
	os.Remove(marker)
	if _, err := buildIn(dir, ""); err != nil {
		t.Fatalf("go-build: %v", err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("go-build ran the package's git hook on the host (%s: %v)", marker, err)
	}
}

// A go.mod that asks for a Go newer than the host's has go fetch and run
// that toolchain when GOTOOLCHAIN allows it (Go's default): the preparer
// builds with the host's toolchain or not at all. On main go tried to
// download go1.999.
func TestGoBuildUsesTheHostsToolchainOnly(t *testing.T) {
	dir := goModule(t, map[string]string{"main.go": mainGo, "go.mod": "module example.com/tool\n\ngo 1.999\n"})
	_, err := buildIn(dir, "")
	if err == nil || !strings.Contains(err.Error(), "GOTOOLCHAIN=local") || strings.Contains(err.Error(), "download") {
		t.Errorf("go-build of a module asking for go 1.999: %v; want the host's toolchain's refusal (GOTOOLCHAIN=local), no download", err)
	}
}

// cgoFile is a cgo file whose preamble stops the C compiler: a build that
// succeeds never ran it over the package.
const cgoFile = "package main\n\n// #error the host's C compiler ran over the package\nimport \"C\"\n"

// The host's C toolchain does not run over a package unless the
// manifest asks for cgo.
func TestGoBuildCgoOnlyWhenAsked(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Missing(t, "gcc (the positive control runs cgo)", "apt-get install gcc")
	}
	dir := goModule(t, map[string]string{"main.go": mainGo, "c.go": cgoFile})
	// Positive control: with cgo the C compiler takes the file.
	cmd := exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), "x"), ".")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "CGO_ENABLED=1", "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "the host's C compiler ran") {
		t.Fatalf("positive control: go build with cgo: %v\n%s", err, out)
	}
	if _, err := buildIn(dir, ""); err != nil {
		t.Errorf("go-build without with.cgo: %v", err)
	}
}

// With cgo: "true" (the glibc fixture: a binary linked to the host's
// libc, as Node is) the host's C toolchain compiles the standard
// library's C and links, and nothing of the harness's own: a package
// bringing cgo, C or a .syso object is refused before anything runs. On
// main its C was compiled and linked on the host.
func TestGoBuildRefusesTheHarnesssOwnC(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Missing(t, "gcc (go-build with cgo links with it)", "apt-get install gcc")
	}
	// Positive control: a package of Go alone builds with cgo, linked to
	// the host's libc.
	exe, err := buildIn(goModule(t, map[string]string{"main.go": mainGo}), "true")
	if err != nil {
		t.Fatalf("positive control: go-build with cgo: %v", err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	libs, _ := f.ImportedLibraries()
	f.Close()
	if len(libs) == 0 {
		t.Fatalf("positive control: %s needs no library: not the dynamic link cgo asks for", exe)
	}
	ownC := "package main\n\n// static int seven(void) { return 7; }\nimport \"C\"\n\nfunc main() { println(C.seven()) }\n"
	for name, files := range map[string]map[string]string{
		"cgo":  {"main.go": ownC},
		"C":    {"main.go": mainGo, "c.go": "package main\n\nimport \"C\"\n", "x.c": "int seven(void) { return 7; }\n"},
		"syso": {"main.go": mainGo, "x_" + runtime.GOARCH + ".syso": "INPUT(/etc/hostname)\n"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := buildIn(goModule(t, files), "true")
			if !errors.Is(err, artifact.ErrRefused) || !strings.Contains(err.Error(), "example.com/tool:") {
				t.Errorf("go-build with cgo of a package with its own %s: %v; want refused naming it", name, err)
			}
		})
	}
}

// fakeGo puts a go command that runs script first on PATH.
func fakeGo(t *testing.T, script string) {
	t.Helper()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// The go command runs under a deadline that ends it and everything it
// started (the compiler parses the harness's source: the deadline is its
// bound), and what is kept of its output is bounded.
func TestGoBuildIsBounded(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		testenv.Missing(t, "/bin/sh", "install Debian's dash")
	}
	defer func(d time.Duration) { goBuildDeadline = d }(goBuildDeadline)
	goBuildDeadline = 300 * time.Millisecond
	pidFile := filepath.Join(t.TempDir(), "pid")
	// A go that starts a child holding its output, then waits: ended
	// only by the deadline (the child alone ends after 30 s, and the
	// build then passes).
	fakeGo(t, "sleep 30 &\necho $! > '"+pidFile+"'\nwait\n")
	dir := t.TempDir()
	err := goBuild(context.Background(), PrepareRequest{ManifestDir: dir, With: map[string]string{"package": ".", "output": "bin/tool"}, GOOS: "linux", GOARCH: runtime.GOARCH, Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "did not end within 300ms") {
		t.Fatalf("a go build that never ends: %v; want it ended at the deadline", err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("positive control: the fake go's child: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if fd, err := unix.PidfdOpen(pid, 0); err == nil {
		// Gone or dying: its exit is an event, waited for (the guard
		// only keeps a child nobody killed from hanging the test).
		n, _ := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 10_000)
		unix.Close(fd)
		if n != 1 {
			t.Errorf("the go command's child %d outlived the deadline", pid)
		}
	}

	// Output: what is kept is bounded.
	fakeGo(t, "head -c 1048576 /dev/zero | tr '\\0' x >&2\nexit 1\n")
	err = goBuild(context.Background(), PrepareRequest{ManifestDir: dir, With: map[string]string{"package": ".", "output": "bin/tool"}, GOOS: "linux", GOARCH: runtime.GOARCH, Dir: dir})
	if err == nil || len(err.Error()) > goBuildOutput+200 || !strings.Contains(err.Error(), "[...]") {
		t.Errorf("a go build printing 1 MiB: an error of %d bytes; want at most %d kept, marked cut", len(err.Error()), goBuildOutput+200)
	}
}

// A package that is a flag is refused: go build would take it as one
// (-toolexec runs any host command).
func TestGoBuildRefusesAFlagForAPackage(t *testing.T) {
	fakeGo(t, "echo ran >&2\nexit 1\n")
	dir := t.TempDir()
	err := goBuild(context.Background(), PrepareRequest{ManifestDir: dir, With: map[string]string{"package": "-toolexec=/bin/true", "output": "bin/tool"}, GOOS: "linux", GOARCH: runtime.GOARCH, Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "is a flag") {
		t.Errorf("package -toolexec=/bin/true: %v; want refused as a flag", err)
	}
}
