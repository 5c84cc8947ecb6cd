package npm

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/hostfile"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

func TestNodeRange(t *testing.T) {
	for _, tc := range []struct {
		rng     string
		in, out []string
	}{
		// The key's first meaning: a bare x.y.z is a minimum.
		{"20.6.0", []string{"v20.6.0", "20.6.1", "v24.16.0"}, []string{"v20.5.9", "v18.19.0"}},
		{"=20.6.0", []string{"v20.6.0"}, []string{"v20.6.1", "v20.5.0"}},
		{">=24.16.0", []string{"v24.16.0", "v25.0.0"}, []string{"v24.15.9", "v20.20.2"}},
		{">=24.16 <25", []string{"v24.16.0", "v24.99.1"}, []string{"v25.0.0", "v24.15.0"}},
		{"^24.16.0", []string{"v24.16.0", "v24.22.3"}, []string{"v25.0.0", "v24.15.0"}},
		{"^0.2.3", []string{"v0.2.3", "v0.2.9"}, []string{"v0.3.0"}},
		{"~24.16", []string{"v24.16.0", "v24.16.9"}, []string{"v24.17.0"}},
		{"~24", []string{"v24.0.0", "v24.99.0"}, []string{"v25.0.0"}},
		{"^0.0.3", []string{"v0.0.3"}, []string{"v0.0.4", "v0.1.0"}},
		{"24.x", []string{"v24.0.0", "v24.22.3"}, []string{"v25.0.0", "v23.9.9"}},
		{">22", []string{"v23.0.0"}, []string{"v22.9.9"}},
		{"<=22.3", []string{"v22.3.7", "v1.0.0"}, []string{"v22.4.0"}},
		{"^20.6 || >=24.16.0", []string{"v20.20.2", "v24.16.0"}, []string{"v21.0.0", "v24.15.0"}},
		{"*", []string{"v0.0.1", "v99.0.0"}, nil},
	} {
		r, err := ParseNodeRange(tc.rng)
		if err != nil {
			t.Errorf("%q: %v", tc.rng, err)
			continue
		}
		for _, v := range tc.in {
			if !r.Contains(v) {
				t.Errorf("%q does not contain %s", tc.rng, v)
			}
		}
		for _, v := range tc.out {
			if r.Contains(v) {
				t.Errorf("%q contains %s", tc.rng, v)
			}
		}
	}
	for _, bad := range []string{"", "24.16.0-rc.1", "1.2.3 - 2.0.0", ">=", "latest", "1.x.3", ">=25 <24", "20 ||"} {
		if _, err := ParseNodeRange(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// jsTool is the tarball of a package whose entry is cli.js, and its
// integrity.
func jsTool(t *testing.T) (string, string) {
	t.Helper()
	tgz := writeTgz(t, []tarEntry{
		{name: "package/package.json", typ: tar.TypeReg, mode: 0o644, body: `{"name": "@scope/tool", "version": "1.2.3"}`},
		{name: "package/cli.js", typ: tar.TypeReg, mode: 0o644, body: "console.log('tool 1.2.3')\n"},
	})
	sum, err := integrity(tgz)
	if err != nil {
		t.Fatal(err)
	}
	return tgz, sum
}

// fakeNodePackage is npm's node-linux-<arch> as a tarball whose bin/node
// answers --version with v99.0.0 and runs anything else as the tool would
// (a script: the test does not download 50 MB); started, it first appends
// a line to the host file marker.
func fakeNodePackage(t *testing.T, marker string) (string, string) {
	t.Helper()
	tgz := writeTgz(t, []tarEntry{
		{name: "package/bin/node", typ: tar.TypeReg, mode: 0o755, body: "#!/bin/sh\necho \"node $*\" >> '" + marker + "'\n[ \"$1\" = --version ] && { echo v99.0.0; exit 0; }\necho tool 1.2.3 run by the fetched node\n"},
		{name: "package/include/node/node.h", typ: tar.TypeReg, mode: 0o644, body: "/* headers the runtime leaves out */\n"},
	})
	sum, err := integrity(tgz)
	if err != nil {
		t.Fatal(err)
	}
	return tgz, sum
}

// jsManifest is the manifest of @scope/tool's cli.js with with.node and
// the rest of the block (node_package) in extra.
func jsManifest(t *testing.T, toolIntegrity, node, extra string) *adapter.Manifest {
	t.Helper()
	m, err := adapter.Parse("x.yaml", t.TempDir(), []byte(npmManifest(`      package: "@scope/tool"
      version: "1.2.3"
      integrity: "`+toolIntegrity+`"
      entry: {node: cli.js}
      version_args: ["--version"]
      node: "`+node+`"
`+extra)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func nodePackageBlock(version, integrity string) string {
	return "      node_package:\n        version: " + version + "\n        integrity: {" + runtimes.HostTarget().Arch + ": \"" + integrity + "\"}\n"
}

func needSh(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/bin/sh"); err != nil {
		testenv.Missing(t, "/bin/sh", "install Debian's dash")
	}
}

// When the host's Node is out of with.node, the Node pinned in
// with.node_package is fetched (its tarball checked against the pin),
// cached as a runtime of its own, copied to bin/node and named in the
// evidence as npm's, package and integrity, its version the pin's. It is
// the manifest's pick, as the harness is: nothing starts it on the host
// (on main its --version ran there, and the harness's check with it).
func TestNodePackageIsFetchedWhenTheHostsNodeIsOutOfRange(t *testing.T) {
	needSh(t)
	tool, toolSum := jsTool(t)
	marker := filepath.Join(t.TempDir(), "node-ran-on-the-host")
	node, nodeSum := fakeNodePackage(t, marker)
	nodePkg := NodePackageName(runtimes.HostTarget().Arch)
	packLog := filepath.Join(t.TempDir(), "pack.log")
	fakeNpmPack(t, map[string]string{"@scope/tool@1.2.3": tool, nodePkg + "@99.0.0": node})
	t.Setenv("FAKE_NPM_LOG", packLog)
	cache := t.TempDir()
	t.Setenv(runtimes.CacheEnv, cache)

	m := jsManifest(t, toolSum, ">=99.0.0", nodePackageBlock("99.0.0", nodeSum))
	p, err := m.PrepareFor(context.Background(), t.TempDir(), runtimes.HostTarget().Arch, runtimes.HostTarget().Libc)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(p.Dir, "bin", "node"))
	if err != nil || !strings.Contains(string(got), "run by the fetched node") {
		t.Fatalf("bin/node is not the fetched Node: %q, %v", clip(string(got[:min(len(got), 80)])), err)
	}
	sum, _, _ := hostfile.SHA256File(filepath.Join(p.Dir, "bin", "node"))
	want := adapter.HostPart{Path: "bin/node", Name: "node", Version: "v99.0.0", SHA256: sum, Source: "npm", From: nodePkg + "@99.0.0", Integrity: nodeSum, Interpreter: true}
	if len(p.Host) != 1 || p.Host[0] != want {
		t.Fatalf("evidence of bin/node: %+v, want %+v", p.Host, want)
	}
	if b, err := os.ReadFile(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the fetched Node ran on the host: %q, %v", b, err)
	}
	entries, _ := filepath.Glob(filepath.Join(cache, nodePkg+"@99.0.0-linux-*"))
	var dirs []string
	for _, e := range entries {
		if fi, err := os.Stat(e); err == nil && fi.IsDir() {
			dirs = append(dirs, e)
		}
	}
	if len(dirs) != 1 {
		t.Fatalf("cache entries of the Node: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(dirs[0], "include")); err == nil {
		t.Errorf("the Node's entry keeps more than bin/node")
	}

	// Another harness (another cache key) pinning the same Node reuses
	// its entry: one download of the Node in all.
	other := jsManifest(t, toolSum, ">=99.0.0", nodePackageBlock("99.0.0", nodeSum)+"      version_env: {OTHER: \"1\"}\n")
	if _, err := other.PrepareFor(context.Background(), t.TempDir(), runtimes.HostTarget().Arch, runtimes.HostTarget().Libc); err != nil {
		t.Fatalf("prepare another: %v", err)
	}
	log, _ := os.ReadFile(packLog)
	if n := strings.Count(string(log), nodePkg+"@99.0.0"); n != 1 {
		t.Errorf("the Node was packed %d times:\n%s", n, log)
	}
	if n := strings.Count(string(log), "@scope/tool@1.2.3"); n != 2 {
		t.Errorf("positive control: the tool was packed %d times, want 2:\n%s", n, log)
	}
}

// A pinned Node whose tarball does not hash to the pin fails, naming the
// manifest's field, and nothing is cached.
func TestNodePackageWithAWrongIntegrityFailsNamingTheField(t *testing.T) {
	needSh(t)
	tool, toolSum := jsTool(t)
	node, _ := fakeNodePackage(t, filepath.Join(t.TempDir(), "marker"))
	nodePkg := NodePackageName(runtimes.HostTarget().Arch)
	fakeNpmPack(t, map[string]string{"@scope/tool@1.2.3": tool, nodePkg + "@99.0.0": node})
	cache := t.TempDir()
	t.Setenv(runtimes.CacheEnv, cache)
	m := jsManifest(t, toolSum, ">=99.0.0", nodePackageBlock("99.0.0", goodIntegrity))
	_, err := m.PrepareFor(context.Background(), t.TempDir(), runtimes.HostTarget().Arch, runtimes.HostTarget().Libc)
	field := "runtime.prepare.with.node_package.integrity." + runtimes.HostTarget().Arch
	if !errors.Is(err, runtimes.ErrChecksum) || !strings.Contains(err.Error(), field+": ") || !strings.Contains(err.Error(), "pinned "+goodIntegrity) {
		t.Fatalf("wrong Node integrity: %v, want ErrChecksum naming %s", err, field)
	}
	left, _ := os.ReadDir(cache)
	for _, e := range left {
		if !strings.HasSuffix(e.Name(), ".lock") {
			t.Errorf("cache holds %s after a failed preparation", e.Name())
		}
	}
}

// hostNodeVersion is the host's `node --version`, or a missing
// prerequisite.
func hostNodeVersion(t *testing.T) (string, string) {
	t.Helper()
	p, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node on PATH", "install Node 20 (NodeSource's nodejs)")
	}
	p, _ = filepath.EvalSymlinks(p)
	out, err := exec.Command(p, "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v", err)
	}
	return p, strings.TrimSpace(string(out))
}

// A range the host's Node satisfies uses the host's Node: nothing is
// fetched (the fake registry has no Node, and the pin is wrong), and the
// evidence names the host path.
func TestNodeRangeTheHostSatisfiesUsesTheHostsNode(t *testing.T) {
	needSh(t)
	hostPath, version := hostNodeVersion(t)
	major, _, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	tool, toolSum := jsTool(t)
	fakeNpmPack(t, map[string]string{"@scope/tool@1.2.3": tool})
	t.Setenv(runtimes.CacheEnv, t.TempDir())
	m := jsManifest(t, toolSum, "^"+major+".0.0", nodePackageBlock(major+".0.0", goodIntegrity))
	p, err := m.PrepareFor(context.Background(), t.TempDir(), runtimes.HostTarget().Arch, runtimes.HostTarget().Libc)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	hostSum, _, _ := hostfile.SHA256File(hostPath)
	if len(p.Host) != 1 || p.Host[0].Source != "host" || p.Host[0].From != hostPath || p.Host[0].SHA256 != hostSum || p.Host[0].Version != version || p.Host[0].Integrity != "" {
		t.Fatalf("evidence of bin/node: %+v, want the host's %s (%s)", p.Host, hostPath, version)
	}

	// Out of range with no pin: the platform is skipped, saying how to
	// get a Node.
	m = jsManifest(t, toolSum, ">=999.0.0", "")
	_, err = m.PrepareFor(context.Background(), t.TempDir(), runtimes.HostTarget().Arch, runtimes.HostTarget().Libc)
	if !errors.Is(err, adapter.ErrPlatform) || !strings.Contains(err.Error(), `not in with.node ">=999.0.0"`) || !strings.Contains(err.Error(), "with.node_package") {
		t.Fatalf("host Node out of range, no pin: %v, want ErrPlatform naming with.node_package", err)
	}
}

// node_package's mistakes are line-numbered manifest errors.
func TestNodePackageErrorsNameTheKey(t *testing.T) {
	base := `      package: "@scope/tool"
      version: "1.2.3"
      integrity: "` + goodIntegrity + `"
`
	for _, tc := range []struct{ with, want string }{
		{"      entry: {node: cli.js}\n      node: \">=24.16.0\"\n" + nodePackageBlock("24.16.0", goodIntegrity), ""},
		{"      entry: {node: cli.js}\n      node: \">=24.16.0\"\n" + nodePackageBlock("24.15.0", goodIntegrity), `node_package.version: "24.15.0" is not in with.node ">=24.16.0"`},
		{"      entry: {node: cli.js}\n" + nodePackageBlock("24.16.0", goodIntegrity), "node_package: without with.node"},
		{"      entry: {bin: bin/tool}\n      node_package: {version: 24.16.0, integrity: {amd64: \"" + goodIntegrity + "\"}}\n", "node_package: only with entry.node"},
		{"      entry: {node: cli.js}\n      node: \">=24\"\n      node_package: {version: 24.16.0, integrity: \"" + goodIntegrity + "\"}\n", "node_package.integrity: want a mapping of arch to integrity"},
		{"      entry: {node: cli.js}\n      node: \">=24\"\n      node_package: {version: 24.16.0, integrity: {x64: \"" + goodIntegrity + "\"}}\n", `unknown key "x64" (known: amd64, arm64)`},
		{"      entry: {node: cli.js}\n      node: \">=24\"\n      node_package: {version: \"^24\", integrity: {amd64: \"" + goodIntegrity + "\"}}\n", `"^24" is not an exact version`},
		{"      entry: {node: cli.js}\n      node: \">=24 <23\"\n", `matches no version`},
		{"      entry: {node: cli.js}\n      node: \"twenty\"\n", `x.yaml:14: runtime.prepare.with.node: bad Node range "twenty"`},
	} {
		_, err := adapter.Parse("x.yaml", t.TempDir(), []byte(npmManifest(base+tc.with)))
		if tc.want == "" {
			if err != nil {
				t.Errorf("positive control refused: %v", err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.with, err, tc.want)
		}
	}
}

// A fetched Node is in the runtime's cache key, the host's is not: the
// same manifest gets another entry on a host whose own Node fits, and a
// changed pin gets one of its own.
func TestFetchedNodeIsInTheCacheKey(t *testing.T) {
	_, version := hostNodeVersion(t)
	major, _, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	spec := func(nodeIntegrity string) runtimes.Spec {
		t.Helper()
		m := jsManifest(t, goodIntegrity, "^"+major+".0.0", nodePackageBlock(major+".0.0", nodeIntegrity))
		c, errs := ParseConfig(m.Dir, m.Runtime.Prepare.Node)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		s, err := SpecFor(c, runtimes.HostTarget())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	other := strings.Replace(goodIntegrity, "gXQh", "AAAA", 1)
	host, hostOtherPin := spec(goodIntegrity).Key(), spec(other).Key()
	if host != hostOtherPin {
		t.Errorf("with the host's Node, an unused pin changed the key: %s, %s", host, hostOtherPin)
	}
	t.Setenv("PATH", t.TempDir()) // no node on PATH: the pin is fetched
	fetched, fetchedOtherPin := spec(goodIntegrity).Key(), spec(other).Key()
	if fetched == host || fetched == fetchedOtherPin {
		t.Errorf("keys: host %s, fetched %s, fetched with another pin %s; want three", host, fetched, fetchedOtherPin)
	}
}
