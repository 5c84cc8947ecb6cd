package images

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
)

func TestEmbeddedRecipes(t *testing.T) {
	rs, err := Recipes()
	if err != nil {
		t.Fatalf("Recipes: %v", err)
	}
	if got, want := Names(rs), []string{"alpine-class", "debian-12", "old-python"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("recipes = %q, want %q", got, want)
	}
	refRE := regexp.MustCompile(`^sandproof/[a-z0-9-]+:[0-9a-f]{12}$`)
	seen := map[string]string{}
	for _, r := range rs {
		if !refRE.MatchString(r.Ref()) || !strings.Contains(r.Ref(), "/"+r.Name+":") {
			t.Errorf("%s: ref %q does not look like sandproof/NAME:HASH12", r.Name, r.Ref())
		}
		if other, dup := seen[r.Hash()]; dup {
			t.Errorf("%s and %s share hash %s", r.Name, other, r.Hash())
		}
		seen[r.Hash()] = r.Name
		if strings.Join(r.Cmd, " ") != "sleep infinity" {
			t.Errorf("%s: cmd %q, want a plain sleep that reaps nothing", r.Name, r.Cmd)
		}
		if r.Expect.OS == "" || r.Expect.Bash == "" || r.Expect.Python3 == "" {
			t.Errorf("%s: expectations incomplete: %+v", r.Name, r.Expect)
		}
		for _, f := range []string{"recipe.yaml", "build.sh", "common.sh"} {
			if _, ok := r.files[f]; !ok {
				t.Errorf("%s: %s not part of the recipe (and its hash)", r.Name, f)
			}
		}
	}
	old, err := Lookup("old-python")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(strings.Join(old.Env, "\n"), "PATH=/opt/testbed/bin:") {
		t.Errorf("old-python env %q: PATH must start with /opt/testbed/bin", old.Env)
	}
	if _, err := Lookup("ubuntu"); err == nil {
		t.Error(`Lookup("ubuntu"): want an error`)
	}
}

func testFS() fstest.MapFS {
	return fstest.MapFS{
		"r/common.sh":        {Data: []byte("common\n")},
		"r/one/recipe.yaml":  {Data: []byte("name: one\npackages: [a, b]\ncmd: [sleep, infinity]\n")},
		"r/one/build.sh":     {Data: []byte("echo one\n")},
		"r/two/recipe.yaml":  {Data: []byte("name: two\ncmd: [sleep, infinity]\nenv: [PATH=/bin]\n")},
		"r/two/build.sh":     {Data: []byte("echo two\n")},
		"r/two/extra/file":   {Data: []byte("x")},
		"r/README-not-a-dir": {Data: []byte("ignored")},
	}
}

func hashes(t *testing.T, fsys fstest.MapFS) map[string]string {
	t.Helper()
	rs, err := loadRecipes(fsys, "r")
	if err != nil {
		t.Fatalf("loadRecipes: %v", err)
	}
	m := map[string]string{}
	for _, r := range rs {
		m[r.Name] = r.Hash()
	}
	return m
}

// TestHashCoversEveryFile: changing any file of a recipe, or the shared
// common.sh, changes the hash; changing one recipe leaves the other alone.
func TestHashCoversEveryFile(t *testing.T) {
	base := hashes(t, testFS())
	if len(base) != 2 || base["one"] == base["two"] {
		t.Fatalf("base hashes = %v", base)
	}
	tests := []struct {
		file    string
		data    string
		changed []string
	}{
		{"r/one/recipe.yaml", "name: one\npackages: [a, c]\ncmd: [sleep, infinity]\n", []string{"one"}},
		{"r/one/build.sh", "echo one!\n", []string{"one"}},
		{"r/two/extra/file", "y", []string{"two"}},
		{"r/common.sh", "common 2\n", []string{"one", "two"}},
	}
	for _, tt := range tests {
		fsys := testFS()
		fsys[tt.file] = &fstest.MapFile{Data: []byte(tt.data)}
		got := hashes(t, fsys)
		for name := range base {
			want := contains(tt.changed, name)
			if (got[name] != base[name]) != want {
				t.Errorf("edit %s: hash of %s changed=%v, want %v", tt.file, name, got[name] != base[name], want)
			}
		}
	}
}

