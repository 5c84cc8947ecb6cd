// Package testimage imports tiny busybox-only images for the tests that
// need a real container but no registry: a rootfs made here from the
// host's static busybox, piped to `docker import`.
package testimage

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
)

// ErrNoStaticBusybox means the host has no statically linked busybox on
// PATH to put in the image (Debian's busybox-static has one).
var ErrNoStaticBusybox = errors.New("no static busybox on PATH")

// Import imports rootfs as ref for tb, once (see ImportBusybox). Without a
// static busybox on the host it skips tb (fails it under
// SANDPROOF_STRICT=1); any other error fails tb.
func Import(tb testing.TB, ref string, rootfs Rootfs) {
	tb.Helper()
	err := ImportBusybox(ref, rootfs)
	if errors.Is(err, ErrNoStaticBusybox) {
		testenv.Package(tb, fmt.Sprintf("a static busybox for the test image %s (%v)", ref, err), "busybox-static")
	}
	if err != nil {
		tb.Fatalf("import the busybox test image %s: %v", ref, err)
	}
}

// Rootfs is what goes into the image besides /bin/busybox. Paths are
// relative to the root.
type Rootfs struct {
	// Dirs are made with their mode (and their missing parents).
	Dirs map[string]os.FileMode
	// Applets are links to busybox in /bin: only these commands exist.
	Applets []string
	// Files hold their content, mode 0644.
	Files map[string]string
}

// ImportBusybox imports rootfs as ref, once: an image the engine already
// has under ref is left as it is (change ref when rootfs changes).
func ImportBusybox(ref string, rootfs Rootfs) error {
	if exec.Command("docker", "image", "inspect", ref).Run() == nil {
		return nil
	}
	bb, err := staticBusybox()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "busybox-rootfs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	for d, mode := range rootfs.Dirs {
		os.MkdirAll(filepath.Join(dir, d), mode)
	}
	for f, content := range rootfs.Files {
		os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644)
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bin/busybox"), data, 0o755); err != nil {
		return err
	}
	for _, a := range rootfs.Applets {
		os.Symlink("busybox", filepath.Join(dir, "bin", a))
	}
	cmd := exec.Command("sh", "-c", `tar -C "$1" -c . | docker import -c 'ENV PATH=/bin' - "$2"`, "sh", dir, ref)
	if out, err := cmd.CombinedOutput(); err != nil {
		return errors.New(string(out))
	}
	return nil
}

// staticBusybox finds busybox on PATH and checks that it has no ELF
// interpreter: the image has no libc for a dynamic one to load.
func staticBusybox() (string, error) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoStaticBusybox, err)
	}
	f, err := elf.Open(bb)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrNoStaticBusybox, bb, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("%w: %s is dynamically linked", ErrNoStaticBusybox, bb)
		}
	}
	return bb, nil
}
