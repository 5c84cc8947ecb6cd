package runtimes

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandproof/sandproof/runner/host/artifact"
)

// mkTree makes a tree under a fresh dir: name -> content, or "->TARGET"
// for a link; a name ending in "*" is an executable (the "*" dropped).
func mkTree(t *testing.T, entries map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, c := range entries {
		mode := os.FileMode(0o644)
		if name[len(name)-1] == '*' {
			name, mode = name[:len(name)-1], 0o755
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if len(c) > 2 && c[:2] == "->" {
			if err := os.Symlink(c[2:], p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(c), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TreeSum pins the npm part of a runtime (the manifests' tree_sha256):
// its lines are "KIND PATH DETAIL", and a link's line read two ways when
// its path held a space ("l a b c": a -> "b c", or "a b" -> c) or its
// target a newline (a second entry forged inside one target). Such lines
// are quoted now, so two trees never share a sum; every other line is
// what it was, so every pinned sum holds (the tree below hashed to the
// constant on main too).
func TestTreeSumIsInjectiveAndKeepsThePins(t *testing.T) {
	pinned := mkTree(t, map[string]string{"bin/tool*": "#!/bin/sh\n", "lib/a b.js": "x", "package.json": "{}", "lib/l": "->a b.js"})
	sum, files, _, err := TreeSum(pinned, nil)
	if err != nil {
		t.Fatal(err)
	}
	const wasOnMain = "0706602f73dea9db10cdf24571b86885e5e7b36d32eb0b5ebdda1336e49c306d"
	if sum != wasOnMain || files != 3 {
		t.Errorf("a tree without an ambiguous line hashes %s (%d files), want %s as before: every manifest's pin would break", sum, files, wasOnMain)
	}
	for _, p := range []struct {
		name          string
		honest, forge map[string]string
	}{
		{"a link's path with a space", map[string]string{"a b": "->c"}, map[string]string{"a": "->b c"}},
		{"a link's target forging the next entry", map[string]string{"l": "->x", "m": "data"},
			map[string]string{"l": "->x\nf m 3a6eb0790f39ac87c94f3856b2dd2c5d110e6811602261a9a923d3bb23adc8b7"}},
	} {
		h, _, _, err := TreeSum(mkTree(t, p.honest), nil)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		f, _, _, err := TreeSum(mkTree(t, p.forge), nil)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		if h == f {
			t.Errorf("%s: two trees, one sum %s", p.name, h)
		}
	}
	// A path with a newline is refused as the package's own fault.
	if _, _, _, err := TreeSum(mkTree(t, map[string]string{"a\nf b": "x"}), nil); !errors.Is(err, artifact.ErrRefused) {
		t.Errorf("a path with a newline: %v, want artifact.ErrRefused", err)
	}
}
