package npm

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/hostile"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/artifact"
	"github.com/sandproof/sandproof/runner/host/glibc"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// An entry whose ELF file the reader refuses (here a PT_INTERP longer
// than a path, which glibc.ReadELF refuses unread; a parser panic is
// refused the same way) stops the preparation as a refusal, exit 2: not
// a platform this host does not cover, whose cases would be skipped. On
// main the preparer ignored the error and took the entry.
func TestPreparerRefusesAnEntryTheELFReaderRefuses(t *testing.T) {
	needSh(t)
	exe := filepath.Join(t.TempDir(), "tool")
	hostile.ELF(t, exe, "/"+strings.Repeat("x", glibc.MaxInterp+100))
	body, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	pkg := writeTgz(t, []tarEntry{
		{name: "package/package.json", typ: tar.TypeReg, mode: 0o644, body: `{"name": "@scope/tool", "version": "1.2.3"}`},
		{name: "package/bin/tool", typ: tar.TypeReg, mode: 0o755, body: string(body)},
	})
	sum, err := integrity(pkg)
	if err != nil {
		t.Fatal(err)
	}
	fakeNpmPack(t, map[string]string{"@scope/tool@1.2.3": pkg})
	t.Setenv(runtimes.CacheEnv, t.TempDir())
	m, err := adapter.Parse("x.yaml", t.TempDir(), []byte(npmManifest(`      package: "@scope/tool"
      version: "1.2.3"
      integrity: "`+sum+`"
      entry: {bin: bin/tool}
`)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.PrepareFor(context.Background(), t.TempDir(), runtimes.HostTarget().Arch, runtimes.HostTarget().Libc)
	if !errors.Is(err, artifact.ErrRefused) || errors.Is(err, adapter.ErrPlatform) || !strings.Contains(err.Error(), "PT_INTERP") {
		t.Fatalf("an entry with a %d-byte PT_INTERP: %v, want refused (not a platform skip)", glibc.MaxInterp+101, err)
	}
}
