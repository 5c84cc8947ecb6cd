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
	if err == nil || len(err.Error()) > 16<<10 || !strings.Contains(err.Error(), "[...]") {
		t.Errorf("a go build printing 1 MiB: an error of %d bytes; want at most 16 KiB kept, marked cut", len(err.Error()))
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

// writeTree writes files (slash paths) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A go.work above the package would choose its modules (here one of its
// own in place of the module's pinned replacement): the preparer builds
// the module as its go.mod says. On main the binary printed "evil".
func TestGoBuildTakesNoWorkspace(t *testing.T) {
	goModule(t, map[string]string{})
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"go.work":      "go 1.22\n\nuse ./tool\n\nreplace example.com/lib => ./evil\n",
		"tool/go.mod":  "module example.com/tool\n\ngo 1.22\n\nrequire example.com/lib v0.0.0\n\nreplace example.com/lib => ../lib\n",
		"tool/main.go": "package main\n\nimport \"example.com/lib\"\n\nfunc main() { println(lib.Name) }\n",
		"lib/go.mod":   "module example.com/lib\n\ngo 1.22\n",
		"lib/lib.go":   "package lib\n\nconst Name = \"good\"\n",
		"evil/go.mod":  "module example.com/lib\n\ngo 1.22\n",
		"evil/lib.go":  "package lib\n\nconst Name = \"evil\"\n",
	})
	dir := filepath.Join(root, "tool")
	says := func(exe string) string {
		out, err := exec.Command(exe).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", exe, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	// Positive control: go build there takes the workspace.
	control := filepath.Join(t.TempDir(), "x")
	cmd := exec.Command("go", "build", "-o", control, ".")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil || says(control) != "evil" {
		t.Fatalf("positive control: go build under the go.work: %v\n%s", err, out)
	}
	exe, err := buildIn(dir, "")
	if err != nil {
		t.Fatalf("go-build: %v", err)
	}
	if got := says(exe); got != "good" {
		t.Errorf("go-build's binary says %q: built from the workspace's module, not the one go.mod pins", got)
	}
}

// Modules come from GOPROXY alone: a module the proxy lacks (or every
// module, where GOPROXY is "direct") is never fetched by running git or
// hg against the host its path names, with the host's credentials. On
// main go ran git ls-remote https://github.com/sandproof-none/dep.
func TestGoBuildRunsNoVCSForModules(t *testing.T) {
	dir := goModule(t, map[string]string{
		"go.mod":  "module example.com/tool\n\ngo 1.22\n\nrequire github.com/sandproof-none/dep v1.0.0\n",
		"go.sum":  "github.com/sandproof-none/dep v1.0.0 h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\ngithub.com/sandproof-none/dep v1.0.0/go.mod h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
		"main.go": "package main\n\nimport _ \"github.com/sandproof-none/dep\"\n\nfunc main() {}\n",
	})
	marker := filepath.Join(t.TempDir(), "git-ran")
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte("#!/bin/sh\necho \"$@\" >> '"+marker+"'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("GOPROXY", "direct")
	cache := t.TempDir()
	t.Setenv("GOMODCACHE", cache)
	t.Cleanup(func() { exec.Command("chmod", "-R", "u+w", cache).Run() })
	// Positive control: go build there runs git.
	cmd := exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), "x"), ".")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "GOFLAGS=-buildvcs=false -mod=readonly", "GOTOOLCHAIN=local")
	cmd.Run()
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("positive control: go build did not run git: %v", err)
	}
	os.Remove(marker)
	_, err := buildIn(dir, "")
	if b, _ := os.ReadFile(marker); len(b) > 0 || err == nil || !strings.Contains(err.Error(), "GOVCS disallows") {
		t.Errorf("go-build of a module the proxy lacks: %v; git ran with %q; want refused by GOVCS, no git", err, b)
	}
}
