package python

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandproof/sandproof/runner/host/artifact"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// debPin is one Debian package of the interpreter, as the archive's
// Packages index lists it.
type debPin struct {
	Package, Version string
	// Pool is the .deb's path under Mirror, its archive first
	// ("debian/pool/main/p/...deb", "debian-security/pool/updates/...").
	Pool   string
	Size   int64
	SHA256 string
}

// Mirror is where the pinned .debs are fetched from.
var Mirror = "http://deb.debian.org/"

// regenerate is the command that rewrites interp_pins.go from Debian's
// current Packages indexes.
const regenerate = "SANDPROOF_PY_PINS=write go test -run TestInterpPins ./runner/host/runtimes/python/"

func (p debPin) deb() string { return p.Package + "_" + p.Version }

// Fetcher gets url's body. The caller closes it.
type Fetcher func(ctx context.Context, url string) (io.ReadCloser, error)

// ErrGone means the mirror no longer serves a pinned .deb (HTTP 404):
// Debian removed that version from its pool, and the pins must be
// regenerated.
var ErrGone = errors.New("pinned .deb no longer served")

// HTTPFetch gets url over HTTP. Not reaching the mirror is
// runtimes.ErrUnreachable; a 404 is ErrGone.
func HTTPFetch(ctx context.Context, url string) (io.ReadCloser, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%w: %w", runtimes.ErrUnreachable, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		if resp.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("%w: GET %s: %s", ErrGone, url, resp.Status)
		}
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return cancelOnClose{resp.Body, cancel}, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error { defer c.cancel(); return c.ReadCloser.Close() }

// open returns the .deb p pins, from cache (a file named by its sha256,
// checked again) or fetched into it; its size and sha256 are checked
// before it is returned. The caller closes it.
func (p debPin) open(ctx context.Context, cache string, fetch Fetcher) (*os.File, error) {
	if cache != "" {
		if f, err := os.Open(filepath.Join(cache, p.SHA256+".deb")); err == nil {
			if err := p.check(f); err == nil {
				return f, nil
			}
			f.Close()
		}
	}
	return p.fetch(ctx, cache, fetch)
}

// fetch gets the .deb into a file of cache (a temporary one when cache
// is ""), reading at most one byte more than its pinned size.
func (p debPin) fetch(ctx context.Context, cache string, fetch Fetcher) (*os.File, error) {
	body, err := fetch(ctx, Mirror+p.Pool)
	if errors.Is(err, ErrGone) {
		return nil, fmt.Errorf("fetch %s: %w; Debian dropped this version from its pool: regenerate the pins (%s) and review the new versions", p.deb(), err, regenerate)
	}
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", p.deb(), err)
	}
	defer body.Close()
	dir := cache
	if dir == "" {
		dir = os.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, ".fetch-*.deb")
	if err != nil {
		return nil, err
	}
	keep := false
	defer func() {
		if !keep {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := io.Copy(f, io.LimitReader(body, p.Size+1)); err != nil {
		return nil, fmt.Errorf("fetch %s: %w", p.deb(), err)
	}
	if err := p.check(f); err != nil {
		return nil, err
	}
	if cache == "" {
		os.Remove(f.Name()) // the open file stays readable
	} else if err := os.Rename(f.Name(), filepath.Join(cache, p.SHA256+".deb")); err != nil {
		return nil, err
	}
	keep = true
	return f, nil
}

// check reads f whole and compares its size and sha256 with the pin's.
func (p debPin) check(f *os.File) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, p.Size+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", p.deb(), err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); n != p.Size || sum != p.SHA256 {
		return fmt.Errorf("%s: %d bytes of sha256 %s, want %d bytes of %s", p.deb(), n, sum, p.Size, p.SHA256)
	}
	return nil
}

// unpackDeb writes the data.tar.xz (or plain data.tar) of the .deb f,
// size bytes, into t through keep. An xz member is decompressed by the
// host's xz. The .deb matched its pinned sha256; the reading is bounded
// all the same.
func unpackDeb(ctx context.Context, f io.ReaderAt, size int64, t *artifact.Tree, keep func(string) string) error {
	name, off, n, err := dataMember(f, size)
	if err != nil {
		return err
	}
	data := io.NewSectionReader(f, off, n)
	switch name {
	case "data.tar":
		return artifact.UntarCopyingLinks(data, t, keep)
	case "data.tar.xz":
		return unxz(ctx, data, t, keep)
	}
	return fmt.Errorf("%w: the .deb's data member is %q, not data.tar.xz", artifact.ErrRefused, name)
}

// unxz pipes data through `xz -dc` into the tree.
func unxz(ctx context.Context, data io.Reader, t *artifact.Tree, keep func(string) string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, "xz", "-dc")
	cmd.Stdin = data
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start xz (the host's xz unpacks a .deb's data.tar.xz): %w", err)
	}
	err = artifact.UntarCopyingLinks(out, t, keep)
	if err != nil {
		cancel()
	}
	if werr := cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("xz -dc: %w: %s", werr, strings.TrimSpace(stderr.String()))
	}
	return err
}

// dataMember finds the data.tar* member of the ar archive f (size bytes):
// its name, offset and size.
func dataMember(f io.ReaderAt, size int64) (string, int64, int64, error) {
	magic := make([]byte, 8)
	if _, err := f.ReadAt(magic, 0); err != nil || string(magic) != "!<arch>\n" {
		return "", 0, 0, fmt.Errorf("%w: not an ar archive", artifact.ErrRefused)
	}
	hdr := make([]byte, 60)
	for off := int64(8); off+60 <= size; {
		if _, err := f.ReadAt(hdr, off); err != nil {
			return "", 0, 0, fmt.Errorf("read ar header at %d: %w", off, err)
		}
		name := strings.TrimSuffix(strings.TrimSpace(string(hdr[:16])), "/")
		n, err := strconv.ParseInt(strings.TrimSpace(string(hdr[48:58])), 10, 64)
		if err != nil || n < 0 || n > size-off-60 || string(hdr[58:60]) != "`\n" {
			return "", 0, 0, fmt.Errorf("%w: bad ar member header at %d", artifact.ErrRefused, off)
		}
		if strings.HasPrefix(name, "data.tar") {
			return name, off + 60, n, nil
		}
		off += 60 + n + n%2
	}
	return "", 0, 0, fmt.Errorf("%w: no data.tar member", artifact.ErrRefused)
}
