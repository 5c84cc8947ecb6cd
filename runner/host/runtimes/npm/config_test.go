package npm

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

const goodIntegrity = "sha512-gXQh3SaZmWTfVMc4Ao5+LGbVeKvzyO7tolok0nLsZgq9nGjZx/EEU3NM8C+qUnB4Nvs2rswG5qOVgLzQkq0fHQ=="

// npmManifest is a manifest whose `with` block is with (indented by the
// caller to 6 spaces); the block starts at line 8.
func npmManifest(with string) string {
	return `name: x
version: "1"
launch:
  argv: ["{runtime_dir}/bin/x", "{prompt}"]
  deadline: 60
runtime:
  prepare:
    name: npm
    with:
` + with
}

const goodWith = `      package: "@scope/tool"
      version: "1.2.3"
      integrity: "` + goodIntegrity + `"
      entry: {bin: bin/tool}
`

// A valid block loads (the positive control for the errors below), and
// every kind of mistake is an error naming the manifest's line and key.
func TestNpmBlockErrorsNameTheLine(t *testing.T) {
	if _, err := adapter.Parse("x.yaml", t.TempDir(), []byte(npmManifest(goodWith))); err != nil {
		t.Fatalf("good manifest refused: %v", err)
	}
	for _, tc := range []struct{ name, with, want string }{
		{"missing integrity", strings.Replace(goodWith, `      integrity: "`+goodIntegrity+`"`+"\n", "", 1),
			`x.yaml:10: runtime.prepare.with: missing required key "integrity"`},
		{"short integrity", strings.Replace(goodWith, goodIntegrity, "sha512-abc=", 1),
			`x.yaml:12: runtime.prepare.with.integrity: bad integrity "sha512-abc="`},
		{"sha1 integrity", strings.Replace(goodWith, goodIntegrity, "sha1-deadbeef", 1),
			`x.yaml:12: runtime.prepare.with.integrity: bad integrity`},
		{"range version", strings.Replace(goodWith, `"1.2.3"`, `"^1.2.3"`, 1),
			`x.yaml:11: runtime.prepare.with.version: "^1.2.3" is not an exact version`},
		{"tag version", strings.Replace(goodWith, `"1.2.3"`, `latest`, 1),
			`x.yaml:11: runtime.prepare.with.version: "latest" is not an exact version`},
		{"bad package", strings.Replace(goodWith, `"@scope/tool"`, `"Tool Name"`, 1),
			`x.yaml:10: runtime.prepare.with.package: bad npm package name "Tool Name"`},
		{"unknown key", goodWith + "      intgrity: x\n",
			`x.yaml:14: runtime.prepare.with: unknown key "intgrity"`},
		{"two entries", strings.Replace(goodWith, "{bin: bin/tool}", "{bin: bin/tool, node: cli.js}", 1),
			`x.yaml:13: runtime.prepare.with.entry: want exactly one of node`},
		{"no entry", strings.Replace(goodWith, "      entry: {bin: bin/tool}\n", "", 1),
			`missing required key "entry"`},
		{"escaping entry", strings.Replace(goodWith, "bin/tool", "../../etc/passwd", 1),
			`x.yaml:13: runtime.prepare.with.entry.bin: "../../etc/passwd" is not a clean relative path`},
		{"escaping keep", goodWith + "      keep: [/etc]\n",
			`x.yaml:14: runtime.prepare.with.keep[0]: "/etc" is not a clean relative path`},
		{"bad arch", goodWith + "      platforms:\n        - {arch: x64, libc: glibc, package: t-linux, integrity: \"" + goodIntegrity + "\"}\n",
			`x.yaml:15: runtime.prepare.with.platforms[0].arch: bad arch "x64" (want amd64 or arm64)`},
		{"platform without integrity", goodWith + "      platforms:\n        - {arch: amd64, libc: musl, package: t-linux}\n",
			`x.yaml:15: runtime.prepare.with.platforms[0]: missing required key "integrity"`},
		{"platform twice", goodWith + "      platforms:\n        - {arch: amd64, libc: musl, package: a, integrity: \"" + goodIntegrity + "\"}\n        - {arch: amd64, libc: musl, package: b, integrity: \"" + goodIntegrity + "\"}\n",
			`x.yaml:16: runtime.prepare.with.platforms[1]: platform linux-x64-musl listed twice`},
		{"baseline arm", goodWith + "      platforms:\n        - {arch: arm64, libc: glibc, cpu: baseline, package: a, integrity: \"" + goodIntegrity + "\"}\n",
			`cpu: baseline is an x86-64 variant`},
		{"bad tree sum", goodWith + "      tree_sha256: abc\n",
			`x.yaml:14: runtime.prepare.with.tree_sha256: bad sha256 "abc"`},
		{"missing lock", goodWith + "      lock: nope.json\n",
			`x.yaml:14: runtime.prepare.with.lock: open `},
		{"glibc_layer not a bool", goodWith + "      glibc_layer: yes\n",
			`x.yaml:14: runtime.prepare.with.glibc_layer: want true or false, got "yes"`},
		{"empty with", "", `x.yaml:9: runtime.prepare.with: want a mapping, got nothing`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := adapter.Parse("x.yaml", t.TempDir(), []byte(npmManifest(tc.with)))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, adapter.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

// A prepare block without `with` is refused at the prepare line.
func TestNpmBlockWithoutWith(t *testing.T) {
	doc := strings.TrimSuffix(npmManifest(""), "    with:\n")
	_, err := adapter.Parse("x.yaml", t.TempDir(), []byte(doc))
	if err == nil || !strings.Contains(err.Error(), "x.yaml:8: runtime.prepare.with: missing (the npm preparer needs") {
		t.Fatalf("no with: %v", err)
	}
}

// A lock that pins another integrity than the manifest, or a dependency
// without one, is refused when the manifest loads; the lock that matches
// loads.
func TestNpmLockMustMatchTheManifest(t *testing.T) {
	dir := t.TempDir()
	lock := func(integrity, depIntegrity string) {
		data := `{"name": "r", "lockfileVersion": 3, "packages": {
  "": {"dependencies": {"@scope/tool": "1.2.3"}},
  "node_modules/@scope/tool": {"version": "1.2.3", "integrity": "` + integrity + `"},
  "node_modules/dep": {"version": "1.0.0", "integrity": "` + depIntegrity + `"}}}`
		if err := os.WriteFile(filepath.Join(dir, "l.json"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	doc := []byte(npmManifest(goodWith + "      lock: l.json\n"))
	lock(goodIntegrity, goodIntegrity)
	if _, err := adapter.Parse("x.yaml", dir, doc); err != nil {
		t.Fatalf("matching lock refused: %v", err)
	}
	lock(strings.Replace(goodIntegrity, "gXQh", "AAAA", 1), goodIntegrity)
	if _, err := adapter.Parse("x.yaml", dir, doc); err == nil || !strings.Contains(err.Error(), "x.yaml:14: runtime.prepare.with.lock: the lock pins @scope/tool@1.2.3") {
		t.Fatalf("lock with another integrity: %v", err)
	}
	lock(goodIntegrity, "")
	if _, err := adapter.Parse("x.yaml", dir, doc); err == nil || !strings.Contains(err.Error(), "without integrity, e.g. node_modules/dep") {
		t.Fatalf("lock with an unpinned dependency: %v", err)
	}
}

func TestPlatformChoice(t *testing.T) {
	c := Config{Platforms: []Platform{
		{Arch: "amd64", Libc: "glibc", Package: "plain"},
		{Arch: "amd64", Libc: "glibc", Baseline: true, Package: "baseline"},
		{Arch: "amd64", Libc: "musl", Baseline: true, Package: "musl-baseline"},
	}}
	for _, tc := range []struct {
		t    runtimes.Target
		want string
	}{
		{runtimes.Target{Arch: "amd64", Libc: "glibc", Baseline: false}, "plain"},
		{runtimes.Target{Arch: "amd64", Libc: "glibc", Baseline: true}, "baseline"},
		// A baseline build runs on every x86-64: used when it is the only one.
		{runtimes.Target{Arch: "amd64", Libc: "musl", Baseline: false}, "musl-baseline"},
		{runtimes.Target{Arch: "arm64", Libc: "glibc", Baseline: false}, ""},
	} {
		p, ok := c.platformFor(tc.t)
		if p.Package != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: %q %v, want %q", tc.t, p.Package, ok, tc.want)
		}
	}
	// No plain build for a CPU without AVX2: the platform is not covered.
	c.Platforms = c.Platforms[:1]
	if _, ok := c.platformFor(runtimes.Target{Arch: "amd64", Libc: "glibc", Baseline: true}); ok {
		t.Error("a plain build chosen for a CPU without AVX2")
	}
	_, err := SpecFor(Config{Package: "p", Version: "1.0.0", EntryBin: "bin/p", Platforms: c.Platforms}, runtimes.Target{Arch: "amd64", Libc: "musl", Baseline: false})
	if !errors.Is(err, adapter.ErrPlatform) || !strings.Contains(err.Error(), "platform linux-x64-musl is not in the manifest's platforms (linux-x64)") {
		t.Errorf("uncovered platform: %v", err)
	}
}

type tarEntry struct {
	name string
	typ  byte
	mode int64
	body string
}

func writeTgz(t *testing.T, entries []tarEntry) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.body))}
		if e.typ == tar.TypeSymlink || e.typ == tar.TypeLink {
			h.Linkname, h.Size = e.body, 0
		}
		if e.typ == tar.TypeDir {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	gz.Close()
	p := filepath.Join(t.TempDir(), "p.tgz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// What real tarballs do: a file listed twice (the last copy wins, as with
// tar), another first segment than "package/", odd modes, directories not
// listed, a pax header.
func TestExtractHandlesRealTarballOddities(t *testing.T) {
	tgz := writeTgz(t, []tarEntry{
		{name: "node/package.json", typ: tar.TypeReg, mode: 0o600, body: `{"name":"x"}`},
		{name: "node/bin/tool", typ: tar.TypeReg, mode: 0o744, body: "first"},
		{name: "node/bin/tool", typ: tar.TypeReg, mode: 0o700, body: "second"},
		{name: "node/lib/", typ: tar.TypeDir, mode: 0o700},
		{name: "node/lib/deep/a.js", typ: tar.TypeReg, mode: 0o666, body: "a"},
	})
	dst := filepath.Join(t.TempDir(), "out")
	if err := extractPackage(tgz, dst); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]struct {
		body string
		mode os.FileMode
	}{
		"package.json": {`{"name":"x"}`, 0o644}, "bin/tool": {"second", 0o755}, "lib/deep/a.js": {"a", 0o644},
	} {
		fi, err := os.Stat(filepath.Join(dst, p))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(dst, p))
		if string(b) != want.body || fi.Mode().Perm() != want.mode {
			t.Errorf("%s: %q %v, want %q %v", p, b, fi.Mode().Perm(), want.body, want.mode)
		}
	}
	for name, entries := range map[string][]tarEntry{
		"escape":  {{name: "package/../../x", typ: tar.TypeReg, body: "x"}},
		"symlink": {{name: "package/l", typ: tar.TypeSymlink, body: "/etc/passwd"}},
		"file over dir": {{name: "package/d/f", typ: tar.TypeReg, body: "x"},
			{name: "package/d", typ: tar.TypeReg, body: "x"}},
	} {
		if err := extractPackage(writeTgz(t, entries), filepath.Join(t.TempDir(), "o")); err == nil {
			t.Errorf("%s: extracted", name)
		}
	}
}

func TestPruneKeepsOnlyKeepPaths(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"package.json", "bin/tool", "bin/other", "lib/a/b.js", "README.md"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(dir, p), []byte(p), 0o644)
	}
	if err := prune(dir, []string{"package.json", "bin/tool", "lib"}); err != nil {
		t.Fatal(err)
	}
	sum, files, _, err := runtimes.TreeSum(dir, nil)
	if err != nil || files != 3 {
		t.Fatalf("%d files left (%v)", files, err)
	}
	for _, gone := range []string{"bin/other", "README.md"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); err == nil {
			t.Errorf("%s kept", gone)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "lib", "a", "b.js")); err != nil {
		t.Errorf("lib/a/b.js removed: %v (tree %s)", err, sum)
	}
	if err := prune(dir, []string{"nope"}); err == nil || !strings.Contains(err.Error(), "keep: nope is not in the package") {
		t.Errorf("missing keep path: %v", err)
	}
}

