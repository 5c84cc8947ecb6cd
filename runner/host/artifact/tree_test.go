package artifact

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

var roomy = Limits{FileBytes: 1 << 20, TotalBytes: 4 << 20, Entries: 100}

func newTree(t *testing.T, lim Limits) (*Tree, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tree")
	tr, err := Create(dir, lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, dir
}

// entries lists what is under dir, as "d name", "f name MODE" or "? name".
func entries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch fi, _ := d.Info(); {
		case d.IsDir():
			out = append(out, "d "+rel)
		case d.Type().IsRegular():
			out = append(out, "f "+rel+" "+fi.Mode().Perm().String())
		default:
			out = append(out, "? "+rel)
		}
		return nil
	})
	return out
}

func TestTreeRefusesNamesOutsideIt(t *testing.T) {
	for _, name := range []string{"../x", "a/../../x", "/etc/x", "a//b", "a/./b", ".", "", "a/", "x\x00y",
		"a\nf b", "a\tb", "a/\x1b[2Jb", "a\x7f", "a\rb"} {
		tr, dir := newTree(t, roomy)
		if err := tr.WriteFile(name, false, 1, strings.NewReader("x")); !errors.Is(err, ErrRefused) {
			t.Errorf("WriteFile(%q) = %v, want refused", name, err)
		}
		if err := tr.Mkdir(name); !errors.Is(err, ErrRefused) {
			t.Errorf("Mkdir(%q) = %v, want refused", name, err)
		}
		if got := entries(t, dir); len(got) != 0 {
			t.Errorf("%q: the tree holds %v", name, got)
		}
		if _, err := os.Lstat(filepath.Join(filepath.Dir(dir), "x")); err == nil {
			t.Errorf("%q: a file was written beside the tree", name)
		}
	}
}

// A link that got into the tree (it never comes from an artifact, but a
// race or a bug could put one there) is not followed out of it.
func TestTreeFollowsNoLinkOut(t *testing.T) {
	tr, dir := newTree(t, roomy)
	out := t.TempDir()
	if err := os.Symlink(out, filepath.Join(dir, "lnk")); err != nil {
		t.Fatal(err)
	}
	// Positive control: a plain write through the link lands outside.
	if err := os.WriteFile(filepath.Join(dir, "lnk", "probe"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(out, "probe"))
	if err := tr.WriteFile("lnk/x", false, 1, strings.NewReader("x")); err == nil {
		t.Error("WriteFile through a link out of the tree succeeded")
	}
	if err := tr.Mkdir("lnk/d"); err == nil {
		t.Error("Mkdir through a link out of the tree succeeded")
	}
	if got, _ := os.ReadDir(out); len(got) != 0 {
		t.Errorf("written outside the tree: %v", got)
	}
}

func TestTreeWritesFilesAndDirs(t *testing.T) {
	tr, dir := newTree(t, roomy)
	for _, step := range []error{
		tr.Mkdir("a/b"),
		tr.WriteFile("a/b/run", true, 3, strings.NewReader("run")),
		tr.WriteFile("c/doc", false, 3, strings.NewReader("one")),
		tr.WriteFile("c/doc", false, 3, strings.NewReader("two")), // the last copy wins
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	want := []string{"d a", "d a/b", "f a/b/run -rwxr-xr-x", "d c", "f c/doc -rw-r--r--"}
	if got := entries(t, dir); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("tree %v, want %v", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "c", "doc")); string(b) != "two" {
		t.Errorf("c/doc holds %q, want the last copy", b)
	}
	if err := tr.WriteFile("a", false, 1, strings.NewReader("x")); err == nil {
		t.Error("a file over a directory was written")
	}
}

// The caps are decided on the declared size, before a byte is written;
// a reader that yields more than declared, or less, is refused.
func TestTreeCaps(t *testing.T) {
	lim := Limits{FileBytes: 10, TotalBytes: 25, Entries: 4}
	tr, dir := newTree(t, lim)
	if err := tr.WriteFile("big", false, 11, strings.NewReader(strings.Repeat("x", 11))); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "per file") {
		t.Errorf("11 bytes with a cap of 10: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "big")); err == nil {
		t.Error("the file over the cap was created")
	}
	for _, n := range []string{"a", "b"} {
		if err := tr.WriteFile(n, false, 10, strings.NewReader(strings.Repeat("x", 10))); err != nil {
			t.Fatalf("%s at the file cap: %v", n, err)
		}
	}
	if err := tr.WriteFile("c", false, 6, strings.NewReader("xxxxxx")); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "over its cap of 25") {
		t.Errorf("26 bytes in all with a cap of 25: %v", err)
	}
	if err := tr.WriteFile("c", false, 5, strings.NewReader("xxxxx")); err != nil {
		t.Errorf("25 bytes in all with a cap of 25: %v", err)
	}
	if err := tr.Mkdir("d"); err != nil {
		t.Errorf("the 4th entry with a cap of 4: %v", err)
	}
	if err := tr.Mkdir("e"); !errors.Is(err, ErrRefused) {
		t.Errorf("the 5th entry with a cap of 4: %v", err)
	}

	tr, dir = newTree(t, roomy)
	if err := tr.WriteFile("liar", false, 4, strings.NewReader("more than four")); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "more than the 4 bytes") {
		t.Errorf("a reader yielding more than declared: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "liar")); len(b) > 4 {
		t.Errorf("wrote %d bytes past the declared 4", len(b))
	}
	if err := tr.WriteFile("short", false, 4, strings.NewReader("ab")); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a reader yielding less than declared: %v", err)
	}
}

