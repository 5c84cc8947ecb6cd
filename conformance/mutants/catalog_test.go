package main

import (
	"go/ast"
	"go/build"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/warden/mutant"
)

// mutantPkg is runner/mutant's import path, read from its type so that a
// move of the package moves it too.
var mutantPkg = reflect.TypeOf(mutant.Name("")).PkgPath()

// mutantDir is runner/mutant's directory.
func mutantDir(t *testing.T) string {
	t.Helper()
	p, err := build.Import(mutantPkg, ".", build.FindOnly)
	if err != nil {
		t.Fatalf("find %s: %v", mutantPkg, err)
	}
	return p.Dir
}

// TestCatalogNamesEveryMutant ties the four places a mutant is named: its
// constant (runner/mutant/names.go), its file m_<name>.go (whose build tag
// and Active constant must be its own), the Catalog entry `make mutants`
// runs, and the mutant.Is call sites that break a guarantee when it is
// compiled in. A catalogue entry without a file, a file the catalogue never
// runs, a constant no call site uses or a call site naming a string instead
// of a constant fails here, without building a mutant.
func TestCatalogNamesEveryMutant(t *testing.T) {
	dir := mutantDir(t)
	consts := declaredNames(t, dir)
	if len(consts) == 0 {
		t.Fatalf("no Name constants found in %s/names.go", dir)
	}
	values := map[string]bool{}
	for _, v := range consts {
		values[v] = true
	}

	catalog := map[string]bool{}
	for _, m := range Catalog {
		if catalog[string(m.Name)] {
			t.Errorf("Catalog: %q listed twice", m.Name)
		}
		catalog[string(m.Name)] = true
	}
	compareSets(t, "Catalog", catalog, values)

	files := mutantFiles(t, dir, consts)
	compareSets(t, "the m_*.go files", files, values)

	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	used := callSites(t, root, consts)
	compareSets(t, "mutant.Is call sites", used, values)
}

// compareSets reports every name one set has and the constants lack, and
// the reverse.
func compareSets(t *testing.T, what string, got, want map[string]bool) {
	t.Helper()
	for _, n := range sortedKeys(got) {
		if !want[n] {
			t.Errorf("%s: %q is not a mutant.Name constant", what, n)
		}
	}
	for _, n := range sortedKeys(want) {
		if !got[n] {
			t.Errorf("%s: mutant %q missing", what, n)
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// declaredNames returns runner/mutant's constants of type Name, identifier
// to value.
func declaredNames(t *testing.T, dir string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, "names.go"), nil, 0)
	if err != nil {
		t.Fatalf("parse names.go: %v", err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Name" {
				continue
			}
			for i, n := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("names.go: %s is not a string literal", n.Name)
				}
				v, _ := strconv.Unquote(lit.Value)
				out[n.Name] = v
			}
		}
	}
	return out
}

// mutantFiles returns the names of the m_<name>.go files, each checked to
// carry `//go:build sandproof_mutant && mutant_<name>` and to set Active
// to the constant whose value is <name>.
func mutantFiles(t *testing.T, dir string, consts map[string]string) map[string]bool {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "m_*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range paths {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "m_"), ".go")
		out[name] = true
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ParseComments)
		if err != nil {
			t.Fatalf("parse %s: %v", p, err)
		}
		wantTag := "sandproof_mutant && mutant_" + name
		tag := ""
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if constraint.IsGoBuild(c.Text) {
					e, err := constraint.Parse(c.Text)
					if err != nil {
						t.Fatalf("%s: build constraint %q: %v", p, c.Text, err)
					}
					tag = e.String()
				}
			}
		}
		if tag != wantTag {
			t.Errorf("%s: build constraint %q, want %q", p, tag, wantTag)
		}
		active := ""
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				if len(vs.Names) == 1 && vs.Names[0].Name == "Active" && len(vs.Values) == 1 {
					if id, ok := vs.Values[0].(*ast.Ident); ok {
						active = id.Name
					}
				}
			}
		}
		if v, ok := consts[active]; !ok || v != name {
			t.Errorf("%s: Active = %q, want the Name constant whose value is %q", p, active, name)
		}
	}
	return out
}

// callSites returns the values of the constants the module's mutant.Is
// calls name, failing each call whose argument is not a Name constant.
func callSites(t *testing.T, root string, consts map[string]string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	fset := token.NewFileSet()
	calls := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		local := ""
		for _, imp := range f.Imports {
			if imp.Path.Value == strconv.Quote(mutantPkg) {
				local = "mutant"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || !isSelector(call.Fun, local, "Is") {
				return true
			}
			calls++
			arg := ""
			if len(call.Args) == 1 {
				if sel, ok := call.Args[0].(*ast.SelectorExpr); ok && isSelector(sel, local, sel.Sel.Name) {
					arg = sel.Sel.Name
				}
			}
			v, ok := consts[arg]
			if !ok {
				t.Errorf("%s: mutant.Is must name a mutant.Name constant", fset.Position(call.Pos()))
				return true
			}
			out[v] = true
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatalf("walk the module: %v", err)
	}
	if calls == 0 {
		t.Fatalf("no mutant.Is call found under %s", root)
	}
	return out
}

// isSelector reports whether e is pkg.name.
func isSelector(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg && sel.Sel.Name == name
}
