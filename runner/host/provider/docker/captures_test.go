package docker_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/host/hostfile"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// hostile plants, in a real container, the tree a hostile harness would
// leave to be captured: a link to a host file (whose content is a unique
// marker), a link to /dev/zero, a 1 GiB sparse file, a fifo and a small
// regular file; with positive controls that each is really there.
func hostile(t *testing.T, sb provider.Sandbox) (hostFile, marker string) {
	t.Helper()
	ctx := context.Background()
	hostFile = filepath.Join(t.TempDir(), "host-secret")
	marker = "host-marker-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + time.Now().Format("150405.000000000")
	if err := os.WriteFile(hostFile, []byte(marker), 0o600); err != nil {
		t.Fatal(err)
	}
	script := `set -e; mkdir -p /cap; printf small > /cap/small; busybox ln -s "$1" /cap/link; busybox ln -s /dev/zero /cap/zero
busybox truncate -s 1G /cap/sparse; busybox mkfifo /cap/fifo
busybox readlink /cap/link; busybox readlink /cap/zero; busybox stat -c %s /cap/sparse; test -p /cap/fifo && echo fifo`
	res, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"sh", "-c", script, "sh", hostFile}})
	if err != nil {
		t.Fatal(err)
	}
	want := hostFile + "\n/dev/zero\n1073741824\nfifo\n"
	if res.ExitCode != 0 || string(res.Stdout) != want {
		t.Fatalf("positive control: planting gave exit %d %q %q, want %q", res.ExitCode, res.Stdout, res.Stderr, want)
	}
	return hostFile, marker
}

// grepTree fails when any file under dir holds marker or is a link.
func grepTree(t *testing.T, dir, marker string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			t.Errorf("a link was created on the host: %s", p)
			return nil
		}
		if d.Type().IsRegular() {
			b, _ := hostfile.ReadFile(p, 2<<30)
			if bytes.Contains(b, []byte(marker)) {
				t.Errorf("the host file's marker is in %s", p)
			}
		}
		return nil
	})
}

// TestDockerFetchCapturesAreData downloads the hostile tree: links are
// recorded with their targets and never created, the fifo is skipped, the
// sparse file is cut at the cap decided on its apparent size (what is
// written to disk is measured), and nothing of the host file is read.
func TestDockerFetchCapturesAreData(t *testing.T) {
	p := engine(t)
	sb := create(t, p)
	hostFile, marker := hostile(t, sb)
	ctx := context.Background()
	dst := filepath.Join(t.TempDir(), "cap")
	start := time.Now()
	got, err := provider.Fetch(ctx, sb, "/cap", dst, provider.FetchLimits{FileBytes: 1 << 20, Budget: provider.NewBudget(4 << 20)})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]provider.Withheld{
		"/cap/link":   {Path: "/cap/link", Kind: provider.WithheldSymlink, Target: hostFile},
		"/cap/zero":   {Path: "/cap/zero", Kind: provider.WithheldSymlink, Target: "/dev/zero"},
		"/cap/sparse": {Path: "/cap/sparse", Kind: provider.WithheldTruncated, Size: 1 << 30, Written: 1 << 20},
		"/cap/fifo":   {Path: "/cap/fifo", Kind: provider.WithheldSpecial},
	}
	for _, w := range got.Withheld {
		if want[w.Path] != w {
			t.Errorf("withheld %+v, want %+v", w, want[w.Path])
		}
		delete(want, w.Path)
	}
	if len(want) != 0 {
		t.Errorf("not recorded: %+v (got %+v)", want, got.Withheld)
	}
	for _, n := range []string{"link", "zero", "fifo"} {
		if _, err := os.Lstat(filepath.Join(dst, n)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists on the host: %v", n, err)
		}
	}
	if b, err := hostfile.ReadFile(filepath.Join(dst, "small"), 100); err != nil || string(b) != "small" {
		t.Errorf("regular file: %q %v", b, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dst, "sparse"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 1<<20 || st.Blocks*512 > 1<<20+64<<10 {
		t.Errorf("sparse file on the host: size %d, %d bytes on disk; want 1 MiB", st.Size, st.Blocks*512)
	}
	if got.Bytes != 1<<20+5 {
		t.Errorf("bytes written %d, want %d", got.Bytes, 1<<20+5)
	}
	grepTree(t, dst, marker)
	t.Logf("hostile tree: %s, %d bytes written, sparse file %d bytes on disk (apparent in sandbox 1 GiB)", took, got.Bytes, st.Blocks*512)

	// The read cap stops a download; what was written stays, the stop is
	// recorded, and it is not an error.
	dst2 := filepath.Join(t.TempDir(), "cap")
	got, err = provider.Fetch(ctx, sb, "/cap/sparse", dst2, provider.FetchLimits{FileBytes: 1 << 20, ReadBytes: 8 << 20})
	if err != nil || len(got.Withheld) == 0 || got.Withheld[len(got.Withheld)-1].Kind != provider.WithheldStopped {
		t.Errorf("read cap: %+v %v, want a recorded stop", got, err)
	}
}

// TestDockerDownloadBytesNeverFollows reads single files the way the
// deliverable, stderr and seeded markers are read: a link (to a host file
// or /dev/zero) is refused with its target named, a huge file is cut.
func TestDockerDownloadBytesNeverFollows(t *testing.T) {
	p := engine(t)
	sb := create(t, p)
	hostFile, marker := hostile(t, sb)
	ctx := context.Background()
	for _, c := range []struct{ path, target string }{{"/cap/link", hostFile}, {"/cap/zero", "/dev/zero"}} {
		b, err := provider.DownloadBytes(ctx, sb, c.path)
		if !errors.Is(err, hostfile.ErrNotRegular) || !strings.Contains(err.Error(), c.target) || len(b) != 0 {
			t.Errorf("%s: %q, %v; want ErrNotRegular naming %s", c.path, b, err, c.target)
		}
		if bytes.Contains(b, []byte(marker)) {
			t.Errorf("%s: the host file was read", c.path)
		}
	}
	start := time.Now()
	b, err := provider.DownloadFile(ctx, sb, "/cap/sparse", 4096)
	if !errors.Is(err, hostfile.ErrTooLarge) || len(b) != 4096 {
		t.Errorf("sparse: %d bytes, %v; want 4096 and ErrTooLarge", len(b), err)
	}
	t.Logf("1 GiB sparse file read capped at 4 KiB in %s", time.Since(start))
	if _, err := provider.DownloadBytes(ctx, sb, "/cap/fifo"); !errors.Is(err, hostfile.ErrNotRegular) {
		t.Errorf("fifo: %v", err)
	}
}