type tarEntry struct {
	name string
	typ  byte
	mode int64
	body string
	size int64 // declared; len(body) when 0
	link string
}

func tarOf(t *testing.T, es ...tarEntry) *bytes.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.body)), Linkname: e.link, Format: tar.FormatPAX}
		if e.size != 0 {
			h.Size = e.size
		}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(buf.Bytes())
}

func keep(n string) string { return n }

// An archive makes directories and regular files only: a symbolic link,
// a hard link, a device or a fifo is refused, naming it, and nothing of
// it is made.
func TestUntarMakesOnlyFilesAndDirs(t *testing.T) {
	tr, dir := newTree(t, roomy)
	if err := Untar(tarOf(t, tarEntry{name: "d/", typ: tar.TypeDir, mode: 0o755},
		tarEntry{name: "d/x", typ: tar.TypeReg, mode: 0o4755, body: "x"}), tr, keep); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, dir); strings.Join(got, "|") != "d d|f d/x -rwxr-xr-x" {
		t.Errorf("tree %v: want d and d/x 0755 (no setuid)", got)
	}
	for _, e := range []tarEntry{
		{name: "l", typ: tar.TypeSymlink, link: "/etc/passwd"},
		{name: "h", typ: tar.TypeLink, link: "d/x"},
		{name: "c", typ: tar.TypeChar},
		{name: "b", typ: tar.TypeBlock},
		{name: "f", typ: tar.TypeFifo},
	} {
		tr, dir := newTree(t, roomy)
		err := Untar(tarOf(t, e), tr, keep)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `"`+e.name+`"`) {
			t.Errorf("entry of type %q: %v, want refused naming it", e.typ, err)
		}
		if got := entries(t, dir); len(got) != 0 {
			t.Errorf("entry of type %q: the tree holds %v", e.typ, got)
		}
	}
}

// What an archive declares counts against the tree's bytes before it is
// read, entries left out included: a stream of left-out entries cannot
// make the reader decompress without end.
func TestUntarCountsWhatItLeavesOut(t *testing.T) {
	tr, _ := newTree(t, Limits{FileBytes: 10, TotalBytes: 25, Entries: 4})
	var es []tarEntry
	for range 3 {
		es = append(es, tarEntry{name: "skip", typ: tar.TypeReg, body: strings.Repeat("x", 10)})
	}
	drop := func(n string) string {
		if n == "skip" {
			return ""
		}
		return n
	}
	if err := Untar(tarOf(t, es...), tr, drop); !errors.Is(err, ErrRefused) {
		t.Errorf("30 bytes left out with a cap of 25: %v, want refused", err)
	}
	tr, _ = newTree(t, Limits{FileBytes: 10, TotalBytes: 25, Entries: 4})
	if err := Untar(tarOf(t, es[:2]...), tr, drop); err != nil {
		t.Errorf("20 bytes left out with a cap of 25: %v", err)
	}
}

