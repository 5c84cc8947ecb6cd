// Package testimage imports tiny busybox-only images for the tests that
// need a real container but no registry: a rootfs made here from the
// host's static busybox, piped to `docker import`.
package testimage

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
)

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
	bb, err := exec.LookPath("busybox")
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
