package runner_test

import (
	"go/parser"
	"go/token"
	"path"
	"slices"
	"strings"
	"testing"
)

// docExempt are the packages whose comment is still elsewhere, each with
// its reason; an exemption no package needs fails the test too.
var docExempt = map[string]string{}

// docHomes checks the package comments of src (a slash path below the
// module root to the text of a non-test Go file): every package has
// exactly one, in doc.go, in main.go of a command, in the file named
// after its folder or in its only file, so a reader finds it without
// opening every file. One line per package that breaks the rule, and one
// per exemption no package uses.
func docHomes(fset *token.FileSet, src map[string][]byte, exempt map[string]string) ([]string, error) {
	type pkgFiles struct{ files, documented []string }
	pkgs := map[string]*pkgFiles{}
	for name, text := range src {
		f, err := parser.ParseFile(fset, name, text, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return nil, err
		}
		key := path.Dir(name) + " " + f.Name.Name
		if pkgs[key] == nil {
			pkgs[key] = &pkgFiles{}
		}
		pkgs[key].files = append(pkgs[key].files, path.Base(name))
		if f.Doc != nil {
			pkgs[key].documented = append(pkgs[key].documented, path.Base(name))
		}
	}
	var out []string
	used := map[string]bool{}
	for key, p := range pkgs {
		dir, pkg, _ := strings.Cut(key, " ")
		slices.Sort(p.documented)
		ok := len(p.documented) == 1
		if ok {
			home := p.documented[0]
			ok = home == "doc.go" || home == path.Base(dir)+".go" || pkg == "main" && home == "main.go" || len(p.files) == 1
		}
		if ok {
			continue
		}
		if _, ex := exempt[dir]; ex {
			used[dir] = true
			continue
		}
		out = append(out, dir+": package "+pkg+" has its comment in "+strings.Join(p.documented, ", ")+" (want one, in doc.go)")
	}
	for dir := range exempt {
		if !used[dir] {
			out = append(out, "exemption "+dir+" is unused: remove it")
		}
	}
	slices.Sort(out)
	return out, nil
}

// Every package's comment is in its home.
func TestPackageCommentsAreInDocGo(t *testing.T) {
	src := moduleSources(t, func(rel string) bool { return !strings.HasSuffix(rel, "_test.go") })
	// Positive control: the walk found every world.
	for _, f := range []string{"runner/host/certify/certify.go", "runner/warden/stop/reach.go", "cmd/sandproof/main.go", "fakeproc/doc.go", "conformance/hostmutants/main.go"} {
		if _, ok := src[f]; !ok {
			t.Fatalf("the module's sources lack %s (%d files read): the walk is not what it seems", f, len(src))
		}
	}
	bad, err := docHomes(token.NewFileSet(), src, docExempt)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// The rule sees a misplaced comment where one is: planted packages with
// the comment in another file, in two files or in none are reported, and
// doc.go, main.go, the folder's name and an only file are homes.
func TestDocHomesReportsPlantedPackages(t *testing.T) {
	doc := func(pkg string) []byte { return []byte("// Package " + pkg + " is planted.\npackage " + pkg + "\n") }
	bare := func(pkg string) []byte { return []byte("package " + pkg + "\n") }
	src := map[string][]byte{
		"a/doc.go": doc("a"), "a/x.go": bare("a"),
		"b/b.go": doc("b"), "b/x.go": bare("b"),
		"cmd/c/main.go": doc("main"), "cmd/c/x.go": bare("main"),
		"d/only.go": doc("d"),
		"e/x.go":    doc("e"), "e/y.go": bare("e"),
		"f/doc.go": doc("f"), "f/x.go": doc("f"),
		"g/x.go": bare("g"), "g/y.go": bare("g"),
		"h/x.go": doc("h"), "h/y.go": bare("h"),
	}
	got, err := docHomes(token.NewFileSet(), src, map[string]string{"h": "planted", "z": "planted"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"e: package e has its comment in x.go (want one, in doc.go)",
		"exemption z is unused: remove it",
		"f: package f has its comment in doc.go, x.go (want one, in doc.go)",
		"g: package g has its comment in  (want one, in doc.go)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("planted packages:\n got %q\nwant %q", got, want)
	}
}
