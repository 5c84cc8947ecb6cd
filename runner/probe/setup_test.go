package probe

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestSetupMakesOwnedDirsAndFreshMarkers(t *testing.T) {
	root := t.TempDir()
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 1000, 1000
	}
	existing := filepath.Join(root, "home", "existing")
	if err := os.MkdirAll(existing, 0o711); err != nil {
		t.Fatal(err)
	}
	task := filepath.Join(root, "task")
	mdir := filepath.Join(root, "home", ".config", "owner")
	marker := filepath.Join(mdir, "marker")
	o := SetupOptions{Dirs: []string{task, existing, filepath.Dir(mdir), mdir}, Markers: []string{marker}, UID: uid, GID: gid}
	if err := Setup(o); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{task, filepath.Dir(mdir), mdir} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || fi.Mode().Perm() != 0o755 || int(st.Uid) != uid || int(st.Gid) != gid {
			t.Errorf("%s: mode %v owner %d:%d, want a dir 0755 %d:%d", d, fi.Mode(), st.Uid, st.Gid, uid, gid)
		}
	}
	if fi, err := os.Stat(existing); err != nil || fi.Mode().Perm() != 0o711 {
		t.Errorf("existing dir changed: %v, %v", fi.Mode(), err)
	}
	first := readMarker(context.Background(), marker, MaxMarkerBytes)
	if first.Missing || first.Error != "" || first.Size == 0 {
		t.Fatalf("marker = %+v", first)
	}
	// A second setup writes new random content: a marker proves nothing
	// if it could be guessed.
	if err := Setup(SetupOptions{Markers: []string{marker}, UID: uid, GID: gid}); err != nil {
		t.Fatal(err)
	}
	if again := readMarker(context.Background(), marker, MaxMarkerBytes); again.SHA256 == first.SHA256 {
		t.Errorf("marker content not fresh: %s twice", again.SHA256)
	}
}

func TestSetupRefusesSymlinkedMarkerAndFileAsDir(t *testing.T) {
	root := t.TempDir()
	target := filepath.Join(root, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "marker")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := Setup(SetupOptions{Markers: []string{link}, UID: os.Getuid(), GID: os.Getgid()}); err == nil {
		t.Error("setup followed a symlink at a marker's path")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("symlink target overwritten: %q", b)
	}
	if err := Setup(SetupOptions{Dirs: []string{filepath.Join(target, "sub")}}); err == nil {
		t.Error("setup made a dir under a regular file")
	}
}

func TestSetupWritesSecretReplacingWhatWasThere(t *testing.T) {
	root := t.TempDir()
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 1000, 1000 // the owner is not the writer, as in a case
	}
	target := filepath.Join(root, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(root, "task", "challenge.txt")
	if err := os.MkdirAll(filepath.Dir(secret), 0o755); err != nil {
		t.Fatal(err)
	}
	// A link at the secret's path is replaced, never written through.
	if err := os.Symlink(target, secret); err != nil {
		t.Fatal(err)
	}
	if err := Setup(SetupOptions{UID: uid, GID: gid, Secret: secret, SecretData: []byte("CHALLENGE-1\n")}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(secret)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o400 || int(st.Uid) != uid || int(st.Gid) != gid {
		t.Errorf("secret: mode %v owner %d:%d, want a regular file 0400 %d:%d", fi.Mode(), st.Uid, st.Gid, uid, gid)
	}
	if b, err := os.ReadFile(secret); err != nil || string(b) != "CHALLENGE-1\n" {
		t.Errorf("secret = %q, %v", b, err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("link target overwritten: %q", b)
	}
	// A second setup replaces the first secret (mode 0400 does not stop it).
	if err := Setup(SetupOptions{UID: uid, GID: gid, Secret: secret, SecretData: []byte("CHALLENGE-2\n")}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(secret, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "CHALLENGE-2\n" {
		t.Errorf("secret after a second setup = %q, want the new content", b)
	}
	if err := Setup(SetupOptions{Secret: "relative", SecretData: []byte("x")}); err == nil {
		t.Error("setup wrote a secret at a relative path")
	}
}