// A registry that does not answer is adapter.ErrUnavailable (cases skipped
// with the reason), not a failure of the run.
func TestUnreachableRegistryIsUnavailable(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		testenv.Missing(t, "npm on PATH", "install npm")
	}
	t.Setenv("npm_config_registry", "http://127.0.0.1:9/")
	t.Setenv("npm_config_fetch_retries", "0")
	t.Setenv("npm_config_cache", t.TempDir())
	t.Setenv(runtimes.CacheEnv, t.TempDir())
	m, err := adapter.Parse("x.yaml", t.TempDir(), []byte(npmManifest(goodWith)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = m.PrepareFor(ctx, t.TempDir(), runtimes.HostTarget().Arch, runtimes.HostTarget().Libc)
	if !errors.Is(err, adapter.ErrUnavailable) || !strings.Contains(err.Error(), "ECONNREFUSED") {
		t.Fatalf("prepare with the registry down: %v, want ErrUnavailable naming ECONNREFUSED", err)
	}
}

// An entry.bin ELF is checked against the target by its machine and its
// loader: a glibc binary fits glibc, not musl; another arch fits neither;
// a script is not an ELF and is not judged.
func TestCheckBinaryReadsTheELF(t *testing.T) {
	h := runtimes.HostTarget()
	if h.Libc != "glibc" {
		testenv.Missing(t, "a glibc host (its /bin/sh is the glibc ELF under test)", "run on Debian")
	}
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkBinary(sh, runtimes.Target{Arch: h.Arch, Libc: "glibc"}); err != nil {
		t.Fatalf("glibc binary for glibc: %v", err)
	}
	if err := checkBinary(sh, runtimes.Target{Arch: h.Arch, Libc: "musl"}); !errors.Is(err, runtimes.ErrUnsupported) || !strings.Contains(err.Error(), "loader") {
		t.Errorf("glibc binary for musl: %v, want ErrUnsupported naming the loader", err)
	}
	other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[h.Arch]
	if err := checkBinary(sh, runtimes.Target{Arch: other, Libc: "glibc"}); !errors.Is(err, runtimes.ErrUnsupported) {
		t.Errorf("%s binary for %s: %v, want ErrUnsupported", h.Arch, other, err)
	}
	script := filepath.Join(t.TempDir(), "s")
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755)
	if err := checkBinary(script, runtimes.Target{Arch: other, Libc: "musl"}); err != nil {
		t.Errorf("script: %v", err)
	}
}

