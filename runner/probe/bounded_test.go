package probe

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The probe's one bounded reader (hashFile, hashPrefix) and what the
// comparisons make of a file it did not hash: a harness that plants a
// huge file where a marker or the deliverable should be costs the owner
// one read of the cap, and the file is changed, never equal.

// counting is a reader of n zero bytes that counts what was read of it.
type counting struct {
	left, read int64
}

func (c *counting) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	n := int64(len(p))
	if n > c.left {
		n = c.left
	}
	clear(p[:n])
	c.left -= n
	c.read += n
	return int(n), nil
}

// hashPrefix reads at most the cap and one byte past it of a reader that
// holds 64 times the cap; a reader of exactly the cap is hashed whole.
func TestHashPrefixReadsAtMostTheCap(t *testing.T) {
	const max = 1 << 16
	// Positive control: read plainly, the reader gives all it holds.
	if n, _ := io.Copy(io.Discard, &counting{left: 64 * max}); n != 64*max {
		t.Fatalf("positive control: the reader gave %d bytes, want %d", n, 64*max)
	}
	big := &counting{left: 64 * max}
	h, err := hashPrefix(context.Background(), big, max)
	if err != nil {
		t.Fatal(err)
	}
	if !h.over || h.sum != "" {
		t.Errorf("64x the cap: %+v, want over the cap and no hash", h)
	}
	if big.read > max+1 {
		t.Errorf("read %d bytes of a reader 64x the cap, want at most the cap (%d) and one", big.read, max)
	}
	exact := &counting{left: max}
	h, err = hashPrefix(context.Background(), exact, max)
	if err != nil || h.over || h.size != max || h.sum != sum(string(make([]byte, max))) {
		t.Errorf("exactly the cap: %+v, %v; want it hashed whole", h, err)
	}
}

// A sparse 16 GiB deliverable in a real directory: the snapshot records
// its size by fstat, over the cap, no hash, no error (it is there, and
// seen growing), and never the same as any other look at it.
func TestTakeSparseMarkerIsOverTheCap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "deliverable.txt")
	const size = 16 << 30
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	// Positive control: it is that size, and sparse (nothing written).
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil || st.Size != size || st.Blocks*512 >= 1<<20 {
		t.Fatalf("positive control: %q has size %d, %d blocks (%v), want a sparse 16 GiB file", p, st.Size, st.Blocks, err)
	}
	s, err := Take(context.Background(), Options{ProcRoot: newFakeProc(t).root, Path: t.TempDir(), Markers: []string{p}})
	if err != nil {
		t.Fatal(err)
	}
	m := s.Markers[0]
	if !m.OverCap || m.Size != size || m.SHA256 != "" || m.Missing || m.Error != "" || s.MaxHash != MaxMarkerBytes {
		t.Fatalf("marker %+v (max_hash %d), want over the cap with its size, no hash, no error", m, s.MaxHash)
	}
	if m.SameContent(m) {
		t.Error("a marker over the cap is the same as itself")
	}
	if !strings.Contains(m.State(), "over the cap") {
		t.Errorf("state %q does not say it is over the cap", m.State())
	}
}

// The one comparison of two looks at a marker: only two hashed whole
// with the same sha256 are the same; over the cap (at any size),
// missing, or unreadable never is.
func TestSameContentOnlyForHashedFiles(t *testing.T) {
	hashed := Marker{Path: "/m", SHA256: sum("x"), Size: 1}
	if !hashed.SameContent(hashed) {
		t.Fatal("positive control: a hashed marker is not the same as itself")
	}
	for _, tc := range []struct {
		name string
		a, b Marker
	}{
		{"content changed, same size", hashed, Marker{Path: "/m", SHA256: sum("y"), Size: 1}},
		{"both over the cap, same size", Marker{Path: "/m", Size: 5 << 30, OverCap: true}, Marker{Path: "/m", Size: 5 << 30, OverCap: true}},
		{"over the cap after", hashed, Marker{Path: "/m", Size: 5 << 30, OverCap: true}},
		{"both unreadable the same way", Marker{Path: "/m", Error: "a link"}, Marker{Path: "/m", Error: "a link"}},
		{"both missing", Marker{Path: "/m", Missing: true}, Marker{Path: "/m", Missing: true}},
	} {
		if tc.a.SameContent(tc.b) {
			t.Errorf("%s: %+v and %+v are the same", tc.name, tc.a, tc.b)
		}
	}
}

