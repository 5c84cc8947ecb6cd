package npm

import (
	"archive/tar"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/glibc"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// fakeNpmCI puts an `npm` first on PATH whose `ci` makes the tree npm ci
// makes for a lock: the package, a dependency with a dependency of its own,
// and the script links npm writes for them, at the top and nested
// (node_modules/dep/node_modules/.bin). Any other npm command fails.
func fakeNpmCI(t *testing.T) {
	t.Helper()
	bin := t.TempDir()
	script := `#!/bin/sh
[ "$1" = ci ] || { echo "fake npm: only ci" >&2; exit 1; }
set -e
m=node_modules
mkdir -p $m/@scope/tool/bin $m/dep/node_modules/sub $m/.bin $m/dep/node_modules/.bin
printf '#!/bin/sh\necho tool 1.2.3\n' > $m/@scope/tool/bin/tool
chmod 755 $m/@scope/tool/bin/tool
echo '{"name": "@scope/tool", "version": "1.2.3"}' > $m/@scope/tool/package.json
echo 'console.log(1)' > $m/dep/node_modules/sub/cli.js
ln -s ../@scope/tool/bin/tool $m/.bin/tool
ln -s ../sub/cli.js $m/dep/node_modules/.bin/sub
`
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// lockedManifest is an npm manifest with a lock for @scope/tool, entry
// bin/tool in the package.
func lockedManifest(t *testing.T) *adapter.Manifest {
	t.Helper()
	dir := t.TempDir()
	lock := `{"name": "r", "lockfileVersion": 3, "packages": {
  "": {"dependencies": {"@scope/tool": "1.2.3"}},
  "node_modules/@scope/tool": {"version": "1.2.3", "integrity": "` + goodIntegrity + `"},
  "node_modules/dep": {"version": "1.0.0", "integrity": "` + goodIntegrity + `"},
  "node_modules/dep/node_modules/sub": {"version": "1.0.0", "integrity": "` + goodIntegrity + `"}}}`
	if err := os.WriteFile(filepath.Join(dir, "l.json"), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := adapter.Parse("x.yaml", dir, []byte(npmManifest(goodWith+"      lock: l.json\n      version_args: [\"--version\"]\n")))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// npm ci's script links, nested ones included, are dropped: the runtime
// links into a case (on main the nested link failed "link runtime").
func TestNpmCIDropsNestedBinLinks(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		testenv.Missing(t, "/bin/sh", "install Debian's dash")
	}
	fakeNpmCI(t)
	cache := t.TempDir()
	t.Setenv(runtimes.CacheEnv, cache)
	m := lockedManifest(t)
	p, err := m.PrepareFor(context.Background(), t.TempDir(), runtimes.HostTarget().Arch, runtimes.HostTarget().Libc)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	// Positive control: the fake's tree reached the runtime.
	if _, err := os.Stat(filepath.Join(p.Dir, "node_modules", "dep", "node_modules", "sub", "cli.js")); err != nil {
		t.Fatalf("the nested dependency is not in the runtime: %v", err)
	}
	for _, root := range []string{p.Dir, cache} {
		filepath.WalkDir(root, func(q string, d fs.DirEntry, err error) error {
			if err == nil && (d.Name() == ".bin" || d.Type()&fs.ModeSymlink != 0) {
				t.Errorf("%s left in %s", q, root)
			}
			return nil
		})
	}
}

// The version check is in the cache key: a manifest that checks another
// way gets its own entry instead of evicting the other's.
func TestVersionCheckIsInTheCacheKey(t *testing.T) {
	parse := func(extra string) runtimes.Spec {
		t.Helper()
		m, err := adapter.Parse("x.yaml", t.TempDir(), []byte(npmManifest(goodWith+extra)))
		if err != nil {
			t.Fatal(err)
		}
		c, errs := ParseConfig(m.Dir, m.Runtime.Prepare.Node)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		s, err := SpecFor(c, runtimes.Target{Arch: "amd64", Libc: "glibc"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	keys := map[string]string{}
	for _, extra := range []string{
		"",
		"      version_args: [\"--version\"]\n",
		"      version_args: [\"version\"]\n",
		"      version_args: [\"--version\"]\n      version_env: {NO_UPDATE: \"1\"}\n",
	} {
		k := parse(extra).Key()
		if prev, ok := keys[k]; ok {
			t.Errorf("%q and %q share the cache key %s", prev, extra, k)
		}
		keys[k] = extra
	}
	if a, b := parse("      version_args: [\"--version\"]\n").Key(), parse("      version_args: [\"--version\"]\n").Key(); a != b {
		t.Errorf("the same manifest has two keys: %s, %s", a, b)
	}
}

// fakeNpmPack puts an `npm` first on PATH whose `pack` serves the tarballs
// in tgzs (package@version -> path) as the registry would, logging each
// to $FAKE_NPM_LOG when set; any other npm command fails.
func fakeNpmPack(t *testing.T, tgzs map[string]string) {
	t.Helper()
	bin := t.TempDir()
	var cases strings.Builder
	for spec, p := range tgzs {
		cases.WriteString("  '" + spec + "') src='" + p + "' ;;\n")
	}
	script := `#!/bin/sh
[ "$1" = pack ] || { echo "fake npm: only pack" >&2; exit 1; }
dest= ; spec=
while [ $# -gt 0 ]; do
  case "$1" in --pack-destination) dest=$2; shift ;; --json|pack) ;; *) spec=$1 ;; esac
  shift
done
case "$spec" in
` + cases.String() + `  *) echo "npm error code E404" >&2; exit 1 ;;
esac
[ -z "$FAKE_NPM_LOG" ] || echo "$spec" >> "$FAKE_NPM_LOG"
cp "$src" "$dest/fake.tgz"
echo '[{"filename": "fake.tgz", "integrity": "ignored"}]'
`
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// A platform's requires are its build's alone: the glibc build of a
// manifest whose musl build needs libstdc++ does not (on main `requires`
// under a platform was an unknown key).
func TestPlatformRequiresAreThatBuildsOwn(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		testenv.Missing(t, "/bin/sh", "install Debian's dash")
	}
	wrapper := writeTgz(t, []tarEntry{{name: "package/package.json", typ: tar.TypeReg, mode: 0o644, body: `{"name": "@scope/tool", "version": "1.2.3"}`}})
	build := writeTgz(t, []tarEntry{{name: "package/bin/tool", typ: tar.TypeReg, mode: 0o755, body: "#!/bin/sh\necho tool 1.2.3\n"}})
	wi, err := integrity(wrapper)
	if err != nil {
		t.Fatal(err)
	}
	bi, err := integrity(build)
	if err != nil {
		t.Fatal(err)
	}
	fakeNpmPack(t, map[string]string{"@scope/tool@1.2.3": wrapper, "tool-linux-glibc@1.2.3": build, "tool-linux-musl@1.2.3": build})
	t.Setenv(runtimes.CacheEnv, t.TempDir())
	arch := runtimes.HostTarget().Arch
	doc := npmManifest(`      package: "@scope/tool"
      version: "1.2.3"
      integrity: "` + wi + `"
      entry: {bin: bin/tool}
      platforms:
        - {arch: ` + arch + `, libc: glibc, package: tool-linux-glibc, integrity: "` + bi + `", requires: [glibc]}
        - {arch: ` + arch + `, libc: musl, package: tool-linux-musl, integrity: "` + bi + `", requires: [musl, libstdc++, libgcc, musl]}
`)
	m, err := adapter.Parse("x.yaml", t.TempDir(), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for libc, want := range map[string]string{"glibc": "glibc", "musl": "musl libstdc++ libgcc"} {
		p, err := m.PrepareFor(context.Background(), t.TempDir(), arch, libc)
		if err != nil {
			t.Fatalf("%s: %v", libc, err)
		}
		if got := strings.Join(p.Requires, " "); got != want {
			t.Errorf("%s build requires %q, want %q", libc, got, want)
		}
	}

	// Only what a build links against; the rest is the manifest's.
	bad := strings.Replace(doc, "requires: [glibc]", "requires: [glibc, bash]", 1)
	if _, err := adapter.Parse("x.yaml", t.TempDir(), []byte(bad)); err == nil || !strings.Contains(err.Error(), `"bash" is not a requirement of one build`) {
		t.Fatalf("bash in a platform's requires: %v", err)
	}
}

// With glibc_layer, an image without glibc (musl) gets the glibc build
// carrying the host's glibc: the layer's files in glibc/, the binary's
// interpreter rewritten to the layer's mount, glibc provided by the
// runtime. Without it the same image is a skipped platform, as on main
// (where glibc_layer was an unknown key).
func TestGlibcLayerCarriesGlibcForAMuslImage(t *testing.T) {
	cat, err := os.ReadFile("/bin/cat")
	if err != nil {
		testenv.Missing(t, "/bin/cat", "install Debian's coreutils")
	}
	wrapper := writeTgz(t, []tarEntry{{name: "package/package.json", typ: tar.TypeReg, mode: 0o644, body: `{"name": "@scope/tool", "version": "1.2.3"}`}})
	build := writeTgz(t, []tarEntry{{name: "package/bin/tool", typ: tar.TypeReg, mode: 0o755, body: string(cat)}})
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
	doc := npmManifest(`      package: "@scope/tool"
      version: "1.2.3"
      integrity: "` + wi + `"
      entry: {bin: bin/tool}
      glibc_layer: true
      platforms:
        - {arch: ` + arch + `, libc: glibc, package: tool-linux-glibc, integrity: "` + bi + `", requires: [glibc]}
`)
	m, err := adapter.Parse("x.yaml", t.TempDir(), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.PrepareFor(context.Background(), t.TempDir(), arch, "musl")
	if err != nil {
		t.Fatal(err)
	}
	if p.GlibcLayer == nil || !strings.HasSuffix(p.Platform, "-glibc-layer") || !slices.Contains(p.Provides, "glibc") {
		t.Fatalf("musl image: platform %q layer %+v provides %v; want the glibc build with a layer that provides glibc", p.Platform, p.GlibcLayer, p.Provides)
	}
	if got, err := glibc.Interp(filepath.Join(p.Dir, "bin", "tool")); err != nil || got != adapter.GlibcLayerMountDir+"/ld.so" {
		t.Errorf("bin/tool's interpreter %q (%v), want the layer's loader", got, err)
	}
	for _, f := range p.GlibcLayer.Files {
		if _, err := os.Stat(filepath.Join(p.Dir, f.Path)); err != nil || len(f.SHA256) != 64 {
			t.Errorf("layer file %+v: %v", f, err)
		}
	}
	if !p.GlibcLayer.Has("libc.so.6") {
		t.Errorf("layer %+v has no libc.so.6", p.GlibcLayer.Files)
	}

	// The glibc image's build is untouched.
	g, err := m.PrepareFor(context.Background(), t.TempDir(), arch, "glibc")
	if err != nil {
		t.Fatal(err)
	}
	if g.GlibcLayer != nil || g.Provides != nil {
		t.Errorf("glibc image got a layer: %+v %v", g.GlibcLayer, g.Provides)
	}
	if got, _ := glibc.Interp(filepath.Join(g.Dir, "bin", "tool")); strings.HasPrefix(got, adapter.GlibcLayerMountDir) {
		t.Errorf("glibc build's interpreter is the layer's: %q", got)
	}

	without, err := adapter.Parse("x.yaml", t.TempDir(), []byte(strings.Replace(doc, "      glibc_layer: true\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := without.PrepareFor(context.Background(), t.TempDir(), arch, "musl"); !errors.Is(err, adapter.ErrPlatform) {
		t.Fatalf("musl image without glibc_layer: %v, want ErrPlatform", err)
	}
}
