package runtimes

import (
	"bytes"
	"context"
	"debug/elf"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Pi's pins. The lock file pins every one of its 188 dependencies with its
// own sha512 (npm ci checks them); PiPackagesSHA256 is the TreeSum of what
// npm ci leaves (node_modules/.bin removed), without bin/node.
const (
	PiPackage        = "@mariozechner/pi-coding-agent"
	PiVersion        = "0.73.1"
	PiIntegrity      = "sha512-gXQh3SaZmWTfVMc4Ao5+LGbVeKvzyO7tolok0nLsZgq9nGjZx/EEU3NM8C+qUnB4Nvs2rswG5qOVgLzQkq0fHQ=="
	PiPackagesSHA256 = "e394b83481cdb11890f0689f69808d9e2e0a68a9e620a2a73851c62e76a1bdc4"
	// PiCLI is Pi's entry script inside the runtime.
	PiCLI = "node_modules/@mariozechner/pi-coding-agent/dist/cli.js"
)

// MinNode is the oldest Node Pi runs on (its engines field).
var MinNode = [3]int{20, 6, 0}

var (
	//go:embed pi/package.json
	piPackageJSON []byte
	//go:embed pi/package-lock.json
	piPackageLock []byte
)

// NodePath is the Node binary copied into Pi's runtime; "" means `node` on
// PATH.
var NodePath = ""

// Pi returns the spec of Pi's runtime for target: the pinned package tree
// installed by `npm ci` from the embedded lock file, with the host's Node
// binary as bin/node. Node links glibc, libstdc++ and libgcc_s dynamically,
// so only glibc targets of the host Node's own architecture are possible.
func Pi(target Target) (Spec, error) {
	s := Spec{
		Name: "pi", Version: PiVersion, Target: target,
		Package: PiPackage, Integrity: PiIntegrity, PackagesSHA256: PiPackagesSHA256,
		HostFiles:   []string{"bin/node", "bin"},
		Entry:       []string{"bin/node", "./" + PiCLI},
		VersionArgs: []string{"--version"},
		VersionEnv:  []string{"PI_OFFLINE=1", "PI_TELEMETRY=0"},
	}
	if err := target.valid(); err != nil {
		return s, err
	}
	if target.Libc != "glibc" {
		return s, fmt.Errorf("%w: pi needs Node, and the host Node links glibc (target %s)", ErrUnsupported, target)
	}
	s.Stage = func(ctx context.Context, dir string, info map[string]any) error {
		node, err := hostNode(target)
		if err != nil {
			return err
		}
		if err := checkPiLock(); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "package.json"), piPackageJSON, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "package-lock.json"), piPackageLock, 0o644); err != nil {
			return err
		}
		if _, err := npmCmd(ctx, dir, "ci", "--prefix", dir, "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"); err != nil {
			return err
		}
		// Links to the package's own scripts, for npm run; the harness is
		// started by path, and an upload (which follows links) would
		// duplicate them.
		if err := os.RemoveAll(filepath.Join(dir, "node_modules", ".bin")); err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(PiCLI))); err != nil {
			return fmt.Errorf("npm ci left no %s: %w", PiCLI, err)
		}
		if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
			return err
		}
		sum, err := copyFile(node.Path, filepath.Join(dir, "bin", "node"), 0o755)
		if err != nil {
			return fmt.Errorf("copy node: %w", err)
		}
		info["node_path"], info["node_version"], info["node_sha256"], info["node_interp"] = node.Path, node.Version, sum, node.Interp
		return nil
	}
	return s, nil
}

// checkPiLock makes sure the embedded lock pins the same package and
// integrity as the constants (the lock is what npm ci obeys).
func checkPiLock() error {
	var lock struct {
		Packages map[string]struct {
			Version   string `json:"version"`
			Integrity string `json:"integrity"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(piPackageLock, &lock); err != nil {
		return fmt.Errorf("embedded pi lock: %w", err)
	}
	p := lock.Packages["node_modules/"+PiPackage]
	if p.Version != PiVersion || p.Integrity != PiIntegrity {
		return fmt.Errorf("embedded pi lock pins %s@%s (%s), constants say %s (%s)", PiPackage, p.Version, p.Integrity, PiVersion, PiIntegrity)
	}
	return nil
}

// Node describes a Node binary.
type Node struct {
	Path    string
	Version string
	Arch    string // GOARCH spelling
	Interp  string // ELF interpreter ("" for a static binary)
}

var nodeVersionRe = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)`)

// hostNode finds the host's Node and checks it is new enough and built for
// target (architecture and libc).
func hostNode(target Target) (Node, error) {
	p := NodePath
	if p == "" {
		var err error
		if p, err = exec.LookPath("node"); err != nil {
			return Node{}, fmt.Errorf("%w: no node on PATH", ErrUnsupported)
		}
	}
	p, err := filepath.EvalSymlinks(p)
	if err != nil {
		return Node{}, fmt.Errorf("find node: %w", err)
	}
	n := Node{Path: p}
	f, err := elf.Open(p)
	if err != nil {
		return n, fmt.Errorf("read node %s: %w", p, err)
	}
	switch f.Machine {
	case elf.EM_X86_64:
		n.Arch = "amd64"
	case elf.EM_AARCH64:
		n.Arch = "arm64"
	default:
		n.Arch = f.Machine.String()
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			b, _ := io.ReadAll(prog.Open())
			n.Interp = string(bytes.TrimRight(b, "\x00"))
		}
	}
	f.Close()
	if n.Arch != target.Arch {
		return n, fmt.Errorf("%w: node %s is %s, target %s", ErrUnsupported, p, n.Arch, target)
	}
	if strings.Contains(n.Interp, "musl") != (target.Libc == "musl") {
		return n, fmt.Errorf("%w: node %s uses loader %q, target %s", ErrUnsupported, p, n.Interp, target)
	}
	out, err := exec.Command(p, "--version").Output()
	if err != nil {
		return n, fmt.Errorf("node --version: %w", err)
	}
	n.Version = strings.TrimSpace(string(out))
	m := nodeVersionRe.FindStringSubmatch(n.Version)
	if m == nil {
		return n, fmt.Errorf("node --version printed %q", n.Version)
	}
	var v [3]int
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	if v[0] < MinNode[0] || v[0] == MinNode[0] && (v[1] < MinNode[1] || v[1] == MinNode[1] && v[2] < MinNode[2]) {
		return n, fmt.Errorf("%w: node %s is %s, pi needs >= %d.%d.%d", ErrUnsupported, p, n.Version, MinNode[0], MinNode[1], MinNode[2])
	}
	return n, nil
}

func copyFile(src, dst string, mode os.FileMode) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	sum, _, err := hashFile(dst)
	return sum, err
}