// A file and a directory of one name in an artifact (a file then a
// directory, a directory then a file, a file under a file) is the
// artifact's own fault: refused (sandproof exits 2), where main failed
// with the system's "file exists" or "not a directory", which sandproof
// took for the host failing (exit 3, and CI retries the engine).
func TestTreeRefusesAFileAndADirectoryOfOneName(t *testing.T) {
	file := func(tr *Tree, n string) error { return tr.WriteFile(n, false, 1, strings.NewReader("x")) }
	for _, tc := range []struct {
		name        string
		first, then func(*Tree) error
	}{
		{"a file, then a directory of its name", func(tr *Tree) error { return file(tr, "d") }, func(tr *Tree) error { return tr.Mkdir("d") }},
		{"a directory, then a file of its name", func(tr *Tree) error { return tr.Mkdir("d") }, func(tr *Tree) error { return file(tr, "d") }},
		{"a file, then a file under it", func(tr *Tree) error { return file(tr, "d") }, func(tr *Tree) error { return file(tr, "d/e") }},
		{"a file, then a directory under it", func(tr *Tree) error { return file(tr, "d") }, func(tr *Tree) error { return tr.Mkdir("d/e") }},
	} {
		tr, _ := newTree(t, roomy)
		if err := tc.first(tr); err != nil {
			t.Fatalf("%s: positive control: the first entry: %v", tc.name, err)
		}
		err := tc.then(tr)
		if err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `"d`) {
			t.Errorf("%s: %v, want refused naming the entry", tc.name, err)
		}
	}
	// Through an archive, as the red team's tarballs did.
	tr, _ := newTree(t, roomy)
	err := Untar(tarOf(t, tarEntry{name: "d", typ: tar.TypeReg, body: "x"}, tarEntry{name: "d/", typ: tar.TypeDir, mode: 0o755}), tr, keep)
	if !errors.Is(err, ErrRefused) {
		t.Errorf("a tar with a file and a directory d: %v, want refused", err)
	}
}

// An archive whose stream is bad (a corrupt header, a body cut short) is
// refused; a read the host's disk failed is not (infrastructure).
func TestUntarBlamesTheArchiveNotTheHost(t *testing.T) {
	good, _ := io.ReadAll(tarOf(t, tarEntry{name: "a", typ: tar.TypeReg, body: strings.Repeat("x", 2000)}))
	bad := append([]byte(nil), good...)
	copy(bad[148:156], "garbage!") // the header's checksum field
	for _, tc := range []struct {
		name    string
		r       io.Reader
		refused bool
	}{
		{"a corrupt header", bytes.NewReader(bad), true},
		{"a body cut short", bytes.NewReader(good[:1024]), true},
		{"the host's disk failing", io.MultiReader(bytes.NewReader(good[:512]), errReader{&fs.PathError{Op: "read", Path: "/cache/p.tgz", Err: syscall.EIO}}), false},
	} {
		tr, _ := newTree(t, roomy)
		err := Untar(tc.r, tr, keep)
		if err == nil || errors.Is(err, ErrRefused) != tc.refused {
			t.Errorf("%s: %v, want an error, refused %t", tc.name, err, tc.refused)
		}
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// Refusal blames the artifact for what its bytes cause and the host for
// what its system fails with.
func TestRefusalTellsTheArtifactFromTheHost(t *testing.T) {
	for _, tc := range []struct {
		err     error
		refused bool
	}{
		{tar.ErrHeader, true},
		{io.ErrUnexpectedEOF, true},
		{&fs.PathError{Op: "openat", Path: "d", Err: syscall.EEXIST}, true},
		{&fs.PathError{Op: "mkdirat", Path: "d", Err: syscall.ENOTDIR}, true},
		{&fs.PathError{Op: "write", Path: "f", Err: syscall.ENOSPC}, false},
		{&fs.PathError{Op: "read", Path: "f", Err: syscall.EIO}, false},
		{&fs.PathError{Op: "open", Path: "f", Err: syscall.EACCES}, false},
	} {
		if got := errors.Is(Refusal(tc.err), ErrRefused); got != tc.refused {
			t.Errorf("Refusal(%v): refused %t, want %t", tc.err, got, tc.refused)
		}
	}
	if Refusal(nil) != nil {
		t.Error("Refusal(nil) is not nil")
	}
}
