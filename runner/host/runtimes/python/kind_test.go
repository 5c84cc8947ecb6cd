package python

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sandproof/sandproof/internal/testsupport/runtimestest"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

const goodLock = "tool==1.2.3 --hash=sha256:" + hashA + "\ndep==0.1 --hash=sha256:" + hashB + "\n"

const goodWith = `
package: Tool
version: "1.2.3"
lock: tool.lock
python: "3.13"
entry: {module: tool.cli}
version_args: ["--version"]
version_env: {TOOL_OFFLINE: "1"}
`

func manifestDir(t *testing.T, lock string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tool.lock"), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// python keeps the contract of every runtime kind.
func TestPythonKindContract(t *testing.T) {
	runtimestest.Kind(t, Kind, runtimestest.Case{
		Dir: manifestDir(t, goodLock), With: goodWith, Target: runtimes.Target{Arch: "amd64", Libc: "glibc"},
		Pins: adapter.Pins{Package: "Tool", Version: "1.2.3"},
	})
}

func parse(t *testing.T, dir, with string) (Config, []adapter.FieldError) {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(with), &doc); err != nil {
		t.Fatal(err)
	}
	return ParseConfig(dir, doc.Content[0])
}

func TestConfigReadsTheBlock(t *testing.T) {
	c, errs := parse(t, manifestDir(t, goodLock), goodWith)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if c.Package != "tool" || c.Version != "1.2.3" || c.Python != "3.13" || c.EntryModule != "tool.cli" || len(c.Requirements) != 2 {
		t.Errorf("config = %+v", c)
	}
}

func TestConfigRefusesNamingTheField(t *testing.T) {
	for _, tc := range []struct{ lock, edit, want string }{
		{goodLock, "python: \"3.11\"", `python: no interpreter "3.11" (known: 3.13)`},
		{goodLock, "version: \">=1\"", `">=1" is not an exact version`},
		{goodLock, "entry: {module: tool.cli, call: \"tool:main\"}", "want exactly one of module"},
		{goodLock, "entry: {call: \"tool; import os\"}", "is not module:function"},
		{goodLock, "entry: {module: \"-c\"}", "is not a dotted module name"},
		{goodLock, "lock: nowhere.lock", "no such file"},
		{"tool==1.2.4 --hash=sha256:" + hashA, "", "the lock pins tool==1.2.4 (line 1), the manifest 1.2.3"},
		{"other==1.2.3 --hash=sha256:" + hashA, "", "the lock does not pin tool"},
		{"tool>=1.2.3 --hash=sha256:" + hashA, "", `tool.lock: line 1: "tool>=1.2.3" is not pinned`},
		{"tool==1.2.3", "", "tool==1.2.3 has no --hash=sha256"},
		{goodLock, "index_url: https://evil.example", `unknown key "index_url"`},
	} {
		with := goodWith
		if tc.edit != "" {
			key, _, _ := strings.Cut(tc.edit, ":")
			var lines []string
			for _, l := range strings.Split(with, "\n") {
				if !strings.HasPrefix(l, key+":") {
					lines = append(lines, l)
				}
			}
			with = strings.Join(lines, "\n") + tc.edit + "\n"
		}
		_, errs := parse(t, manifestDir(t, tc.lock), with)
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, e.Key+": "+e.Msg)
		}
		if !strings.Contains(strings.Join(msgs, "\n"), tc.want) {
			t.Errorf("%q / %q: errors %q, want %q", tc.lock, tc.edit, msgs, tc.want)
		}
	}
}

func TestSpecNamesTheInterpreterAndKeysOnEveryPin(t *testing.T) {
	c, errs := parse(t, manifestDir(t, goodLock), goodWith)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	glibc, err := SpecFor(c, runtimes.Target{Arch: "amd64", Libc: "glibc"})
	if err != nil {
		t.Fatal(err)
	}
	if glibc.Entry[0] != "python/usr/bin/python3" || glibc.Entry[2] != "tool.cli" {
		t.Errorf("entry %q", glibc.Entry)
	}
	parts := glibc.HostParts(nil)
	if len(parts) != 1 || !parts[0].Interpreter || !parts[0].Pinned || parts[0].Name != "python" || !strings.HasPrefix(parts[0].Version, "3.13.") || !strings.Contains(parts[0].From, "python3.13") {
		t.Errorf("host parts %+v", parts)
	}
	c2 := c
	c2.Requirements = append([]Requirement(nil), c.Requirements...)
	c2.Requirements[1].Hashes = []string{hashA}
	other, _ := SpecFor(c2, runtimes.Target{Arch: "amd64", Libc: "glibc"})
	if other.Key() == glibc.Key() {
		t.Error("a changed dependency hash kept the cache key")
	}
	if _, err := SpecFor(c, runtimes.Target{Arch: "riscv64", Libc: "glibc"}); err == nil || !strings.Contains(err.Error(), "not riscv64") {
		t.Errorf("riscv64: %v", err)
	}
}

// A musl image gets the same tree as a glibc one: it carries its glibc.
func TestPlanIsOneTreeForEveryLibc(t *testing.T) {
	dir := manifestDir(t, goodLock)
	var doc yaml.Node
	yaml.Unmarshal([]byte(goodWith), &doc)
	req := adapter.PrepareRequest{ManifestDir: dir, Node: doc.Content[0]}
	g, err1 := Kind.Plan(req, runtimes.Target{Arch: "amd64", Libc: "glibc"})
	m, err2 := Kind.Plan(req, runtimes.Target{Arch: "amd64", Libc: "musl"})
	if err1 != nil || err2 != nil || g.Key() != m.Key() {
		t.Errorf("glibc %q (%v), musl %q (%v): want one key", g.Key(), err1, m.Key(), err2)
	}
}
