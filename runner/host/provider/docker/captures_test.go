package docker_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sandproof/sandproof/runner/host/provider"
)

// A download's read cap counts what the engine's archive carries, not
// what is kept: a 1 GiB sparse file cut at 1 MiB still stops an 8 MiB
// read, recorded, not an error. (Captures are data, and the read cap on a
// plain file, are the contract's: TestDockerProviderContract.)
func TestDockerReadCapCountsTheArchive(t *testing.T) {
	sb := create(t, engine(t))
	ctx := context.Background()
	res, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"sh", "-c", "mkdir -p /cap && busybox truncate -s 1G /cap/sparse && busybox stat -c %s /cap/sparse"}})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "1073741824\n" {
		t.Fatalf("positive control: planting the sparse file: %v, exit %d, %q %q", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	got, err := provider.Fetch(ctx, sb, "/cap/sparse", filepath.Join(t.TempDir(), "cap"), provider.FetchLimits{FileBytes: 1 << 20, ReadBytes: 8 << 20})
	if err != nil || len(got.Withheld) == 0 || got.Withheld[len(got.Withheld)-1].Kind != provider.WithheldStopped {
		t.Errorf("read cap: %+v %v, want a recorded stop", got, err)
	}
}
