package npm

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// Through the npm preparer, for the host's libc and for musl (whose
// build the host's loader may not even start: on main a glibc host ran a
// musl build's check through its musl loader), the prepared runtime
// carries the check to certify and nothing of the package ran here.
func TestPreparerHandsItsVersionCheckOn(t *testing.T) {
	needSh(t)
	marker := filepath.Join(t.TempDir(), "ran-on-the-host")
	pkg := writeTgz(t, []tarEntry{
		{name: "package/package.json", typ: tar.TypeReg, mode: 0o644, body: `{"name": "@scope/tool", "version": "1.2.3"}`},
		{name: "package/bin/tool", typ: tar.TypeReg, mode: 0o755, body: "#!/bin/sh\necho \"ran as $(id -u)\" >> \"$MARK\"\necho tool 1.2.3\n"},
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
      version_args: ["--version"]
      version_env: {MARK: "`+marker+`"}
`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, libc := range []string{runtimes.HostTarget().Libc, "musl"} {
		p, err := m.PrepareFor(context.Background(), t.TempDir(), runtimes.HostTarget().Arch, libc)
		if err != nil {
			t.Fatalf("%s: %v", libc, err)
		}
		v := p.VersionCheck
		if v == nil || strings.Join(v.Argv, " ") != "bin/tool --version" || strings.Join(v.Env, " ") != "MARK="+marker || v.Want != "1.2.3" {
			t.Fatalf("%s: version check %+v, want bin/tool --version with MARK, wanting 1.2.3", libc, v)
		}
		// Positive control: the entry is there, and would write it.
		if b, err := os.ReadFile(filepath.Join(p.Dir, "bin", "tool")); err != nil || !strings.Contains(string(b), "$MARK") {
			t.Fatalf("%s: bin/tool is not the package's: %q, %v", libc, b, err)
		}
	}
	if b, err := os.ReadFile(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the package's version command ran on the host (%s holds %q, %v)", marker, b, err)
	}
}