// Moving bytes from one file to the next must not keep the hash.
func TestHashSeparatesFiles(t *testing.T) {
	a := Recipe{files: map[string][]byte{"build.sh": []byte("ab"), "common.sh": []byte("c")}}
	b := Recipe{files: map[string][]byte{"build.sh": []byte("a"), "common.sh": []byte("bc")}}
	if a.Hash() == b.Hash() {
		t.Error("hash ignores file boundaries")
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestLoadRecipesRejects(t *testing.T) {
	tests := map[string]fstest.MapFS{
		"no common.sh":  {"r/one/recipe.yaml": {Data: []byte("name: one\ncmd: [x]\n")}, "r/one/build.sh": {}},
		"no build.sh":   {"r/common.sh": {}, "r/one/recipe.yaml": {Data: []byte("name: one\ncmd: [x]\n")}},
		"name mismatch": {"r/common.sh": {}, "r/one/recipe.yaml": {Data: []byte("name: two\ncmd: [x]\n")}, "r/one/build.sh": {}},
		"bad env":       {"r/common.sh": {}, "r/one/recipe.yaml": {Data: []byte("name: one\ncmd: [x]\nenv: [PATH]\n")}, "r/one/build.sh": {}},
		"no cmd":        {"r/common.sh": {}, "r/one/recipe.yaml": {Data: []byte("name: one\n")}, "r/one/build.sh": {}},
		"bad yaml":      {"r/common.sh": {}, "r/one/recipe.yaml": {Data: []byte("name: [\n")}, "r/one/build.sh": {}},
	}
	for name, fsys := range tests {
		if _, err := loadRecipes(fsys, "r"); err == nil {
			t.Errorf("%s: loadRecipes succeeded, want an error", name)
		}
	}
}

func TestParseMapping(t *testing.T) {
	name, ref, err := ParseMapping("alpine-class=alpine:3.20")
	if err != nil || name != "alpine-class" || ref != "alpine:3.20" {
		t.Errorf("ParseMapping = %q %q %v", name, ref, err)
	}
	name, ref, err = ParseMapping("swe=reg.example/x/y@sha256:ab=cd")
	if err != nil || name != "swe" || ref != "reg.example/x/y@sha256:ab=cd" {
		t.Errorf("ParseMapping with = in ref = %q %q %v", name, ref, err)
	}
	for _, bad := range []string{"", "alpine", "=alpine", "alpine=", "Alpine=x", "a b=x", "a=x y"} {
		if _, _, err := ParseMapping(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseMapping(%q) err = %v, want one quoting the value", bad, err)
		}
	}
}

func TestResolve(t *testing.T) {
	imgs, err := Resolve(map[string]string{"alpine-class": "alpine:3.20", "ubuntu-22": "ubuntu:22.04"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Image{}
	for _, i := range imgs {
		got[i.Name] = i
	}
	if len(imgs) != 4 {
		t.Fatalf("Resolve = %+v, want 4 images", imgs)
	}
	if i := got["alpine-class"]; i.Ref != "alpine:3.20" || i.Recipe != nil {
		t.Errorf("alpine-class = %+v, want mapped, no recipe", i)
	}
	if i := got["debian-12"]; i.Recipe == nil || i.Ref != i.Recipe.Ref() {
		t.Errorf("debian-12 = %+v, want its recipe's ref", i)
	}
	if i := got["ubuntu-22"]; i.Ref != "ubuntu:22.04" || i.Recipe != nil {
		t.Errorf("ubuntu-22 = %+v", i)
	}
}

func TestParseFactsAndCheck(t *testing.T) {
	out := "os=debian-11\nbash=/bin/bash\npython3=/opt/testbed/bin/python3\npython3_version=Python 3.9.2\ntask_uid=1000\n" +
		"exists /usr/bin/apt=yes\nexists /a=b=no\n"
	f := parseFacts(out)
	want := Facts{OS: "debian-11", Bash: "/bin/bash", Python3: "/opt/testbed/bin/python3", Python3Version: "Python 3.9.2", TaskUID: "1000",
		Exists: map[string]bool{"/usr/bin/apt": true, "/a=b": false}}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("parseFacts = %+v, want %+v", f, want)
	}
	good := Expect{OS: "debian-11", Bash: "present", Python3: "/opt/testbed/bin/python3 3.9", Absent: []string{"/a=b"}, Present: []string{"/usr/bin/apt"}}
	if bad := good.check(f); len(bad) != 0 {
		t.Errorf("check = %q, want no complaint", bad)
	}
	wrong := Expect{OS: "debian-12", Bash: "none", Python3: "/usr/bin/python3 3.6", Absent: []string{"/usr/bin/apt"}, Present: []string{"/a=b"}}
	if bad := wrong.check(f); len(bad) != 6 {
		t.Errorf("check = %q, want 6 complaints (os, bash, python3 path, python3 version, absent, present)", bad)
	}
	noTask := f
	noTask.TaskUID = "none"
	if bad := good.check(noTask); len(bad) != 1 {
		t.Errorf("check without user task = %q, want 1 complaint", bad)
	}
	if bad := (Expect{Python3: "none"}).check(f); len(bad) != 1 {
		t.Errorf("check python3=none against a python = %q, want 1 complaint", bad)
	}
}

func TestHumanSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 999: "999B", 2690000: "2.69MB", 164000000: "164MB", 1500000000: "1.5GB"} {
		if got := HumanSize(n); got != want {
			t.Errorf("HumanSize(%d) = %q, want %q", n, got, want)
		}
	}
}
