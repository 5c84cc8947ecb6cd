package runner_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/wire"
)

// The project grows by units: a scenario, a sandbox provider, a model wire
// format, a runtime kind. Each has one home among the product files, so
// that adding one is a unit and a registration line, not a hunt through
// the tree for every place that knows the last one's name (issue 36). The
// rules below find a unit's key outside its home; exemptions name the
// known breaks, each with its reason, and one no break uses fails too.

// homed is a key that may appear as a string literal only in its home: a
// file, or a directory (a path ending in "/"), module-relative. A literal
// holds the key when it equals it, or, for a route, ends with it ("POST
// /v1/messages").
type homed struct {
	unit, key, home string
	route           bool
}

// homes are the keys and their homes. The scenario names are checked
// against certify's registry as well (TestEveryScenarioHasAHome).
var homes = []homed{
	{"scenario", certify.ScenarioChallenge, "reports/evidence.go", false},
	{"scenario", certify.ScenarioTimeout, "runner/host/certify/scenario_timeout.go", false},
	{"scenario", certify.ScenarioCancel, "runner/host/certify/scenario_cancel.go", false},
	{"scenario", certify.ScenarioModel429, "runner/host/certify/scenario_model429.go", false},
	{"scenario", certify.ScenarioModel400, "runner/host/certify/scenario_model400.go", false},
	{"scenario", certify.ScenarioBorrowed, "runner/host/certify/scenario_borrowed.go", false},
	{"wire endpoint", "/chat/completions", "runner/wire/wire.go", true},
	{"wire endpoint", "/responses", "runner/wire/wire.go", true},
	{"wire endpoint", "/messages", "runner/wire/wire.go", true},
	{"wire endpoint", "/messages/count_tokens", "runner/wire/wire.go", true},
	{"wire endpoint", "/models", "runner/wire/wire.go", true},
	{"wire endpoint", "/models/{model}:generateContent", "runner/wire/wire.go", true},
	{"wire endpoint", "/models/{model}:streamGenerateContent", "runner/wire/wire.go", true},
	{"wire endpoint", "/models/{model}:countTokens", "runner/wire/wire.go", true},
	{"wire endpoint", "/v1beta", "runner/wire/wire.go", false},
	{"runtime kind", "npm", "runner/host/runtimes/npm/", false},
	{"runtime kind", "node", "runner/host/runtimes/npm/", false},
	{"runtime kind", "python", "runner/host/runtimes/python/", false},
	{"task dir", "/task", "runner/host/session/session.go", false},
}

// providerImpls are the packages that implement a sandbox provider. A
// product package other than the implementation itself imports one only
// blank (its registration), never to call its constructor.
var providerImpls = []string{"runner/host/provider/docker"}

// homeExempt are the known breaks: a file and the key (or, for a
// provider, the imported package) it holds outside the key's home.
var homeExempt = map[[2]string]string{
	// For good: another thing of the same spelling.
	{"runner/model/script.go", "challenge"}:        "the scripted model's flow of that name, which the challenge scenario runs",
	{"runner/warden/wardencli/host.go", "timeout"}: "warden's --timeout flag",
	{"runner/warden/proc/fs.go", "/task"}:          "/proc/PID/task, the kernel's thread directory",
	{"reports/html.go", "python"}:                  "the image's python3 before and after, which the probe records",
	{"reports/evidence.go", "python"}:              "the evidence's harness_runtime.python, filled by the host part's name",
	// Until the step of issue 36 that gives the unit its one home.
}

// productFile is a non-test Go file of the product: outside the test-only
// world and outside testdata.
func productFile(rel string) bool {
	if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || strings.Contains("/"+rel, "/testdata/") {
		return false
	}
	dir := filepath.ToSlash(filepath.Dir(rel))
	return !testOnly(dir)
}

// productSources reads every product file of the module (root "..").
func productSources(t *testing.T) map[string][]byte { return moduleSources(t, productFile) }

