package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// leftovers lists dir's entries other than want.
func leftovers(t *testing.T, dir, want string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.Name() != want {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestWritePublishesTheContentWithItsModeAndNoTemporaryFile(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "report.md")
	if err := os.WriteFile(path, []byte("the old content, longer than the new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new\n"), 0o644); err != nil {
		t.Fatalf("Write: %v", err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "new\n" {
		t.Errorf("content %q, want %q", got, "new\n")
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v under umask 077, want 0644", st.Mode().Perm())
	}
	if l := leftovers(t, dir, "report.md"); len(l) > 0 {
		t.Errorf("left behind: %q", l)
	}
}

func TestWriteFuncKeepsTheOldFileWhenRenderFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "evidence.jsonl")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("render failed")
	err := WriteFunc(path, 0o644, func(w io.Writer) error {
		if _, err := io.WriteString(w, "half"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("WriteFunc: %v, want the render's error", err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "old\n" {
		t.Errorf("content %q after a failed render, want the old %q", got, "old\n")
	}
	if l := leftovers(t, dir, "evidence.jsonl"); len(l) > 0 {
		t.Errorf("left behind: %q", l)
	}
}

// The directory is fsynced after the rename: when syncDir runs, the new
// name already holds the new content.
func TestWriteSyncsTheDirectoryAfterTheRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "claim")
	var synced []string
	var seen string
	orig := syncDir
	syncDir = func(d string) error {
		synced = append(synced, d)
		b, _ := os.ReadFile(path)
		seen = string(b)
		return orig(d)
	}
	defer func() { syncDir = orig }()
	if err := Write(path, []byte("x"), 0o600); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if len(synced) != 1 || synced[0] != dir {
		t.Fatalf("directories synced: %q, want [%q]", synced, dir)
	}
	if seen != "x" {
		t.Errorf("at the directory sync the file held %q, want %q (renamed first)", seen, "x")
	}
}

func TestWriteReturnsTheDirectorySyncError(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	orig := syncDir
	fail := errors.New("EIO on the directory")
	syncDir = func(string) error { return fail }
	defer func() { syncDir = orig }()
	err := Write(path, []byte("x"), 0o600)
	if !errors.Is(err, fail) || !strings.Contains(err.Error(), `"`+path+`"`) {
		t.Fatalf("Write: %v, want the sync error naming %q", err, path)
	}
}

func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := SyncDir(dir); err != nil {
		t.Fatalf("SyncDir(%q): %v", dir, err)
	}
	missing := filepath.Join(dir, "missing")
	err := SyncDir(missing)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), `"`+missing+`"`) {
		t.Fatalf("SyncDir(%q): %v, want a not-exist error quoting the directory", missing, err)
	}
}

func TestWriteSyncedOverwritesInPlaceAndCuts(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".receipt.reserve")
	if err := os.WriteFile(path, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteSynced(path, []byte("{}\n"), os.O_WRONLY, 0o600); err != nil {
		t.Fatalf("WriteSynced: %v", err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "{}\n" {
		t.Errorf("content %q, want %q", got, "{}\n")
	}
	if err := WriteSynced(filepath.Join(filepath.Dir(path), "new"), nil, os.O_WRONLY, 0o600); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("WriteSynced without O_CREATE on a missing file: %v, want not-exist", err)
	}
}
