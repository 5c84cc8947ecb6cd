package certify

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// emittedCheckIDs reads this package's sources for every check id it can
// write: the first argument of each check call, each reports.Check{ID: ...}
// literal, every dotted string naming a stage's check (ids passed through
// variables), and STAGE.x for an id built from a stage's name.
func emittedCheckIDs(t *testing.T) []string {
	t.Helper()
	dotted := regexp.MustCompile(`^(setup|seed|activation|close|verify|teardown|secrets|scenario)\.[a-z_]+$`)
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatalf("parse the package: %v", err)
	}
	ids := map[string]bool{}
	lit := func(e ast.Expr) (string, bool) {
		l, ok := e.(*ast.BasicLit)
		if !ok || l.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(l.Value)
		return s, err == nil
	}
	for _, p := range pkgs {
		for _, f := range p.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.BasicLit:
					if s, ok := lit(n); ok && dotted.MatchString(s) {
						ids[s] = true
					}
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "check" && len(n.Args) > 0 {
						if s, ok := lit(n.Args[0]); ok {
							ids[s] = true
						} else if b, ok := n.Args[0].(*ast.BinaryExpr); ok && b.Op == token.ADD {
							if s, ok := lit(b.Y); ok && strings.HasPrefix(s, ".") {
								ids["STAGE"+s] = true
							}
						}
					}
				case *ast.KeyValueExpr:
					if k, ok := n.Key.(*ast.Ident); ok && k.Name == "ID" {
						if s, ok := lit(n.Value); ok && s != "" {
							ids[s] = true
						}
					}
				}
				return true
			})
		}
	}
	var out []string
	for id := range ids {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// moduleRoot walks up from the package directory to go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package")
		}
		dir = parent
	}
}

// Every check id certify can write is in docs/certify.md's list of checks
// (the paragraph "Checks (id → clause)"), so a reader of a report finds
// what each id means.
func TestDocsListEveryCheckID(t *testing.T) {
	ids := emittedCheckIDs(t)
	// Positive control: the scan finds ids of each kind.
	for _, must := range []string{"setup", "verify.fs_diff", "close.receipts", "interrupt", "STAGE.provider"} {
		if !strings.Contains(" "+strings.Join(ids, " ")+" ", " "+must+" ") {
			t.Fatalf("the source scan found %q, which lacks %q: it misses ids", ids, must)
		}
	}
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "certify.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "Checks (id → clause):")
	if i < 0 {
		t.Fatal(`docs/certify.md has no paragraph "Checks (id → clause):"`)
	}
	para := doc[i:]
	if j := strings.Index(para, "\n\n"); j >= 0 {
		para = para[:j]
	}
	for _, id := range ids {
		if !strings.Contains(para, "`"+id+"`") {
			t.Errorf("check id %q is not in docs/certify.md's list of checks", id)
		}
	}
}