// Diff: a marker or a tool over the cap at both looks is a change (its
// size alike), a marker hashed the same at both is not.
func TestDiffOverTheCapIsAChange(t *testing.T) {
	if r := Diff(baseline(), after()); !r.Clean {
		t.Fatalf("positive control: unchanged snapshots differ: %+v", r.Changes)
	}
	b, a := baseline(), after()
	big := Marker{Path: b.Markers[0].Path, Size: 5 << 30, OverCap: true}
	b.Markers[0], a.Markers[0] = big, big
	if r := Diff(b, a); len(r.Changes) != 1 || r.Changes[0].What != "marker" || r.Clean {
		t.Errorf("a marker over the cap at both looks: changes %+v, want one marker change", r.Changes)
	}
	b, a = baseline(), after()
	b.Bash = Tool{Path: "/bin/bash", Resolved: "/usr/bin/bash", Version: "5", OverCap: true}
	a.Bash = b.Bash
	if r := Diff(b, a); len(r.Changes) != 1 || r.Changes[0].What != "bash" || r.Clean {
		t.Errorf("bash over the cap at both looks: changes %+v, want one bash change", r.Changes)
	}
}

// hashFile reads only a regular file, by its own name: a link (to a
// regular file or to /dev/zero), a device and a fifo are errors naming
// why, never read; a missing file is ErrNotExist.
func TestHashFileRefusesLinksAndSpecials(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("owner's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if h, err := hashFile(context.Background(), target, MaxMarkerBytes); err != nil || h.sum != sum("owner's") {
		t.Fatalf("positive control: the target hashes to %+v, %v", h, err)
	}
	link := filepath.Join(dir, "link")
	zero := filepath.Join(dir, "zero")
	fifo := filepath.Join(dir, "fifo")
	for _, err := range []error{os.Symlink(target, link), os.Symlink("/dev/zero", zero), syscall.Mkfifo(fifo, 0o600)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ path, want string }{
		{link, "a symbolic link to \"" + target + "\", not followed"},
		{zero, "a symbolic link to \"/dev/zero\", not followed"},
		{"/dev/null", "not a regular file"},
		{fifo, "not a regular file"},
	} {
		h, err := hashFile(context.Background(), tc.path, MaxMarkerBytes)
		if err == nil || !strings.Contains(err.Error(), tc.want) || h.sum != "" {
			t.Errorf("%s: %+v, %v; want an error saying %q", tc.path, h, err, tc.want)
		}
	}
	if _, err := hashFile(context.Background(), filepath.Join(dir, "none"), MaxMarkerBytes); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v, want ErrNotExist", err)
	}
}

