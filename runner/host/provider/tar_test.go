package provider

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The marks a confining reader puts on entries are data from the
// sandbox: a link_at that is not a component of the asked path is not
// believed (the link is recorded where it was met), and a denied mark
// records the entry and creates nothing.
func TestUntarMarksAreData(t *testing.T) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "x", Linkname: "/", Format: tar.FormatPAX,
		PAXRecords: map[string]string{PAXLinkAt: "/etc/elsewhere"}})
	tw.Close()
	got, err := Untar(&b, filepath.Join(t.TempDir(), "x"), "/home/u/x", FetchLimits{})
	if err != nil || len(got.Withheld) != 1 || got.Withheld[0].Path != "/home/u/x" {
		t.Errorf("a link_at outside the asked path: %+v %v, want it recorded at /home/u/x", got.Withheld, err)
	}

	b.Reset()
	tw = tar.NewWriter(&b)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "x", Linkname: "/", Format: tar.FormatPAX,
		PAXRecords: map[string]string{PAXLinkAt: "/home/u"}})
	tw.Close()
	got, err = Untar(&b, filepath.Join(t.TempDir(), "x"), "/home/u/x", FetchLimits{})
	if err != nil || len(got.Withheld) != 1 || got.Withheld[0].Path != "/home/u" || got.Withheld[0].Target != "/" {
		t.Errorf("a link_at at a component: %+v %v, want it recorded at /home/u", got.Withheld, err)
	}

	b.Reset()
	tw = tar.NewWriter(&b)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "d/", Mode: 0o755})
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeFifo, Name: "d/secret", Format: tar.FormatPAX,
		PAXRecords: map[string]string{PAXWithheld: WithheldDenied}})
	tw.Close()
	dst := filepath.Join(t.TempDir(), "d")
	got, err = Untar(&b, dst, "/d", FetchLimits{})
	if _, serr := os.Lstat(filepath.Join(dst, "secret")); err != nil || !errors.Is(serr, os.ErrNotExist) ||
		len(got.Withheld) != 1 || got.Withheld[0].Kind != WithheldDenied || got.Withheld[0].Path != "/d/secret" {
		t.Errorf("a denied entry: %+v %v (on the host: %v)", got.Withheld, err, serr)
	}
}

// Every entry takes one of the entry budget, shared by the downloads
// given it; past it the unpack stops with ErrEntryCap (an ErrReadCap),
// records where, and creates nothing more.
func TestUntarEntryBudget(t *testing.T) {
	arch := func(n int) *bytes.Buffer {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "d/", Mode: 0o755})
		for i := range n {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "d/" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Mode: 0o644})
		}
		tw.Close()
		return &b
	}
	budget := NewBudget(30)
	first := filepath.Join(t.TempDir(), "d")
	got, err := Untar(arch(20), first, "/one", FetchLimits{Entries: budget})
	if err != nil || got.Entries != 21 || got.Cut != 0 {
		t.Fatalf("within the budget: %+v %v", got, err)
	}
	second := filepath.Join(t.TempDir(), "d")
	got, err = Untar(arch(20), second, "/two", FetchLimits{Entries: budget})
	ents, _ := os.ReadDir(second)
	if !errors.Is(err, ErrEntryCap) || !errors.Is(err, ErrReadCap) || got.Entries != 9 || got.Cut != 1 || len(ents) != 8 {
		t.Errorf("past the shared budget: %+v %v, %d files on the host; want 9 entries (the dir and 8 files), 1 cut", got, err, len(ents))
	}
}

// A regular file keeps at most FileBytes bytes (the rest is truncated)
// and at most what is left of the byte budget shared by the downloads
// given it (the rest is stopped); either way the cut is recorded with the
// file's size and what was written, and the unpack goes on.
func TestUntarFileCapAndByteBudget(t *testing.T) {
	arch := func(sizes ...int) *bytes.Buffer {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "d/", Mode: 0o755})
		for i, n := range sizes {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "d/" + string(rune('a'+i)), Mode: 0o644, Size: int64(n)})
			tw.Write(bytes.Repeat([]byte("x"), n))
		}
		tw.Close()
		return &b
	}
	written := func(p string) int {
		b, _ := os.ReadFile(p)
		return len(b)
	}
	// Positive control: within both caps nothing is cut.
	dst := filepath.Join(t.TempDir(), "d")
	got, err := Untar(arch(10), dst, "/d", FetchLimits{FileBytes: 40})
	if err != nil || len(got.Withheld) != 0 || got.Bytes != 10 || written(filepath.Join(dst, "a")) != 10 {
		t.Fatalf("within the caps: %+v %v", got, err)
	}
	dst = filepath.Join(t.TempDir(), "d")
	got, err = Untar(arch(100, 10), dst, "/d", FetchLimits{FileBytes: 40})
	if err != nil || len(got.Withheld) != 1 || got.Withheld[0] != (Withheld{Path: "/d/a", Kind: WithheldTruncated, Size: 100, Written: 40}) ||
		written(filepath.Join(dst, "a")) != 40 || written(filepath.Join(dst, "b")) != 10 {
		t.Errorf("past the file cap: %+v %v; want /d/a truncated at 40 of 100, /d/b whole", got.Withheld, err)
	}
	dst = filepath.Join(t.TempDir(), "d")
	got, err = Untar(arch(30, 30), dst, "/d", FetchLimits{FileBytes: 40, Budget: NewBudget(45)})
	if err != nil || len(got.Withheld) != 1 || got.Withheld[0] != (Withheld{Path: "/d/b", Kind: WithheldStopped, Size: 30, Written: 15}) ||
		written(filepath.Join(dst, "a")) != 30 || written(filepath.Join(dst, "b")) != 15 {
		t.Errorf("past the byte budget: %+v %v; want /d/b stopped at 15 of 30", got.Withheld, err)
	}
}
