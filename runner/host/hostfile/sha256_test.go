package hostfile_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandproof/sandproof/runner/host/hostfile"
)

// SHA256File hashes a file sandproof chose as os.Open reads it: a link is
// followed (unlike Open), and a missing file is the os error callers
// record as it reads.
func TestSHA256File(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	const abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	for _, name := range []string{p, link} {
		sum, n, err := hostfile.SHA256File(name)
		if err != nil || sum != abc || n != 3 {
			t.Errorf("SHA256File(%s) = %q, %d, %v; want %q, 3, nil", name, sum, n, err, abc)
		}
	}
	missing := filepath.Join(dir, "missing")
	if _, _, err := hostfile.SHA256File(missing); !errors.Is(err, fs.ErrNotExist) || err.Error() != "open "+missing+": no such file or directory" {
		t.Errorf("SHA256File of a missing file: %v, want os.Open's error", err)
	}
}
