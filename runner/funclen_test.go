package runner_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines is the most lines a product function may take (its
// declaration to its closing brace): the style asks for about 60, and past
// 100 a function is several thoughts that want names. The rule covers the
// product code of every world (the host side, the CLI, the reports, warden
// and the rest of the in-sandbox code, the scripted model): the files the
// one-home check reads (productSources in onehome_test.go), every non-test
// Go file outside testdata and the test-only code.
const maxFuncLines = 100

// longFuncs parses the non-test Go files of src (a file name to its
// text) and names each function longer than max lines, with its length.
func longFuncs(fset *token.FileSet, src map[string][]byte, max int) ([]string, error) {
	var out []string
	for name, text := range src {
		f, err := parser.ParseFile(fset, name, text, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n > max {
				fn := fd.Name.Name
				if fd.Recv != nil && len(fd.Recv.List) == 1 {
					fn = recvName(fd.Recv.List[0].Type) + "." + fn
				}
				out = append(out, fmt.Sprintf("%s: %s is %d lines (at most %d)", name, fn, n, max))
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// recvName is a method's receiver type without its star or type
// parameters.
func recvName(t ast.Expr) string {
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}

// No product function is over maxFuncLines lines.
func TestProductFunctionsAreShort(t *testing.T) {
	src := productSources(t)
	// Positive control: the walk found the worlds it is about, warden's
	// among them ...
	for _, f := range []string{"runner/host/certify/stages.go", "cmd/sandproof/main.go", "reports/evidence.go",
		"runner/warden/stop/stop.go", "runner/warden/supervisor/supervisor.go", "cmd/warden/main.go", "runner/probe/snapshot.go", "runner/model/server.go"} {
		if _, ok := src[f]; !ok {
			t.Fatalf("the product sources lack %s (%d files read): the walk is not what it seems", f, len(src))
		}
	}
	// ... and left the test-only code out (TestTestSupportFunctionsAreShort
	// reads it).
	for _, f := range []string{"conformance/hostmutants/main.go", "fixtures/cmd/adversary/main.go"} {
		if _, ok := src[f]; ok {
			t.Fatalf("the product sources hold %s, which is test-only: the walk is not what it seems", f)
		}
	}
	long, err := longFuncs(token.NewFileSet(), src, maxFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range long {
		t.Error(l + ": split it at its paragraph breaks")
	}
}

// The rule sees a long function where one is: a planted file with one
// function of max+1 lines and one of max is reported for the first only,
// methods named with their receiver.
func TestLongFuncsReportsAPlantedFunction(t *testing.T) {
	body := func(name string, lines int) string {
		return name + " {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
	}
	src := map[string][]byte{"planted.go": []byte("package p\n\ntype T struct{}\n\n" +
		body("func long()", 11) + body("func (t *T) longer()", 12) + body("func fits()", 10))}
	got, err := longFuncs(token.NewFileSet(), src, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"planted.go: T.longer is 12 lines (at most 10)", "planted.go: long is 11 lines (at most 10)"}
	if !slices.Equal(got, want) {
		t.Errorf("planted long functions:\n got %q\nwant %q", got, want)
	}
}

// The test-only world's code (the suite's runners, the fixtures' programs,
// the test support; not the _test.go files, whose specs are tables) keeps
// the same limit: the mutation runners and the adversary are programs CI
// runs, read as closely as the product.
func TestTestSupportFunctionsAreShort(t *testing.T) {
	src := moduleSources(t, func(rel string) bool {
		return !strings.HasSuffix(rel, "_test.go") && testOnly(path.Dir(rel))
	})
	// Positive control: the walk read the runners and the adversary.
	for _, f := range []string{"conformance/hostmutants/main.go", "conformance/mutants/main.go", "fixtures/cmd/adversary/main.go", "fakeproc/kernel.go"} {
		if _, ok := src[f]; !ok {
			t.Fatalf("the test-only sources (%d) lack %s: the walk is not what it seems", len(src), f)
		}
	}
	long, err := longFuncs(token.NewFileSet(), src, maxFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range long {
		t.Error(l + ": split it at its paragraph breaks")
	}
}
