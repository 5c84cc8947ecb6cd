package artifact

import (
	"archive/tar"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A link of the archive to a regular file of the same archive becomes a
// copy of that file (a chain too, in any order), and the tree holds no
// link.
func TestUntarCopyingLinksCopiesInArchiveLinks(t *testing.T) {
	tr, dir := newTree(t, roomy)
	err := UntarCopyingLinks(tarOf(t,
		tarEntry{name: "lib/libz.so.1", typ: tar.TypeSymlink, link: "libz.so.1.3"},
		tarEntry{name: "lib/libz.so", typ: tar.TypeSymlink, link: "libz.so.1"},
		tarEntry{name: "lib/libz.so.1.3", typ: tar.TypeReg, mode: 0o755, body: "zlib"},
		tarEntry{name: "bin/z", typ: tar.TypeSymlink, link: "../lib/./libz.so.1.3"},
	), tr, keep)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"d bin", "f bin/z -rwxr-xr-x", "d lib", "f lib/libz.so -rwxr-xr-x", "f lib/libz.so.1 -rwxr-xr-x", "f lib/libz.so.1.3 -rwxr-xr-x"}
	if got := entries(t, dir); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("tree %v, want %v", got, want)
	}
	for _, n := range []string{"bin/z", "lib/libz.so", "lib/libz.so.1"} {
		if b, _ := os.ReadFile(filepath.Join(dir, n)); string(b) != "zlib" {
			t.Errorf("%s holds %q, want a copy of lib/libz.so.1.3", n, b)
		}
	}
}

// A link pointing out of the tree, to nothing, to a directory, to what
// the tree leaves out or to a file another archive wrote is refused,
// naming it, and nothing is written outside the tree.
func TestUntarCopyingLinksRefusesLinksOut(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := tarEntry{name: "a/f", typ: tar.TypeReg, body: "f"}
	dirE := tarEntry{name: "a/d/", typ: tar.TypeDir, mode: 0o755}
	for _, tc := range []struct {
		what string
		es   []tarEntry
	}{
		{"an absolute target", []tarEntry{{name: "a/l", typ: tar.TypeSymlink, link: secret}}},
		{"a target out of the archive", []tarEntry{{name: "a/l", typ: tar.TypeSymlink, link: "../../" + secret}}},
		{"a target just above the root", []tarEntry{{name: "l", typ: tar.TypeSymlink, link: "../x"}}},
		{"a missing target", []tarEntry{file, {name: "a/l", typ: tar.TypeSymlink, link: "g"}}},
		{"a directory", []tarEntry{dirE, {name: "a/l", typ: tar.TypeSymlink, link: "d"}}},
		{"a left-out target", []tarEntry{{name: "a/skip", typ: tar.TypeReg, body: "s"}, {name: "a/l", typ: tar.TypeSymlink, link: "skip"}}},
		{"a loop", []tarEntry{{name: "a/l", typ: tar.TypeSymlink, link: "m"}, {name: "a/m", typ: tar.TypeSymlink, link: "l"}}},
		{"a hard link", []tarEntry{file, {name: "a/h", typ: tar.TypeLink, link: "a/f"}}},
	} {
		tr, dir := newTree(t, roomy)
		drop := func(n string) string {
			if n == "a/skip" {
				return ""
			}
			return n
		}
		err := UntarCopyingLinks(tarOf(t, tc.es...), tr, drop)
		named := false
		for _, e := range tc.es {
			named = named || e.typ != tar.TypeReg && e.typ != tar.TypeDir && strings.Contains(fmt.Sprint(err), strconv.Quote(e.name))
		}
		if !errors.Is(err, ErrRefused) || !named {
			t.Errorf("%s: %v, want refused naming the link", tc.what, err)
		}
		for _, e := range entries(t, dir) {
			if strings.HasPrefix(e, "f a/l") || strings.HasPrefix(e, "? ") {
				t.Errorf("%s: the tree holds %s", tc.what, e)
			}
		}
	}
	// Positive control: the same tree takes a link to a file of its archive.
	tr, _ := newTree(t, roomy)
	if err := UntarCopyingLinks(tarOf(t, file, tarEntry{name: "a/l", typ: tar.TypeSymlink, link: "f"}), tr, keep); err != nil {
		t.Errorf("a link to a file of the archive: %v", err)
	}
	// A file written by an earlier archive into the same tree is not this
	// archive's: refused.
	if err := UntarCopyingLinks(tarOf(t, tarEntry{name: "a/l2", typ: tar.TypeSymlink, link: "f"}), tr, keep); !errors.Is(err, ErrRefused) {
		t.Errorf("a link to another archive's file: %v, want refused", err)
	}
	// Untar itself still refuses every link.
	tr, _ = newTree(t, roomy)
	if err := Untar(tarOf(t, file, tarEntry{name: "a/l", typ: tar.TypeSymlink, link: "f"}), tr, keep); !errors.Is(err, ErrRefused) {
		t.Errorf("Untar of a link: %v, want refused", err)
	}
}

// Copies count against the tree's caps: many links to one big file
// cannot fill the disk.
func TestUntarCopyingLinksCountsCopies(t *testing.T) {
	es := []tarEntry{{name: "big", typ: tar.TypeReg, body: strings.Repeat("x", 10)}}
	for _, n := range []string{"l1", "l2", "l3"} {
		es = append(es, tarEntry{name: n, typ: tar.TypeSymlink, link: "big"})
	}
	tr, _ := newTree(t, Limits{FileBytes: 10, TotalBytes: 35, Entries: 100})
	if err := UntarCopyingLinks(tarOf(t, es...), tr, keep); !errors.Is(err, ErrRefused) {
		t.Errorf("40 bytes of copies with a cap of 35: %v, want refused", err)
	}
	tr, _ = newTree(t, Limits{FileBytes: 10, TotalBytes: 40, Entries: 100})
	if err := UntarCopyingLinks(tarOf(t, es...), tr, keep); err != nil {
		t.Errorf("40 bytes of copies with a cap of 40: %v", err)
	}
	tr, _ = newTree(t, Limits{FileBytes: 10, TotalBytes: 100, Entries: 3})
	if err := UntarCopyingLinks(tarOf(t, es...), tr, keep); !errors.Is(err, ErrRefused) {
		t.Errorf("4 entries with a cap of 3: %v, want refused", err)
	}
}
