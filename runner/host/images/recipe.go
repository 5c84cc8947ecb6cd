package images

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed recipes
var recipeFS embed.FS

// Repository is the image repository every recipe is tagged in.
const Repository = "sandproof"

// buildFormat is hashed with every recipe: bump it when the Go side of a
// build (the import changes, the labels) changes what an image holds.
const buildFormat = "sandproof.images/v1"

// Label marks every image (and so every container started from one, which
// inherits image labels) as sandproof's.
const Label = "sandproof"

// Recipe is one image recipe as read from recipes/NAME/recipe.yaml.
type Recipe struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Packages are handed to build.sh as SANDPROOF_PACKAGES; empty means
	// none beyond what the script always takes.
	Packages []string `yaml:"packages"`
	// Env are KEY=VALUE lines set in the image (ENV), in order.
	Env []string `yaml:"env"`
	// Cmd is the image's default command: a plain sleep that reaps nothing,
	// because the suite runs containers with no init.
	Cmd    []string `yaml:"cmd"`
	Expect Expect   `yaml:"expect"`

	// files are the recipe's own files and common.sh, by name, as hashed.
	files map[string][]byte
}

// Expect is what the build checks in the finished image before keeping it.
type Expect struct {
	// OS is ID-VERSION_ID from /etc/os-release.
	OS string `yaml:"os"`
	// Bash is "present" or "none".
	Bash string `yaml:"bash"`
	// Python3 is "none" or "PATH VERSION-PREFIX" ("/opt/testbed/bin/python3 3.9"):
	// where PATH lookup must find it and how its version must start.
	Python3 string `yaml:"python3"`
	// Absent and Present are paths that must not / must exist.
	Absent  []string `yaml:"absent"`
	Present []string `yaml:"present"`
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// Recipes returns every embedded recipe, sorted by name.
func Recipes() ([]Recipe, error) {
	return loadRecipes(recipeFS, "recipes")
}

// Lookup returns the embedded recipe called name.
func Lookup(name string) (Recipe, error) {
	rs, err := Recipes()
	if err != nil {
		return Recipe{}, err
	}
	for _, r := range rs {
		if r.Name == name {
			return r, nil
		}
	}
	return Recipe{}, fmt.Errorf("find recipe %q: no such image (have %s)", name, strings.Join(Names(rs), ", "))
}

// Names lists the recipes' names.
func Names(rs []Recipe) []string {
	var ns []string
	for _, r := range rs {
		ns = append(ns, r.Name)
	}
	return ns
}

// loadRecipes reads every recipe directory under dir in fsys. The file
// common.sh in dir belongs to every recipe.
func loadRecipes(fsys fs.FS, dir string) ([]Recipe, error) {
	common, err := fs.ReadFile(fsys, path.Join(dir, "common.sh"))
	if err != nil {
		return nil, fmt.Errorf("read recipes: %w", err)
	}
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read recipes: %w", err)
	}
	var rs []Recipe
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		r, err := loadRecipe(fsys, path.Join(dir, e.Name()), common)
		if err != nil {
			return nil, err
		}
		if r.Name != e.Name() {
			return nil, fmt.Errorf("load recipe %q: name %q differs from its directory", e.Name(), r.Name)
		}
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Name < rs[j].Name })
	return rs, nil
}

func loadRecipe(fsys fs.FS, dir string, common []byte) (Recipe, error) {
	files := map[string][]byte{"common.sh": common}
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		files[strings.TrimPrefix(p, dir+"/")] = b
		return nil
	})
	if err != nil {
		return Recipe{}, fmt.Errorf("load recipe %q: %w", dir, err)
	}
	var r Recipe
	y, ok := files["recipe.yaml"]
	if !ok {
		return Recipe{}, fmt.Errorf("load recipe %q: no recipe.yaml", dir)
	}
	if _, ok := files["build.sh"]; !ok {
		return Recipe{}, fmt.Errorf("load recipe %q: no build.sh", dir)
	}
	if err := yaml.Unmarshal(y, &r); err != nil {
		return Recipe{}, fmt.Errorf("load recipe %q: %w", dir, err)
	}
	if !nameRE.MatchString(r.Name) {
		return Recipe{}, fmt.Errorf("load recipe %q: bad name %q", dir, r.Name)
	}
	for _, e := range r.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return Recipe{}, fmt.Errorf("load recipe %q: bad env entry %q (want KEY=VALUE)", dir, e)
		}
	}
	if len(r.Cmd) == 0 {
		return Recipe{}, fmt.Errorf("load recipe %q: no cmd", dir)
	}
	r.files = files
	return r, nil
}

// Hash is the hex sha256 of the recipe: the build format, then every file
// (recipe.yaml with its package list, build.sh, common.sh) as name and
// content, in name order, each length-prefixed so no two recipes collide by
// moving bytes between files.
func (r Recipe) Hash() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", buildFormat)
	names := make([]string, 0, len(r.files))
	for n := range r.files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(h, "%d:%s\n%d:", len(n), n, len(r.files[n]))
		h.Write(r.files[n])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Ref is the image reference the recipe builds: sandproof/NAME:HASH12.
func (r Recipe) Ref() string {
	return fmt.Sprintf("%s/%s:%s", Repository, r.Name, r.Hash()[:12])
}

// ParseMapping parses a --image value NAME=REF.
func ParseMapping(s string) (name, ref string, err error) {
	name, ref, ok := strings.Cut(s, "=")
	if !ok || !nameRE.MatchString(name) || ref == "" || strings.ContainsAny(ref, " \t\n") {
		return "", "", fmt.Errorf("parse image mapping %q: want NAME=REF", s)
	}
	return name, ref, nil
}

// Image is one image the suite can run: a name and the reference it maps to.
type Image struct {
	Name string
	Ref  string
	// Recipe is nil when the name was mapped to an outside reference with
	// --image and is not built here.
	Recipe *Recipe
}

// Resolve returns every recipe's image with the overrides applied (NAME ->
// REF), plus one entry per override naming no recipe, sorted by name.
func Resolve(overrides map[string]string) ([]Image, error) {
	rs, err := Recipes()
	if err != nil {
		return nil, err
	}
	var out []Image
	seen := map[string]bool{}
	for i := range rs {
		r := &rs[i]
		img := Image{Name: r.Name, Ref: r.Ref(), Recipe: r}
		if ref, ok := overrides[r.Name]; ok {
			img = Image{Name: r.Name, Ref: ref}
		}
		seen[r.Name] = true
		out = append(out, img)
	}
	for n, ref := range overrides {
		if !seen[n] {
			out = append(out, Image{Name: n, Ref: ref})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
