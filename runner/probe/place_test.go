package probe

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Place is how a session's seed puts warden into its bin/ from the owner's
// volume: the bytes of src at dst, executable whatever the umask, dst
// replaced (a link there replaced, never written through), and only a
// regular src copied.
func TestPlaceCopiesExecutableReplacingWhatWasThere(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	data := bytes.Repeat([]byte("warden\x00"), 100000) // several copy buffers
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)

	dst := filepath.Join(dir, "bin-warden")
	if err := os.WriteFile(dst, []byte("an older file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Place(src, dst); err != nil {
		t.Fatalf("place over a file: %v", err)
	}
	checkPlaced(t, dst, data)

	// A link at dst is replaced by the copy; its target keeps its bytes.
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(dir, "linked")
	if err := os.Symlink(target, linked); err != nil {
		t.Fatal(err)
	}
	if err := Place(src, linked); err != nil {
		t.Fatalf("place over a link: %v", err)
	}
	checkPlaced(t, linked, data)
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the link's target was written through: %q", b)
	}
	// Nothing of the copy is left beside dst.
	ents, _ := os.ReadDir(dir)
	if len(ents) != 4 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("dir holds %q, want bin-warden, linked, src and target, no temporary file", names)
	}
}

func checkPlaced(t *testing.T, dst string, want []byte) {
	t.Helper()
	fi, err := os.Lstat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o755 {
		t.Errorf("%s: mode %v, want a regular file 0755", dst, fi.Mode())
	}
	if b, _ := os.ReadFile(dst); !bytes.Equal(b, want) {
		t.Errorf("%s: %d bytes, not the source's %d", dst, len(b), len(want))
	}
}

func TestPlaceRefusesLinksFifosAndRelativePaths(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, []byte("w"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(src, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "dst")
	for _, c := range []struct{ name, src, dst string }{
		{"a link as source", link, dst},
		{"a fifo as source (not waited on)", fifo, dst},
		{"a missing source", filepath.Join(dir, "none"), dst},
		{"a relative source", "src", dst},
		{"a relative destination", src, "dst"},
		{"a directory as destination", src, dir},
	} {
		if err := Place(c.src, c.dst); err == nil {
			t.Errorf("%s: placed, want an error", c.name)
		}
	}
	if _, err := os.Lstat(dst); err == nil {
		t.Errorf("a refused place left %s behind", dst)
	}
}