// An image with no known loader is a platform the preparer cannot cover:
// a skip, not an error that stops the run.
func TestNoLoaderIsAnUncoveredPlatform(t *testing.T) {
	m, err := adapter.Parse("x.yaml", t.TempDir(), []byte(npmManifest(goodWith)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.PrepareFor(context.Background(), t.TempDir(), runtimes.HostTarget().Arch, "none")
	if !errors.Is(err, adapter.ErrPlatform) || !strings.Contains(err.Error(), "neither a glibc nor a musl loader") {
		t.Fatalf("libc none: %v, want ErrPlatform", err)
	}
}

// npm writes no integrity for a bundled dependency (inBundle): the lock is
// accepted when the tarball of the package that bundles it is pinned, and
// only then (a bundle of the root or of a linked package covers nothing).
func TestNpmLockBundledEntriesNeedAPinnedBundler(t *testing.T) {
	dir := t.TempDir()
	doc := []byte(npmManifest(goodWith + "      lock: l.json\n"))
	for _, tc := range []struct {
		name, extra, want string
	}{
		{"bundled by a pinned package", `,
  "node_modules/dep": {"version": "1.0.0", "integrity": "` + goodIntegrity + `", "bundleDependencies": ["b"]},
  "node_modules/dep/node_modules/b": {"version": "2.0.0", "inBundle": true},
  "node_modules/dep/node_modules/b/node_modules/c": {"version": "3.0.0", "inBundle": true}`, ""},
		{"bundled by the root", `,
  "node_modules/b": {"version": "2.0.0", "inBundle": true}`, "1 package(s) without integrity, e.g. node_modules/b"},
		{"bundled by a linked package", `,
  "node_modules/dep": {"resolved": "../dep", "link": true},
  "node_modules/dep/node_modules/b": {"version": "2.0.0", "inBundle": true}`, "1 package(s) without integrity, e.g. node_modules/dep/node_modules/b"},
		{"not marked inBundle", `,
  "node_modules/dep": {"version": "1.0.0", "integrity": "` + goodIntegrity + `"},
  "node_modules/dep/node_modules/b": {"version": "2.0.0"}`, "1 package(s) without integrity, e.g. node_modules/dep/node_modules/b"},
	} {
		data := `{"name": "r", "lockfileVersion": 3, "packages": {
  "": {"dependencies": {"@scope/tool": "1.2.3"}},
  "node_modules/@scope/tool": {"version": "1.2.3", "integrity": "` + goodIntegrity + `"}` + tc.extra + `}}`
		if err := os.WriteFile(filepath.Join(dir, "l.json"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := adapter.Parse("x.yaml", dir, doc)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
