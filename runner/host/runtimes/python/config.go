package python

import (
	"path/filepath"
	"regexp"

	"go.yaml.in/yaml/v3"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/hostfile"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// Config is a manifest's `prepare.with` block for the python kind
// (docs/adapters.md, "The python preparer").
type Config struct {
	// Package and Version are the harness's distribution, as the lock
	// pins it.
	Package, Version string
	// Lock is the lock file's absolute path; Requirements what it pins.
	Lock         string
	Requirements []Requirement
	// Python names the interpreter (a key of Interpreters: "3.13").
	Python string
	// EntryModule is run with -m; EntryCall ("pkg.mod:func") is called,
	// its return value the exit status. One of the two.
	EntryModule, EntryCall string
	VersionArgs            []string
	VersionEnv             map[string]string
	// TreeSHA256 pins the sum of the installed wheels (the site-packages
	// dir); "" leaves it unpinned (it is recorded and verified on reuse).
	TreeSHA256 string
}

var (
	dottedRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	callRe   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$`)
)

type cfgParser struct {
	runtimes.WithParser
	dir string
}

// ParseConfig reads and validates a `with` node; dir resolves `lock`.
func ParseConfig(dir string, n *yaml.Node) (Config, []adapter.FieldError) {
	p := &cfgParser{dir: dir}
	var c Config
	if n == nil {
		p.Errf(nil, runtimes.WithKey, "missing (the python preparer needs package, version, lock, python and entry)")
		return c, p.Errs
	}
	var lockNode, entryNode *yaml.Node
	p.Mapping(runtimes.WithKey, n, []string{"package", "version", "lock", "python", "entry"}, map[string]func(string, *yaml.Node){
		"package": func(k string, v *yaml.Node) { c.Package = p.name(k, v) },
		"version": func(k string, v *yaml.Node) { c.Version = p.version(k, v) },
		"lock": func(k string, v *yaml.Node) {
			lockNode = v
			p.lock(k, v, &c)
		},
		"python": func(k string, v *yaml.Node) { c.Python = p.python(k, v) },
		"entry": func(k string, v *yaml.Node) {
			entryNode = v
			p.Mapping(k, v, nil, map[string]func(string, *yaml.Node){
				"module": func(k string, v *yaml.Node) { c.EntryModule = p.match(k, v, dottedRe, "a dotted module name") },
				"call": func(k string, v *yaml.Node) {
					c.EntryCall = p.match(k, v, callRe, "module:function (a function of the module, as a console script names it)")
				},
			})
		},
		"version_args": func(k string, v *yaml.Node) { c.VersionArgs = p.Strings(k, v) },
		"version_env":  func(k string, v *yaml.Node) { c.VersionEnv = p.Env(k, v) },
		"tree_sha256":  func(k string, v *yaml.Node) { c.TreeSHA256 = p.SHA(k, v) },
	})
	if entryNode != nil && entryNode.Kind == yaml.MappingNode && (c.EntryModule == "") == (c.EntryCall == "") {
		p.Errf(entryNode, runtimes.WithKey+".entry", "want exactly one of module (run with -m) or call (module:function)")
	}
	p.crossCheck(lockNode, &c)
	return c, p.Errs
}

func (p *cfgParser) name(k string, v *yaml.Node) string {
	s := p.Str(k, v)
	if s != "" && !pinnedRe.MatchString(s+"==0") {
		p.Errf(v, k, "bad distribution name %q", s)
	}
	return Normalize(s)
}

func (p *cfgParser) version(k string, v *yaml.Node) string {
	s := p.Str(k, v)
	if s != "" && !exactVersionRe.MatchString(s) {
		p.Errf(v, k, "%q is not an exact version (want one release: `pip index versions NAME`)", s)
	}
	return s
}

func (p *cfgParser) match(k string, v *yaml.Node, re *regexp.Regexp, want string) string {
	s := p.Str(k, v)
	if s != "" && !re.MatchString(s) {
		p.Errf(v, k, "%q is not %s", s, want)
	}
	return s
}

func (p *cfgParser) python(k string, v *yaml.Node) string {
	s := p.Str(k, v)
	if _, ok := Interpreters[s]; s != "" && !ok {
		p.Errf(v, k, "no interpreter %q (known: %s)", s, knownInterpreters())
	}
	return s
}

// lock reads and parses the lock the `lock` key names (relative to the
// manifest's dir).
func (p *cfgParser) lock(k string, v *yaml.Node, c *Config) {
	s := p.Str(k, v)
	if s == "" {
		return
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(p.dir, s)
	}
	c.Lock = s
	b, err := hostfile.ReadFile(s, maxLockBytes)
	if err != nil {
		p.Errf(v, k, "%v", err)
		return
	}
	reqs, err := ParseLock(b)
	if err != nil {
		p.Errf(v, k, "%s: %v", filepath.Base(s), err)
		return
	}
	c.Requirements = reqs
}

// crossCheck: the lock pins the manifest's package at its version.
func (p *cfgParser) crossCheck(lockNode *yaml.Node, c *Config) {
	if c.Requirements == nil || c.Package == "" || c.Version == "" {
		return
	}
	for _, r := range c.Requirements {
		if r.Name == c.Package {
			if r.Version != c.Version {
				p.Errf(lockNode, runtimes.WithKey+".lock", "the lock pins %s==%s (line %d), the manifest %s", r.Name, r.Version, r.Line, c.Version)
			}
			return
		}
	}
	p.Errf(lockNode, runtimes.WithKey+".lock", "the lock does not pin %s", c.Package)
}
