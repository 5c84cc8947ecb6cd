package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Check refuses a proc root that lists no process, and accepts one whose
// only pid comes after more names than one read of the directory returns.
func TestCheckNeedsOnePID(t *testing.T) {
	root := t.TempDir()
	for i := 0; i < 2000; i++ {
		if err := os.Mkdir(filepath.Join(root, fmt.Sprintf("entry-with-a-long-name-%04d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := NewFS(root).Check(); err == nil {
		t.Fatal("a proc root without a pid passed the check")
	}
	if err := os.Mkdir(filepath.Join(root, "4242"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := NewFS(root).Check(); err != nil {
		t.Fatalf("a proc root with a pid failed the check: %v", err)
	}
	if err := NewFS(filepath.Join(root, "missing")).Check(); err == nil {
		t.Fatal("a missing proc root passed the check")
	}
}