// A look at a file for presence follows links and opens nothing: a link
// to a regular file is there, a dangling one is missing, a link to a fifo
// is there but not regular (and the look does not block on it).
func TestPresentLooksUpWithoutReading(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "libstdc++.so.6.0.30")
	if err := os.WriteFile(lib, []byte("ELF"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link, dangling, toFifo := filepath.Join(dir, "libstdc++.so.6"), filepath.Join(dir, "ld.so"), filepath.Join(dir, "sh")
	for _, err := range []error{os.Symlink(lib, link), os.Symlink(filepath.Join(dir, "none"), dangling), os.Symlink(fifo, toFifo)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	s, err := Take(context.Background(), Options{ProcRoot: newFakeProc(t).root, Path: t.TempDir(), Present: []string{link, dangling, toFifo}})
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Present[0]; m.Missing || m.Error != "" || m.Size != 3 || m.SHA256 != "" {
		t.Errorf("a link to a library: %+v, want there, size 3, not hashed", m)
	}
	if m := s.Present[1]; !m.Missing {
		t.Errorf("a dangling link: %+v, want missing", m)
	}
	if m := s.Present[2]; m.Missing || !strings.Contains(m.Error, "not a regular file") {
		t.Errorf("a link to a fifo: %+v, want there, not regular", m)
	}
	if len(s.Markers) != 0 {
		t.Errorf("markers %+v: a presence look is not a marker", s.Markers)
	}
}

// Take ends at its deadline: a context already past it gives ErrDeadline
// and no snapshot, and a marker's read stops at the context's end.
func TestTakeEndsAtItsDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if s, err := Take(ctx, Options{ProcRoot: newFakeProc(t).root, Path: t.TempDir()}); !errors.Is(err, ErrDeadline) || s.Schema != "" {
		t.Errorf("Take past its deadline: %v (schema %q), want ErrDeadline and no snapshot", err, s.Schema)
	}
	if _, err := hashPrefix(ctx, bytes.NewReader([]byte("x")), MaxMarkerBytes); !errors.Is(err, ErrDeadline) {
		t.Errorf("hashPrefix past its deadline: %v, want ErrDeadline", err)
	}
	// Positive control: the same look with a live context ends well.
	if _, err := Take(context.Background(), Options{ProcRoot: newFakeProc(t).root, Path: t.TempDir()}); err != nil {
		t.Errorf("positive control: %v", err)
	}
}

// A marker whose directory the harness swapped for a link (its ~/.config
// pointing at a root-only dir holding a file of the same name) is not read
// through it: root's read would put that file's hash and size in the
// evidence. Every component is opened without following a link
// (runner/confine), not only the last.
func TestReadMarkerFollowsNoLinkAboveIt(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	home := filepath.Join(dir, "home")
	for _, d := range []string{secret, home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(secret, "marker"), []byte("root only"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(home, ".config")); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(home, ".config", "marker")
	// Positive control: a read by path (O_NOFOLLOW on the last component
	// only) goes through the link to the root-only file.
	if h, err := hashFile(context.Background(), p, MaxMarkerBytes); err != nil || h.sum != sum("root only") {
		t.Fatalf("positive control: a read by path gave %+v, %v; want the secret's hash", h, err)
	}
	m := readMarker(context.Background(), p, MaxMarkerBytes)
	if m.SHA256 != "" || m.Size != 0 || !strings.Contains(m.Error, "a symbolic link at") || !strings.Contains(m.Error, secret) {
		t.Errorf("marker read through a link above it: %+v; want no hash or size, an error naming the link to %s", m, secret)
	}
	// A marker with no link on its way is read as before.
	plain := filepath.Join(home, "marker")
	if err := os.WriteFile(plain, []byte("owner's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m := readMarker(context.Background(), plain, MaxMarkerBytes); m.SHA256 != sum("owner's") || m.Error != "" {
		t.Errorf("a plain marker: %+v", m)
	}
}

// A marker's look says which file it read and whose it is (fstat on the
// descriptor it hashed): a file deleted and put back with the same bytes
// (the borrowed owner's state, replaced by a harness that may write its
// directory) hashes the same and is another file; the file left alone is
// the same file at every look.
func TestReadMarkerNamesWhichFileItRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "owner-service.state")
	if err := os.WriteFile(p, []byte("owner task state\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	first := readMarker(context.Background(), p, MaxMarkerBytes)
	if first.File == nil || first.File.Inode != st.Ino || first.File.Dev != uint64(st.Dev) || first.File.UID != st.Uid || first.File.GID != st.Gid || first.File.Mode != st.Mode {
		t.Fatalf("marker's file %+v, want the fstat of %s (%+v)", first.File, p, st)
	}
	if again := readMarker(context.Background(), p, MaxMarkerBytes); again.File == nil || *again.File != *first.File {
		t.Errorf("the same file looked at twice: %v then %v", first.File, again.File)
	}
	// Replaced as the red team did: cp, rm, mv.
	tmp := p + ".s"
	if err := os.WriteFile(tmp, []byte("owner task state\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	now := readMarker(context.Background(), p, MaxMarkerBytes)
	if now.SHA256 != first.SHA256 {
		t.Fatalf("positive control: the replacement holds other bytes (%s, was %s)", now.SHA256, first.SHA256)
	}
	if now.File == nil || now.File.Inode == first.File.Inode {
		t.Errorf("a replaced file: %v, was %v; want another inode", now.File, first.File)
	}
	// A file over the cap is still named; a missing one is not.
	if err := os.Truncate(p, MaxMarkerBytes+1); err != nil {
		t.Fatal(err)
	}
	if m := readMarker(context.Background(), p, MaxMarkerBytes); !m.OverCap || m.File == nil {
		t.Errorf("a marker over the cap: %+v, want over the cap with its file", m)
	}
	if m := readMarker(context.Background(), p+".gone", MaxMarkerBytes); !m.Missing || m.File != nil {
		t.Errorf("a missing marker: %+v", m)
	}
}

// The last line a look gives: whole lines only, at most MaxLastLine
// bytes, over any split of the writes; a longer last line, or none, is
// "" (a look at the writer's file cannot read it as a line then).
func TestLineTail(t *testing.T) {
	long := strings.Repeat("x", MaxLastLine+1)
	for _, tc := range []struct {
		name, in string
		lines    int
		last     string
	}{
		{"lines", "0 1\n1 2\n", 2, "1 2"},
		{"an unfinished line after the last", "0 1\n1 2\n2 3", 2, "1 2"},
		{"one line", "0 1\n", 1, "0 1"},
		{"no newline", "0 1", 0, ""},
		{"empty", "", 0, ""},
		{"a last line of the bound", "a\n" + long[:MaxLastLine] + "\n", 2, long[:MaxLastLine]},
		{"a last line over the bound", "a\n" + long + "\n", 2, ""},
		{"a long first line, a short last", long + long + "\n0 1\n", 2, "0 1"},
	} {
		for _, step := range []int{1, 3, 7, 1 << 20} {
			var lt lineTail
			for in := tc.in; in != ""; {
				n := min(step, len(in))
				lt.Write([]byte(in[:n]))
				in = in[n:]
			}
			if lt.lines != tc.lines || lt.last() != tc.last {
				t.Errorf("%s, written %d at a time: %d lines, last %q; want %d, %q", tc.name, step, lt.lines, lt.last(), tc.lines, tc.last)
			}
		}
	}
}
