package provider

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/hostfile"
)

// The download bounds that no other test reached (the host-path mutants,
// docs/mutation.md), engine-free: Untar on archives built here, and
// DownloadFile over a sandbox whose Fetch unpacks one.

// archive is a tar of entries, each a header and, for a regular file, its
// size in bytes of "x".
func archive(t *testing.T, hs ...*tar.Header) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hs {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// countingReader counts what is read from it.
type countingReader struct {
	r *bytes.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// An unpack reads no more than ReadBytes from the sandbox, however large
// the file it is in the middle of: it stops there with ErrReadCap and
// records the file as stopped. The positive control: the file is larger
// than the cap, and the same archive unpacks whole under the default.
func TestUntarReadsNoMoreThanItsReadCap(t *testing.T) {
	const size, readCap = 200 << 10, 20 << 10
	arch := archive(t, &tar.Header{Typeflag: tar.TypeDir, Name: "d/", Mode: 0o755},
		&tar.Header{Typeflag: tar.TypeReg, Name: "d/big", Mode: 0o644, Size: size})
	got, err := Untar(bytes.NewReader(arch), filepath.Join(t.TempDir(), "d"), "/d", FetchLimits{})
	if err != nil || got.Bytes != size {
		t.Fatalf("positive control: within the default read cap: %+v %v", got, err)
	}
	src := &countingReader{r: bytes.NewReader(arch)}
	dst := filepath.Join(t.TempDir(), "d")
	got, err = Untar(src, dst, "/d", FetchLimits{ReadBytes: readCap})
	if !errors.Is(err, ErrReadCap) {
		t.Fatalf("past the read cap: %v, want ErrReadCap", err)
	}
	if src.n > readCap {
		t.Errorf("read %d bytes from the sandbox, cap %d", src.n, readCap)
	}
	if got.Bytes > readCap || got.Cut == 0 {
		t.Errorf("wrote %d bytes (cap %d), %d cut; want at most the cap, the file recorded as stopped", got.Bytes, readCap, got.Cut)
	}
}

// A download keeps MaxWithheld records and counts the rest: a sandbox
// can plant a million links.
func TestFetchedKeepsMaxWithheld(t *testing.T) {
	var f Fetched
	for range MaxWithheld {
		f.Add(Withheld{Path: "/l", Kind: WithheldSymlink})
	}
	if len(f.Withheld) != MaxWithheld || f.Omitted != 0 {
		t.Fatalf("positive control: %d kept, %d omitted after %d", len(f.Withheld), f.Omitted, MaxWithheld)
	}
	f.Add(Withheld{Path: "/l", Kind: WithheldSymlink})
	f.Add(Withheld{Path: "/t", Kind: WithheldStopped})
	if len(f.Withheld) != MaxWithheld || f.Omitted != 2 || f.Cut != 1 {
		t.Errorf("%d kept, %d omitted, %d cut; want %d kept, 2 omitted, the stopped one cut", len(f.Withheld), f.Omitted, f.Cut, MaxWithheld)
	}
}

// tarSandbox is a sandbox whose Fetch unpacks one archive, as a
// provider's does with what the sandbox sent.
type tarSandbox struct {
	Sandbox
	arch []byte
}

func (s tarSandbox) Fetch(_ context.Context, path, hostPath string, lim FetchLimits) (Fetched, error) {
	return Untar(bytes.NewReader(s.arch), hostPath, path, lim)
}

// DownloadFile never gives a truncated file as whole (its first limit
// bytes and hostfile.ErrTooLarge), and never follows a link (ErrNotRegular,
// the target named). The positive control: a file within the limit comes
// whole, with no error.
func TestDownloadFileBounds(t *testing.T) {
	ctx := context.Background()
	file := tarSandbox{arch: archive(t, &tar.Header{Typeflag: tar.TypeReg, Name: "f", Mode: 0o644, Size: 100})}
	if b, err := DownloadFile(ctx, file, "/f", 200); err != nil || len(b) != 100 {
		t.Fatalf("positive control: %d bytes, %v", len(b), err)
	}
	b, err := DownloadFile(ctx, file, "/f", 40)
	if !errors.Is(err, hostfile.ErrTooLarge) || len(b) != 40 {
		t.Errorf("a 100-byte file under a limit of 40: %d bytes, %v; want 40 and ErrTooLarge", len(b), err)
	}
	link := tarSandbox{arch: archive(t, &tar.Header{Typeflag: tar.TypeSymlink, Name: "f", Linkname: "/etc/shadow"})}
	got, err := Untar(bytes.NewReader(link.arch), filepath.Join(t.TempDir(), "f"), "/f", FetchLimits{})
	if err != nil || len(got.Withheld) != 1 || got.Withheld[0].Kind != WithheldSymlink {
		t.Fatalf("positive control: the link is recorded: %+v %v", got, err)
	}
	b, err = DownloadFile(ctx, link, "/f", 200)
	if !errors.Is(err, hostfile.ErrNotRegular) || !strings.Contains(err.Error(), "/etc/shadow") || len(b) != 0 {
		t.Errorf("a link: %q, %v; want ErrNotRegular naming its target", b, err)
	}
}
