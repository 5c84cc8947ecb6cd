package runner_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A sandbox provider is a unit (onehome_test.go): adding one is its
// package, its registration and one test file that runs the shared
// contract (runner/host/provider/providertest). The rule below keeps the
// third from being forgotten: every package that registers a provider (a
// call of provider.Register, by whatever name it imports the package) has
// a _test.go in its directory that calls providertest.Run.

const (
	providerPkg     = module + "runner/host/provider"
	providertestPkg = module + "runner/host/provider/providertest"
)

// goSources reads every Go file of the module, tests included
// (moduleSources).
func goSources(t *testing.T) map[string][]byte {
	return moduleSources(t, func(string) bool { return true })
}

// calls says whether f calls the function name of the package pkgPath,
// by whatever name f imports it.
func calls(f *ast.File, pkgPath, name string) bool {
	local := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == pkgPath {
			local = pkgPath[strings.LastIndex(pkgPath, "/")+1:]
			if imp.Name != nil {
				local = imp.Name.Name
			}
		}
	}
	if local == "" || local == "_" || local == "." {
		return false
	}
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if s, ok := c.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == name {
				if x, ok := s.X.(*ast.Ident); ok && x.Name == local {
					found = true
				}
			}
		}
		return !found
	})
	return found
}

// contractViolations reports each directory one of whose non-test files
// calls provider.Register while none of its _test.go files calls
// providertest.Run; and the registering directories it found.
func contractViolations(src map[string][]byte) (violations, registering []string, err error) {
	fset := token.NewFileSet()
	registers := map[string]string{} // dir -> the first file that registers
	runs := map[string]bool{}
	for _, rel := range slices.Sorted(maps.Keys(src)) {
		f, err := parser.ParseFile(fset, rel, src[rel], parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, err
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		switch {
		case strings.HasSuffix(rel, "_test.go"):
			if calls(f, providertestPkg, "Run") {
				runs[dir] = true
			}
		case calls(f, providerPkg, "Register"):
			if _, ok := registers[dir]; !ok {
				registers[dir] = rel
			}
		}
	}
	for dir, file := range registers {
		registering = append(registering, dir)
		if !runs[dir] {
			violations = append(violations, file+": registers a provider, but no _test.go of "+dir+" calls providertest.Run (the shared contract)")
		}
	}
	slices.Sort(violations)
	slices.Sort(registering)
	return violations, registering, nil
}

func TestEveryProviderRunsTheContract(t *testing.T) {
	v, registering, err := contractViolations(goSources(t))
	if err != nil {
		t.Fatal(err)
	}
	// Positive control: the walk found the registration the CLI links
	// (cmd/sandproof/providers.go).
	if !slices.Contains(registering, "runner/host/provider/docker") {
		t.Fatalf("no registration found in runner/host/provider/docker (found %q): the walk is not what it seems", registering)
	}
	for _, s := range v {
		t.Error(s)
	}
}

// The rule sees a break where one is: a provider without the contract's
// test, one whose test names the suite without running it, and one that
// registers under another import name are reported; one that runs it, a
// local function named Register, and package provider's own tests are
// not.
func TestEveryProviderRunsTheContractReportsPlantedBreaks(t *testing.T) {
	reg := func(pkg, alias string) []byte {
		name := "provider"
		if alias != "" {
			name = alias
		}
		return []byte("package " + pkg + "\nimport " + alias + " \"" + providerPkg + "\"\nfunc init() { " + name + ".Register(\"x\", " + name + ".Factory{}) }\n")
	}
	src := map[string][]byte{
		"p/good/register.go":                    reg("good", ""),
		"p/good/contract_test.go":               []byte("package good_test\nimport (\"testing\"; \"" + providertestPkg + "\")\nfunc TestC(t *testing.T) { providertest.Run(t, providertest.Env{}) }\n"),
		"p/none/register.go":                    reg("none", ""),
		"p/named/register.go":                   reg("named", ""),
		"p/named/x_test.go":                     []byte("package named_test\nimport \"" + providertestPkg + "\"\nvar _ = providertest.Env{}\n"),
		"p/alias/register.go":                   reg("alias", "prov"),
		"p/local/y.go":                          []byte("package local\nfunc Register() {}\nfunc f() { Register() }\n"),
		"runner/host/provider/registry_test.go": []byte("package provider\nfunc f() { Register(\"x\", Factory{}) }\n"),
	}
	want := []string{
		"p/alias/register.go: registers a provider, but no _test.go of p/alias calls providertest.Run (the shared contract)",
		"p/named/register.go: registers a provider, but no _test.go of p/named calls providertest.Run (the shared contract)",
		"p/none/register.go: registers a provider, but no _test.go of p/none calls providertest.Run (the shared contract)",
	}
	got, registering, err := contractViolations(src)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) || !slices.Equal(registering, []string{"p/alias", "p/good", "p/named", "p/none"}) {
		t.Errorf("planted breaks:\n got %q (registering %q)\nwant %q", got, registering, want)
	}
}
