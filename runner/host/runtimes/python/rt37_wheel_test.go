package python

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/artifact"
)

// Class A: the host-side compile runs nothing a wheel ships: a .pth,
// sitecustomize/usercustomize, a module named as a codec with a source
// declaring that coding, a shipped __pycache__ for a module: none writes
// its marker on the host.
func TestRT37PrecompileRunsNothingOfAWheel(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "ran")
	code := "open(" + "'" + mark + "', 'a').write('x')\n"
	w := wheelBytes(t,
		wheelFile{name: "x/__init__.py", data: ""},
		wheelFile{name: "evil.pth", data: "import os; " + code},
		wheelFile{name: "sitecustomize.py", data: code},
		wheelFile{name: "usercustomize.py", data: code},
		wheelFile{name: "evilcodec.py", data: code},
		wheelFile{name: "encodings/evilcodec.py", data: code},
		wheelFile{name: "x/coded.py", data: "# -*- coding: evilcodec -*-\nX = 1\n"},
		wheelFile{name: "x/__pycache__/coded.cpython-313.pyc", data: "not bytecode"},
		wheelFile{name: "compileall.py", data: code},
		wheelFile{name: "concurrent/__init__.py", data: code},
	)
	root := rt37Site(t, w)
	got := precompile(context.Background(), root)
	t.Logf("precompile: %s", got)
	if _, err := os.Stat(mark); err == nil {
		t.Errorf("BROKE: the host-side compile ran the wheel's code")
	}
}

// Two wheels of one tree: the second replaces a file of the first (the
// harness's own module), and a file where the other has a directory is
// refused.
func TestRT37WheelsAcrossOneTree(t *testing.T) {
	site := filepath.Join(t.TempDir(), "site")
	tr, err := artifact.Create(site, wheelLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	put := func(files ...wheelFile) error {
		w := wheelBytes(t, files...)
		ix, _ := index(t, "x-1.0-py3-none-any.whl", w)
		_, err := installWheel(context.Background(), ix, Requirement{Name: "x", Version: "1.0", Hashes: []string{sum(w)}}, cp313, t.TempDir(), tr)
		return err
	}
	if err := put(wheelFile{name: "harness/__init__.py", data: "HONEST = 1\n"}, wheelFile{name: "dep/sub/a.py", data: ""}); err != nil {
		t.Fatal(err)
	}
	err = put(wheelFile{name: "harness/__init__.py", data: "HONEST = 0\n"})
	b, _ := os.ReadFile(filepath.Join(site, "harness", "__init__.py"))
	t.Logf("a dependency's wheel with the harness's module: %v; the tree's harness/__init__.py: %q", err, strings.TrimSpace(string(b)))
	if err == nil && strings.Contains(string(b), "HONEST = 0") {
		t.Logf("WEAK: a later wheel silently replaces an earlier wheel's file (pip warns of nothing either; the tree sum records the result)")
	}
	err = put(wheelFile{name: "dep/sub", data: "file where a dir is"})
	t.Logf("a file where another wheel's dir is: %v", err)
	if !errors.Is(err, artifact.ErrRefused) {
		t.Errorf("a file over another wheel's directory: %v, want refused", err)
	}
}
