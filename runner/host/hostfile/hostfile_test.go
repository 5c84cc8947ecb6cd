package hostfile_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sandproof/sandproof/runner/host/hostfile"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "host-secret")
	marker := []byte("host-marker-7f3a")
	os.WriteFile(secret, marker, 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(secret, link)
	// Positive control: a following read of the link gets the marker.
	if b, err := os.ReadFile(link); err != nil || !bytes.Equal(b, marker) {
		t.Fatalf("positive control: %q %v", b, err)
	}
	if b, err := hostfile.ReadFile(link, 1<<20); !errors.Is(err, hostfile.ErrNotRegular) || len(b) != 0 {
		t.Errorf("link: %q %v, want ErrNotRegular and nothing", b, err)
	}
	zero := filepath.Join(dir, "zero")
	os.Symlink("/dev/zero", zero)
	if _, err := hostfile.ReadFile(zero, 1<<20); !errors.Is(err, hostfile.ErrNotRegular) {
		t.Errorf("link to /dev/zero: %v", err)
	}
	if _, err := hostfile.ReadFile("/dev/zero", 1<<20); !errors.Is(err, hostfile.ErrNotRegular) {
		t.Errorf("/dev/zero itself: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := hostfile.ReadFile(fifo, 1<<20); !errors.Is(err, hostfile.ErrNotRegular) {
		t.Errorf("fifo (would block a plain open): %v", err)
	}
	if b, err := hostfile.ReadFile(secret, 4); !errors.Is(err, hostfile.ErrTooLarge) || string(b) != "host" {
		t.Errorf("cap 4: %q %v", b, err)
	}
	if b, err := hostfile.ReadFile(secret, 1<<20); err != nil || !bytes.Equal(b, marker) {
		t.Errorf("regular file: %q %v", b, err)
	}
}
