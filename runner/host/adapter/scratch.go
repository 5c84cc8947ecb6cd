package adapter

import (
	"path"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sandproof/sandproof/runner/host/session"
)

// scratchNever are the paths a scratch entry may name neither at nor
// below: the task (what the harness was asked to change is never the
// adapter's to remove), the image's system trees, the kernel's, and the
// parent of every session dir (another session's dir, the mounted
// runtimes).
var scratchNever = []string{session.TaskDir, "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/boot",
	"/proc", "/sys", "/dev", session.DefaultBaseDir}

// scratchRe is the alphabet of a scratch entry: plain path characters
// and the glob characters * ? [ ] (a shell sees it unquoted when the
// image's rm removes it, so nothing it could read as more).
var scratchRe = regexp.MustCompile(`^[A-Za-z0-9._+@%,:/*?\[\]-]+$`)

// scratch reads `scratch`: the paths outside its session dir the harness
// writes and the adapter owns (OpenClaw's /tmp/openclaw* lock files and
// log). Close removes them, verify checks they are gone, and
// verify.fs_diff judges the rest. Each is a plain absolute path with a
// glob only in its last element, never at or under a path scratchNever
// names nor above one (removing it would take one with it).
func (d *decoder) scratch(k string, v *yaml.Node, m *Manifest) {
	d.list(k, v, func(k string, v *yaml.Node) {
		p := d.str(k, v)
		if p == "" {
			return
		}
		if why := scratchRefusal(p); why != "" {
			d.errf(v, k, "%q cannot be scratch: %s", p, why)
			return
		}
		if !slices.Contains(m.Scratch, p) {
			m.Scratch = append(m.Scratch, p)
		}
	})
}

// scratchRefusal says why p cannot be a scratch entry, or "".
func scratchRefusal(p string) string {
	switch {
	case p == "/":
		return "it is /"
	case !scratchRe.MatchString(p):
		return "want a plain absolute path (letters, digits, ._+@%,:- and the globs *?[] only)"
	case !strings.HasPrefix(p, "/"):
		return "not an absolute path"
	case path.Clean(p) != p:
		return "not a plain path (no //, /./, /../ or trailing /)"
	}
	dir, last := path.Split(p)
	if strings.ContainsAny(dir, "*?[]") {
		return "a glob may be only in the last element"
	}
	if _, err := path.Match(last, ""); err != nil {
		return "bad glob in " + last
	}
	for _, never := range scratchNever {
		if hit, why := scratchHits(p, never); hit {
			return why
		}
	}
	// A shell's glob matches a leading dot only when the pattern starts
	// with one; Go's Glob never lists . or .. at all.
	dot, _ := path.Match(last, ".")
	dotdot, _ := path.Match(last, "..")
	if strings.HasPrefix(last, ".") && (dot || dotdot) {
		return "its last element may match . or .."
	}
	return ""
}

// scratchHits reports whether the entry p names never, a path under it,
// or one of never's ancestors (/ included), matching its last element as
// a glob, and says which.
func scratchHits(p, never string) (bool, string) {
	dir, last := path.Split(p)
	dir = path.Clean(dir)
	// At or under never: a literal prefix, or the glob matching never's
	// own element.
	if dir == never || strings.HasPrefix(dir, never+"/") {
		return true, "under " + never
	}
	for a := never; ; a = path.Dir(a) {
		if path.Dir(a) == dir {
			if m, _ := path.Match(last, path.Base(a)); m {
				if a == never {
					return true, "it matches " + never
				}
				return true, "it matches " + a + ", above " + never
			}
		}
		if a == "/" {
			break
		}
	}
	return false, ""
}
