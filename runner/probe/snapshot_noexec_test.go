package probe

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// With NoExec a tool is found and hashed but never run: a stand-in that
// records its runs stays silent, while the same snapshot without NoExec runs
// it (the positive control).
func TestSnapshotNoExecRunsNothing(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "ran")
	script := "#!/bin/sh\necho ran >> " + log + "\necho 'Python 3.0.0'\n"
	if err := os.WriteFile(filepath.Join(dir, "python3"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := Take(context.Background(), Options{Path: dir, NoExec: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Python3.Path != filepath.Join(dir, "python3") || s.Python3.SHA256 == "" || s.Python3.Version != "" {
		t.Fatalf("no-exec python3 = %+v, want path and hash, no version", s.Python3)
	}
	if _, err := os.Stat(log); err == nil {
		t.Fatal("the stand-in ran under NoExec")
	}
	s, err = Take(context.Background(), Options{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(log); err != nil || s.Python3.Version == "" {
		t.Fatalf("positive control: the stand-in did not run without NoExec (%v, version %q)", err, s.Python3.Version)
	}
}
