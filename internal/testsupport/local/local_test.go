package local_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/local"
	"github.com/sandproof/sandproof/runner/host/hostfile"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// The local provider's downloads follow the same rules as the docker
// one: links recorded, never created; specials skipped; a sparse file cut
// by its apparent size; at most MaxWithheld entries listed.
func TestLocalFetchCapturesAreData(t *testing.T) {
	ctx := context.Background()
	sb, err := local.New(t.TempDir()).Create(ctx, provider.CreateSpec{})
	if err != nil {
		t.Fatal(err)
	}
	info, _ := sb.Inspect(ctx)
	root := filepath.Join(info.PathPrefix, "cap")
	hostFile := filepath.Join(t.TempDir(), "host-secret")
	os.WriteFile(hostFile, []byte("host-marker-local"), 0o600)
	os.MkdirAll(filepath.Join(root, "links"), 0o755)
	os.Symlink(hostFile, filepath.Join(root, "link"))
	for i := range provider.MaxWithheld + 500 {
		os.Symlink("/dev/zero", filepath.Join(root, "links", fmt.Sprint(i)))
	}
	f, _ := os.Create(filepath.Join(root, "sparse"))
	f.Truncate(1 << 30)
	f.Close()
	syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600)
	// Positive controls: the link reads the host file; the sparse file
	// is 1 GiB apparent.
	if b, err := os.ReadFile(filepath.Join(root, "link")); err != nil || string(b) != "host-marker-local" {
		t.Fatalf("positive control: %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(root, "sparse")); err != nil || fi.Size() != 1<<30 {
		t.Fatalf("positive control: %v %v", fi, err)
	}
	dst := filepath.Join(t.TempDir(), "cap")
	got, err := provider.Fetch(ctx, sb, "/cap", dst, provider.FetchLimits{FileBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Withheld) != provider.MaxWithheld || got.Omitted != 503 || got.Cut != 1 {
		t.Errorf("withheld %d, omitted %d, cut %d; want %d, 503, 1", len(got.Withheld), got.Omitted, got.Cut, provider.MaxWithheld)
	}
	filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !d.Type().IsRegular() {
			t.Errorf("not a regular file on the host: %s (%s)", p, d.Type())
		}
		return err
	})
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dst, "sparse"), &st); err != nil || st.Size != 1<<20 || st.Blocks*512 > 1<<20+64<<10 {
		t.Errorf("sparse on the host: %d bytes, %d on disk, %v", st.Size, st.Blocks*512, err)
	}
	if _, err := provider.DownloadBytes(ctx, sb, "/cap/link"); !errors.Is(err, hostfile.ErrNotRegular) {
		t.Errorf("DownloadBytes of a link: %v", err)
	}
}

// Start streams a long-lived command's stdin and stdout (the agent's
// channel runs over it); Wait gives its status.
func TestLocalStart(t *testing.T) {
	ctx := context.Background()
	sb, err := local.New(t.TempDir()).Create(ctx, provider.CreateSpec{})
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	p, err := sb.(provider.Streamer).Start(ctx, provider.ExecSpec{Argv: []string{"sh", "-c", "echo err >&2; cat; exit 7"}}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(p.Stdin, "ping\n")
	line := make([]byte, 5)
	if _, err := io.ReadFull(p.Stdout, line); err != nil || string(line) != "ping\n" {
		t.Fatalf("echoed %q %v", line, err)
	}
	p.Stdin.Close()
	if rest, _ := io.ReadAll(p.Stdout); len(rest) != 0 {
		t.Fatalf("after EOF: %q", rest)
	}
	if code, err := p.Wait(); code != 7 || err != nil || stderr.String() != "err\n" {
		t.Fatalf("wait = %d %v, stderr %q", code, err, stderr.String())
	}
}
