package npm

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/hostile"
	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/artifact"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// holding lists the files under the roots whose bytes contain marker.
func holding(roots []string, marker []byte) []string {
	var hits []string
	for _, root := range roots {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, marker) {
					hits = append(hits, p)
				}
			}
			return nil
		})
	}
	return hits
}

// secretFile is a host file only root may read, holding a marker.
func secretFile(t *testing.T) (string, []byte) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "host-secret")
	marker := []byte("host-secret-marker-" + filepath.Base(filepath.Dir(p)))
	if err := os.WriteFile(p, marker, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, marker
}

// A pinned npm package whose glibc build names a host file as its loader
// (PT_INTERP, here a root-only file holding a marker) is refused while the
// runtime for a musl image is prepared, naming the executable and the
// interpreter, and no byte of the file reaches the runtime or the cache.
// On main the file was copied into the runtime's glibc/ as ld.so.
func TestGlibcLayerTakesNoLoaderFromThePackage(t *testing.T) {
	secret, marker := secretFile(t)
	exe := filepath.Join(t.TempDir(), "tool")
	hostile.ELF(t, exe, secret)
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	wrapper := writeTgz(t, []tarEntry{{name: "package/package.json", typ: tar.TypeReg, mode: 0o644, body: `{"name": "@scope/tool", "version": "1.2.3"}`}})
	build := writeTgz(t, []tarEntry{{name: "package/bin/tool", typ: tar.TypeReg, mode: 0o755, body: string(b)}})
	wi, err := integrity(wrapper)
	if err != nil {
		t.Fatal(err)
	}
	bi, err := integrity(build)
	if err != nil {
		t.Fatal(err)
	}
	fakeNpmPack(t, map[string]string{"@scope/tool@1.2.3": wrapper, "tool-linux-glibc@1.2.3": build})
	cache, work := t.TempDir(), t.TempDir()
	t.Setenv(runtimes.CacheEnv, cache)
	arch := runtimes.HostTarget().Arch
	m, err := adapter.Parse("x.yaml", t.TempDir(), []byte(npmManifest(`      package: "@scope/tool"
      version: "1.2.3"
      integrity: "`+wi+`"
      entry: {bin: bin/tool}
      glibc_layer: true
      platforms:
        - {arch: `+arch+`, libc: glibc, package: tool-linux-glibc, integrity: "`+bi+`"}
`)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.PrepareFor(context.Background(), work, arch, "musl")
	if !errors.Is(err, artifact.ErrRefused) || !strings.Contains(err.Error(), "bin/tool") || !strings.Contains(err.Error(), fmt.Sprintf("%q", secret)) {
		t.Errorf("prepare for musl = %v, want it refused naming bin/tool and %q", err, secret)
	}
	if hits := holding([]string{cache, work}, marker); len(hits) > 0 {
		t.Errorf("the host file's marker reached %v", hits)
	}
}

// A pinned npm package whose platform build carries an ELF decompression
// bomb (an addon whose section-name table is zlib declaring 64 MiB, from
// a 64 KiB file) is refused while the runtime for a musl image is
// prepared, naming the file and its compressed section, with the heap
// the preparation allocated far under what the section inflates to. On
// main the glibc layer's scan (elf.NewFile) inflated it whole: the red
// team's 1 MB file declaring 1 GiB took 3,578 MiB of peak RSS, and
// prepare returned no error.
func TestGlibcLayerRefusesAnELFBomb(t *testing.T) {
	tool, err := exec.LookPath("true")
	if err != nil {
		testenv.Missing(t, "true", "install coreutils")
	}
	exe, err := os.ReadFile(tool)
	if err != nil {
		t.Fatal(err)
	}
	const inflates = 64 << 20
	bomb := hostile.ELFBomb(inflates, false)
	wrapper := writeTgz(t, []tarEntry{{name: "package/package.json", typ: tar.TypeReg, mode: 0o644, body: `{"name": "@scope/tool", "version": "1.2.3"}`}})
	build := writeTgz(t, []tarEntry{
		{name: "package/bin/tool", typ: tar.TypeReg, mode: 0o755, body: string(exe)},
		{name: "package/lib/addon.node", typ: tar.TypeReg, mode: 0o644, body: string(bomb)},
	})
	wi, err := integrity(wrapper)
	if err != nil {
		t.Fatal(err)
	}
	bi, err := integrity(build)
	if err != nil {
		t.Fatal(err)
	}
	fakeNpmPack(t, map[string]string{"@scope/tool@1.2.3": wrapper, "tool-linux-glibc@1.2.3": build})
	t.Setenv(runtimes.CacheEnv, t.TempDir())
	arch := runtimes.HostTarget().Arch
	m, err := adapter.Parse("x.yaml", t.TempDir(), []byte(npmManifest(`      package: "@scope/tool"
      version: "1.2.3"
      integrity: "`+wi+`"
      entry: {bin: bin/tool}
      glibc_layer: true
      platforms:
        - {arch: `+arch+`, libc: glibc, package: tool-linux-glibc, integrity: "`+bi+`"}
`)))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = m.PrepareFor(context.Background(), t.TempDir(), arch, "musl")
	runtime.ReadMemStats(&after)
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("a %d-byte addon inflating to %d: prepare allocated %d bytes: %v", len(bomb), inflates, got, err)
	if !errors.Is(err, artifact.ErrRefused) || errors.Is(err, adapter.ErrPlatform) || !strings.Contains(err.Error(), "lib/addon.node") || !strings.Contains(err.Error(), "compressed") {
		t.Errorf("prepare for musl = %v, want it refused naming lib/addon.node and its compressed section", err)
	}
	// The preparation's own work (the tarballs, the tree) is a few MiB;
	// the bomb's section alone is 64.
	if got >= inflates/2 {
		t.Errorf("prepare allocated %d bytes, the bomb inflated", got)
	}
}

// A link npm ci made (a lock's link entry does) is never followed: the
// tree is refused right after npm ci, before entry.bin is moved into bin/
// through it. On main the move took the host file behind the link into
// the stage, and the failed stage's removal deleted it.
func TestNpmCILinksAreNotFollowed(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		testenv.Missing(t, "/bin/sh", "install Debian's dash")
	}
	outside := t.TempDir()
	victim := filepath.Join(outside, "bin", "tool")
	if err := os.MkdirAll(filepath.Dir(victim), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victim, []byte("#!/bin/sh\necho the host's own file\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	script := "#!/bin/sh\n[ \"$1\" = ci ] || exit 1\nmkdir -p node_modules/@scope\nln -s '" + outside + "' node_modules/@scope/tool\n"
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv(runtimes.CacheEnv, t.TempDir())
	m := lockedManifest(t)
	_, err := m.PrepareFor(context.Background(), t.TempDir(), runtimes.HostTarget().Arch, runtimes.HostTarget().Libc)
	if err == nil || !strings.Contains(err.Error(), "node_modules/@scope/tool") {
		t.Errorf("prepare after npm ci made a link = %v, want it refused naming the link", err)
	}
	if b, err := os.ReadFile(victim); err != nil || !strings.Contains(string(b), "the host's own file") {
		t.Errorf("the file behind the link: %q, %v; want it where it was", b, err)
	}
}

// A lock entry npm ci would make a link of is refused when the manifest
// loads.
func TestNpmLockLinkEntriesAreRefused(t *testing.T) {
	dir := t.TempDir()
	data := `{"name": "r", "lockfileVersion": 3, "packages": {
  "": {"dependencies": {"@scope/tool": "1.2.3"}},
  "node_modules/@scope/tool": {"version": "1.2.3", "integrity": "` + goodIntegrity + `"},
  "node_modules/dep": {"resolved": "../../../../etc", "link": true}}}`
	if err := os.WriteFile(filepath.Join(dir, "l.json"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := adapter.Parse("x.yaml", dir, []byte(npmManifest(goodWith+"      lock: l.json\n")))
	if err == nil || !strings.Contains(err.Error(), "link entr(ies), e.g. node_modules/dep") {
		t.Fatalf("lock with a link entry: %v, want it refused naming it", err)
	}
}

// An npm tarball is an artifact.Tree: a link, a hard link, a device, a
// fifo or a name out of the package is refused as artifact.ErrRefused
// with nothing written outside, and the caps hold (npmLimits, made small
// here).
func TestExtractRefusesWhatIsNotAFileOrDir(t *testing.T) {
	for name, e := range map[string]tarEntry{
		"escape":    {name: "package/../../x", typ: tar.TypeReg, body: "x"},
		"absolute":  {name: "package//etc/x", typ: tar.TypeReg, body: "x"},
		"symlink":   {name: "package/l", typ: tar.TypeSymlink, body: "/etc/passwd"},
		"hard link": {name: "package/h", typ: tar.TypeLink, body: "/etc/passwd"},
		"char dev":  {name: "package/c", typ: tar.TypeChar},
		"fifo":      {name: "package/f", typ: tar.TypeFifo},
	} {
		parent := t.TempDir()
		err := extractPackage(writeTgz(t, []tarEntry{e}), filepath.Join(parent, "o"))
		if !errors.Is(err, artifact.ErrRefused) {
			t.Errorf("%s: %v, want refused", name, err)
		}
		if got, _ := os.ReadDir(parent); len(got) != 1 {
			t.Errorf("%s: %d entries beside the package dir", name, len(got))
		}
	}
	old := npmLimits
	t.Cleanup(func() { npmLimits = old })
	npmLimits = artifact.Limits{FileBytes: 8, TotalBytes: 12, Entries: 10}
	for name, es := range map[string][]tarEntry{
		"file": {{name: "package/a", typ: tar.TypeReg, body: "123456789"}},
		"total": {{name: "package/a", typ: tar.TypeReg, body: "12345678"},
			{name: "package/b", typ: tar.TypeReg, body: "12345"}},
	} {
		if err := extractPackage(writeTgz(t, es), filepath.Join(t.TempDir(), "o")); !errors.Is(err, artifact.ErrRefused) {
			t.Errorf("over the %s cap: %v, want refused", name, err)
		}
	}
}
