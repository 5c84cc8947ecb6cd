package npm

import (
	"archive/tar"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandproof/sandproof/runner/host/artifact"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// What a harness's own package (or the manifest that pins it) causes at
// prepare is artifact.ErrRefused, so sandproof exits 2: on main each of
// these was a plain error, exit 3 ("infrastructure"), and CI retried the
// engine for a package that can never prepare. The red team's tarballs
// with a file and a directory of one name failed with the system's
// "openat d: file exists".
func TestPrepareRefusesWhatThePackageCauses(t *testing.T) {
	for name, es := range map[string][]tarEntry{
		"a file, then a directory of its name": {{name: "package/d", typ: tar.TypeReg, body: "x"}, {name: "package/d/", typ: tar.TypeDir, mode: 0o755}},
		"a directory, then a file of its name": {{name: "package/d/", typ: tar.TypeDir, mode: 0o755}, {name: "package/d", typ: tar.TypeReg, body: "x"}},
		"a file, then a file under it":         {{name: "package/d", typ: tar.TypeReg, body: "x"}, {name: "package/d/e", typ: tar.TypeReg, body: "x"}},
		"a name with a newline":                {{name: "package/a\nf b", typ: tar.TypeReg, body: "x"}},
	} {
		err := extractPackage(writeTgz(t, es), filepath.Join(t.TempDir(), "o"))
		if !errors.Is(err, artifact.ErrRefused) {
			t.Errorf("tarball with %s: %v, want refused", name, err)
		}
	}
	notGzip := filepath.Join(t.TempDir(), "p.tgz")
	if err := os.WriteFile(notGzip, []byte("not a gzip stream"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := extractPackage(notGzip, filepath.Join(t.TempDir(), "o")); !errors.Is(err, artifact.ErrRefused) {
		t.Errorf("a tarball that is no gzip stream: %v, want refused", err)
	}

	pkg := t.TempDir()
	if err := os.WriteFile(filepath.Join(pkg, "package.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := prune(pkg, []string{"bin/missing"}); !errors.Is(err, artifact.ErrRefused) {
		t.Errorf("a keep path the package lacks: %v, want refused", err)
	}
	if err := placeEntryBin("bin/missing", pkg, runtimes.HostTarget(), t.TempDir(), map[string]any{}); !errors.Is(err, artifact.ErrRefused) {
		t.Errorf("an entry.bin the package lacks: %v, want refused", err)
	}
}