// moduleSources reads the Go files of the module (root "..") that keep
// selects by their module-relative path, leaving out testdata and the
// folders the go command ignores (".", "_"); the one walk the layout tests
// share.
func moduleSources(t *testing.T, keep func(rel string) bool) map[string][]byte {
	t.Helper()
	src := map[string][]byte{}
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if n := d.Name(); rel != "." && (strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || !keep(rel) {
			return nil
		}
		b, err := os.ReadFile(p)
		src[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// inHome says whether file is in home (a file, or a directory ending "/").
func inHome(file, home string) bool {
	if strings.HasSuffix(home, "/") {
		return strings.HasPrefix(file, home)
	}
	return file == home
}

// homeViolations parses src and reports each key found outside its home
// and not exempt, each home that does not hold its key, each provider
// implementation imported by name outside itself, and each exemption no
// finding uses.
func homeViolations(src map[string][]byte, homes []homed, impls []string, exempt map[[2]string]string) ([]string, error) {
	var out []string
	used := map[[2]string]bool{}
	found := map[[2]string]bool{} // home, key: the home holds it
	breakAt := func(file, key, what string) {
		if _, ok := exempt[[2]string{file, key}]; ok {
			used[[2]string{file, key}] = true
			return
		}
		out = append(out, file+": "+what)
	}
	fset := token.NewFileSet()
	for file, text := range src {
		f, err := parser.ParseFile(fset, file, text, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, h := range homes {
				if v != h.key && !(h.route && strings.HasSuffix(v, " /v1"+h.key)) {
					continue
				}
				if inHome(file, h.home) {
					found[[2]string{h.home, h.key}] = true
				} else if !seen[h.key] {
					seen[h.key] = true
					breakAt(file, h.key, fmt.Sprintf("the %s %q is spelled here; its home is %s", h.unit, h.key, h.home))
				}
			}
			return true
		})
		dir := filepath.ToSlash(filepath.Dir(file))
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			path = strings.TrimPrefix(path, module)
			if !slices.Contains(impls, path) || dir == path || strings.HasPrefix(dir, path+"/") {
				continue
			}
			if imp.Name != nil && imp.Name.Name == "_" {
				continue
			}
			breakAt(file, path, fmt.Sprintf("imports the provider %s by name; a provider is chosen from the registry, and imported blank only", path))
		}
	}
	for _, h := range homes {
		if !found[[2]string{h.home, h.key}] {
			out = append(out, fmt.Sprintf("%s: the %s %q is not in its home", h.home, h.unit, h.key))
		}
	}
	for e := range exempt {
		if !used[e] {
			out = append(out, "exemption "+e[0]+" "+e[1]+" is unused: remove it")
		}
	}
	slices.Sort(out)
	return out, nil
}

func TestEachUnitHasOneHome(t *testing.T) {
	src := productSources(t)
	// Positive control: the walk read the product (the homes are in it)
	// and nothing of the tests.
	for _, f := range []string{"runner/host/certify/scenario.go", "runner/host/relay/relay.go", "cmd/sandproof/main.go", "runner/warden/proc/fs.go"} {
		if _, ok := src[f]; !ok {
			t.Fatalf("the product files (%d) lack %s: the walk is not what it seems", len(src), f)
		}
	}
	for f := range src {
		if strings.HasSuffix(f, "_test.go") || strings.HasPrefix(f, "conformance/") {
			t.Fatalf("the product files hold %s", f)
		}
	}
	v, err := homeViolations(src, homes, providerImpls, homeExempt)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range v {
		t.Error(s)
	}
}

// Every scenario certify registers has a home in the rules above, so a
// new one is checked without anyone remembering to list it.
func TestEveryScenarioHasAHome(t *testing.T) {
	if len(certify.Scenarios) == 0 {
		t.Fatal("certify registers no scenario")
	}
	for _, s := range certify.Scenarios {
		if !slices.ContainsFunc(homes, func(h homed) bool { return h.unit == "scenario" && h.key == s.Name }) {
			t.Errorf("scenario %q has no home in runner/onehome_test.go", s.Name)
		}
	}
}

// The rule sees a break where one is: a planted tree with one of each
// kind reports exactly those, an exempt one is not reported, and an
// unused exemption is.
func TestOneHomeReportsPlantedBreaks(t *testing.T) {
	src := map[string][]byte{
		"runner/host/certify/scenario.go":  []byte("package certify\nconst ScenarioTimeout = \"timeout\"\n"),
		"runner/host/relay/relay.go":       []byte("package relay\nvar endpoints = map[string]string{\"/messages\": \"POST\"}\n"),
		"runner/host/adapter/manifest.go":  []byte("package adapter\nvar names = []string{\"timeout\", \"timeout\"}\n"),
		"runner/model/server.go":           []byte("package model\nfunc f(m interface{ HandleFunc(string) }) { m.HandleFunc(\"POST /v1/messages\") }\n"),
		"runner/model/other.go":            []byte("package model\nconst s = \"POST /v1/messages/x\"\n"),
		"cmd/sandproof/clean.go":           []byte("package main\nimport \"github.com/sandproof/sandproof/runner/host/provider/docker\"\nvar _ = docker.New\n"),
		"cmd/sandproof/providers.go":       []byte("package main\nimport _ \"github.com/sandproof/sandproof/runner/host/provider/docker\"\n"),
		"runner/host/provider/docker/x.go": []byte("package docker\nimport \"github.com/sandproof/sandproof/runner/host/provider/docker\"\nvar _ = docker.X\n"),
	}
	hs := []homed{
		{"scenario", "timeout", "runner/host/certify/scenario.go", false},
		{"wire endpoint", "/messages", "runner/host/relay/relay.go", true},
		{"task dir", "/task", "runner/host/certify/case.go", false},
	}
	impls := []string{"runner/host/provider/docker"}
	want := []string{
		"cmd/sandproof/clean.go: imports the provider runner/host/provider/docker by name; a provider is chosen from the registry, and imported blank only",
		"runner/host/adapter/manifest.go: the scenario \"timeout\" is spelled here; its home is runner/host/certify/scenario.go",
		"runner/host/certify/case.go: the task dir \"/task\" is not in its home",
		"runner/model/server.go: the wire endpoint \"/messages\" is spelled here; its home is runner/host/relay/relay.go",
	}
	got, err := homeViolations(src, hs, impls, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("planted breaks:\n got %q\nwant %q", got, want)
	}
	planted := map[[2]string]string{{"runner/model/server.go", "/messages"}: "planted", {"runner/model/gone.go", "/messages"}: "planted"}
	got, _ = homeViolations(src, hs, impls, planted)
	if slices.Contains(got, want[3]) || !slices.Contains(got, "exemption runner/model/gone.go /messages is unused: remove it") || len(got) != len(want) {
		t.Errorf("exemptions: an exempt break is reported or an unused one is not: %q", got)
	}
}

// formatFileGaps lists the files a wire format lacks under root: its
// scripted model's (runner/model/wire_NAME.go) and its relay's
// (runner/host/relay/transcript_NAME.go), the two files a format is
// (docs/add-wire-format.md).
func formatFileGaps(root string, formats []wire.Format) []string {
	var out []string
	for _, f := range formats {
		for _, p := range []string{"runner/model/wire_" + f.Name + ".go", "runner/host/relay/transcript_" + f.Name + ".go"} {
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				out = append(out, fmt.Sprintf("the wire format %q has no %s", f.Name, p))
			}
		}
	}
	return out
}

