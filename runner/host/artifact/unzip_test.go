package artifact

import (
	"archive/zip"
	"bytes"
	"errors"
	"hash/crc32"
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// zipEntry is one entry of a test archive; a raw entry is stored with the
// declared size given, whatever its data.
type zipEntry struct {
	name     string
	mode     fs.FileMode
	data     string
	declared int64 // 0: len(data)
	badCRC   bool
}

func makeZip(t *testing.T, es ...zipEntry) *bytes.Reader {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range es {
		h := &zip.FileHeader{Name: e.name, Method: zip.Store}
		h.SetMode(e.mode)
		if e.declared == 0 && !e.badCRC {
			w, err := zw.CreateHeader(h)
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte(e.data))
			continue
		}
		h.CompressedSize64, h.UncompressedSize64 = uint64(len(e.data)), uint64(max(e.declared, int64(len(e.data))))
		if e.declared > 0 {
			h.UncompressedSize64 = uint64(e.declared)
		}
		h.CRC32 = crc32.ChecksumIEEE([]byte(e.data))
		if e.badCRC {
			h.CRC32++
		}
		w, err := zw.CreateRaw(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(e.data))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(buf.Bytes())
}

func same(s string) string { return s }

func TestUnzipWritesFilesAndDirs(t *testing.T) {
	tr, dir := newTree(t, roomy)
	z := makeZip(t,
		zipEntry{name: "pkg/", mode: fs.ModeDir | 0o755},
		zipEntry{name: "pkg/__init__.py", mode: 0o644, data: "x = 1\n"},
		zipEntry{name: "pkg/tool", mode: 0o755, data: "#!/bin/sh\n"},
		zipEntry{name: "pkg-1.0.dist-info/RECORD", mode: 0o600, data: "r"},
	)
	if err := Unzip(z, z.Size(), tr, same); err != nil {
		t.Fatal(err)
	}
	got := entries(t, dir)
	want := []string{"d pkg", "d pkg-1.0.dist-info", "f pkg-1.0.dist-info/RECORD -rw-r--r--", "f pkg/__init__.py -rw-r--r--", "f pkg/tool -rwxr-xr-x"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("tree = %q, want %q", got, want)
	}
}

func TestUnzipRefusesWhatAWheelMustNotHold(t *testing.T) {
	for _, tc := range []struct {
		why string
		lim Limits
		es  []zipEntry
	}{
		{"a symbolic link", roomy, []zipEntry{{name: "pkg/link", mode: fs.ModeSymlink | 0o777, data: "/etc/passwd"}}},
		{"a device", roomy, []zipEntry{{name: "pkg/dev", mode: fs.ModeDevice | 0o644}}},
		{"a name out of the tree", roomy, []zipEntry{{name: "../evil.py", mode: 0o644, data: "x"}}},
		{"an absolute name", roomy, []zipEntry{{name: "/etc/evil", mode: 0o644, data: "x"}}},
		{"a bomb: what it declares is over the tree's cap", Limits{FileBytes: 1 << 40, TotalBytes: 1 << 20, Entries: 10},
			[]zipEntry{{name: "big", mode: 0o644, data: "x", declared: 1 << 30}}},
		{"a file over the file cap", Limits{FileBytes: 4, TotalBytes: 1 << 20, Entries: 10}, []zipEntry{{name: "f", mode: 0o644, data: "12345"}}},
		{"more data than declared", roomy, []zipEntry{{name: "f", mode: 0o644, data: "0123456789", declared: 3}}},
		{"a checksum that does not match", roomy, []zipEntry{{name: "f", mode: 0o644, data: "0123", badCRC: true}}},
		{"too many entries", Limits{FileBytes: 10, TotalBytes: 100, Entries: 2},
			[]zipEntry{{name: "a", data: "1"}, {name: "b", data: "1"}, {name: "c", data: "1"}}},
	} {
		t.Run(tc.why, func(t *testing.T) {
			tr, dir := newTree(t, tc.lim)
			z := makeZip(t, tc.es...)
			err := Unzip(z, z.Size(), tr, same)
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("Unzip = %v, want refused", err)
			}
			for _, e := range entries(t, dir) {
				if strings.HasPrefix(e, "?") {
					t.Errorf("left %s", e)
				}
			}
		})
	}
}

func TestUnzipRefusesWhatIsNoZip(t *testing.T) {
	tr, _ := newTree(t, roomy)
	r := bytes.NewReader([]byte("PK\x03\x04 not really"))
	if err := Unzip(r, r.Size(), tr, same); !errors.Is(err, ErrRefused) {
		t.Fatalf("Unzip = %v, want refused", err)
	}
}

func TestUnzipLeavesOutWhatNameDrops(t *testing.T) {
	tr, dir := newTree(t, roomy)
	z := makeZip(t, zipEntry{name: "keep.py", data: "k"}, zipEntry{name: "drop/x.py", data: "d"})
	err := Unzip(z, z.Size(), tr, func(n string) string {
		if strings.HasPrefix(n, "drop/") {
			return ""
		}
		return n
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := entries(t, dir); !slices.Equal(got, []string{"f keep.py -rw-r--r--"}) {
		t.Errorf("tree = %q", got)
	}
}
