package runner_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// hostPath is the code the length rule covers, relative to the module
// root: the host side, the CLI and the reports. In-sandbox code and tests
// are outside it.
var hostPath = []string{"runner/host", "cmd/sandproof", "reports"}

// maxFuncLines is the most lines a function on the host path may take
// (its declaration to its closing brace): the style asks for about 60,
// and past 100 a function is several thoughts that want names.
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

// hostSources reads the non-test Go files of the host path.
func hostSources(t *testing.T) map[string][]byte {
	t.Helper()
	src := map[string][]byte{}
	for _, dir := range hostPath {
		err := filepath.WalkDir(filepath.Join("..", dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			src[strings.TrimPrefix(p, "../")] = b
			return err
		})
		if err != nil {
			t.Fatalf("reading the host path's sources: %v", err)
		}
	}
	return src
}

// No function on the host path is over maxFuncLines lines.
func TestHostFunctionsAreShort(t *testing.T) {
	src := hostSources(t)
	// Positive control: the walk found the packages it is about.
	for _, f := range []string{"runner/host/certify/stages.go", "cmd/sandproof/main.go", "reports/evidence.go"} {
		if _, ok := src[f]; !ok {
			t.Fatalf("the host path's sources lack %s (%d files read): the walk is not what it seems", f, len(src))
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