func TestEveryWireFormatHasItsTwoFiles(t *testing.T) {
	for _, g := range formatFileGaps("..", wire.Formats) {
		t.Error(g)
	}
	// The check sees a gap: a planted format has neither file.
	got := formatFileGaps("..", []wire.Format{{Name: "planted"}})
	want := []string{`the wire format "planted" has no runner/model/wire_planted.go`, `the wire format "planted" has no runner/host/relay/transcript_planted.go`}
	if !slices.Equal(got, want) {
		t.Errorf("planted format: got %q, want %q", got, want)
	}
}

// kindRegistrar is the one product file that makes a runtime kind an
// adapter preparer (runtimes.Register): a kind registers through it, so
// every kind gets the same cache, stamp and evidence.
const kindRegistrar = "runner/host/runtimes/kind.go"

// preparerRegistrations reports each call of adapter.Register or
// adapter.RegisterPreparer in a product file other than kindRegistrar
// (adapter's own go-build is in its table, not a call).
func preparerRegistrations(src map[string][]byte) ([]string, error) {
	var out []string
	fset := token.NewFileSet()
	for file, text := range src {
		f, err := parser.ParseFile(fset, file, text, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		name := ""
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == module+"runner/host/adapter" {
				name = "adapter"
				if imp.Name != nil {
					name = imp.Name.Name
				}
			}
		}
		if name == "" || file == kindRegistrar {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == name && (sel.Sel.Name == "Register" || sel.Sel.Name == "RegisterPreparer") {
				out = append(out, fmt.Sprintf("%s: adapter.%s outside %s: a runtime kind registers with runtimes.Register", file, sel.Sel.Name, kindRegistrar))
			}
			return true
		})
	}
	slices.Sort(out)
	return out, nil
}

func TestRuntimeKindsRegisterInOnePlace(t *testing.T) {
	src := productSources(t)
	if !bytes.Contains(src[kindRegistrar], []byte("adapter.Register(")) {
		t.Fatalf("%s does not call adapter.Register: the rule below checks nothing", kindRegistrar)
	}
	v, err := preparerRegistrations(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range v {
		t.Error(s)
	}
}

// The rule finds a kind that registers itself with adapter, under any
// import name, and leaves kind.go alone.
func TestRuntimeKindRegistrationReportsPlantedBreaks(t *testing.T) {
	src := map[string][]byte{
		kindRegistrar:                         []byte("package runtimes\nimport \"github.com/sandproof/sandproof/runner/host/adapter\"\nfunc Register() { adapter.Register(\"k\", adapter.PreparerSpec{}) }\n"),
		"runner/host/runtimes/python/kind.go": []byte("package python\nimport a \"github.com/sandproof/sandproof/runner/host/adapter\"\nfunc init() { a.Register(\"python\", a.PreparerSpec{}) }\n"),
		"runner/host/runtimes/npm/kind.go":    []byte("package npm\nimport \"github.com/sandproof/sandproof/runner/host/adapter\"\nfunc init() { adapter.RegisterPreparer(\"npm\", nil) }\n"),
		"runner/host/runtimes/npm/other.go":   []byte("package npm\nimport \"github.com/sandproof/sandproof/runner/host/runtimes\"\nfunc init() { runtimes.Register(nil) }\n"),
	}
	want := []string{
		"runner/host/runtimes/npm/kind.go: adapter.RegisterPreparer outside " + kindRegistrar + ": a runtime kind registers with runtimes.Register",
		"runner/host/runtimes/python/kind.go: adapter.Register outside " + kindRegistrar + ": a runtime kind registers with runtimes.Register",
	}
	got, err := preparerRegistrations(src)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("planted registrations:\n got %q\nwant %q", got, want)
	}
}
