package python

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Requirement is one line of a hashed lock: a distribution pinned to one
// version, and the sha256 of every file the lock allows for it.
type Requirement struct {
	// Name is the distribution's normalized name (PEP 503: lower case,
	// runs of "-", "_" and "." as one "-").
	Name    string
	Version string
	Hashes  []string
	// Line is the requirement's first line in the lock.
	Line int
}

// Lock caps: a real lock of a large harness is a few hundred
// requirements in tens of KiB.
const (
	maxLockBytes        = 1 << 20
	maxLockRequirements = 2000
)

var (
	// name[extras]==version: the only requirement shape a lock may hold.
	pinnedRe  = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9._,\s-]*\])?\s*==\s*([0-9A-Za-z.!+_-]+)$`)
	hashOptRe = regexp.MustCompile(`^--hash=sha256:([0-9a-f]{64})$`)
	nameRunRe = regexp.MustCompile(`[-_.]+`)
	// A version has no wildcard and starts with a digit (PEP 440, an
	// optional epoch aside).
	exactVersionRe = regexp.MustCompile(`^([0-9]+!)?[0-9]+(\.[0-9]+)*([a-zA-Z0-9.+_-]*)$`)
)

// Normalize is PEP 503's normalized form of a distribution name.
func Normalize(name string) string {
	return strings.ToLower(nameRunRe.ReplaceAllString(name, "-"))
}

// ParseLock reads a hashed requirements lock, as `uv pip compile
// --generate-hashes` or `pip-compile --generate-hashes` write it for one
// interpreter and platform. Every requirement must be pinned with == to
// one version and carry at least one --hash=sha256; anything that would
// let the installer choose (a range, a URL, an index or find-links
// option, an include, an editable, an environment marker) is refused,
// naming its line.
func ParseLock(data []byte) ([]Requirement, error) {
	if len(data) > maxLockBytes {
		return nil, fmt.Errorf("%d bytes, over the cap of %d", len(data), maxLockBytes)
	}
	var out []Requirement
	seen := map[string]int{}
	for _, l := range logicalLines(data) {
		r, err := parseRequirement(l.text)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", l.line, err)
		}
		r.Line = l.line
		if first, ok := seen[r.Name]; ok {
			return nil, fmt.Errorf("line %d: %s is pinned twice (first at line %d)", l.line, r.Name, first)
		}
		seen[r.Name] = l.line
		if out = append(out, r); len(out) > maxLockRequirements {
			return nil, fmt.Errorf("line %d: more than %d requirements", l.line, maxLockRequirements)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no requirements (want `name==version --hash=sha256:...` lines)")
	}
	return out, nil
}

type logicalLine struct {
	line int
	text string
}

// logicalLines joins "\"-continued lines and drops comments and blanks.
func logicalLines(data []byte) []logicalLine {
	var out []logicalLine
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), maxLockBytes)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if i := strings.Index(text, "#"); i >= 0 && (i == 0 || text[i-1] == ' ' || text[i-1] == '\t') {
			text = text[:i]
		}
		text = strings.TrimSpace(text)
		if cur.Len() == 0 {
			start = n
		}
		cont := strings.HasSuffix(text, "\\")
		cur.WriteString(strings.TrimSuffix(text, "\\"))
		cur.WriteString(" ")
		if cont {
			continue
		}
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, logicalLine{start, s})
		}
		cur.Reset()
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, logicalLine{start, s})
	}
	return out
}

func parseRequirement(text string) (Requirement, error) {
	// The requirement is every field before the first option.
	fields := strings.Fields(text)
	n := slices.IndexFunc(fields, func(f string) bool { return strings.HasPrefix(f, "-") })
	if n < 0 {
		n = len(fields)
	}
	spec, opts := strings.Join(fields[:n], ""), fields[n:]
	if spec == "" {
		spec = fields[0]
	}
	if strings.HasPrefix(spec, "-") {
		return Requirement{}, fmt.Errorf("option %q: a lock holds only pinned, hashed requirements (the index, find-links and includes are sandproof's to choose)", spec)
	}
	if strings.ContainsAny(spec, ";@") || strings.Contains(spec, "://") {
		return Requirement{}, fmt.Errorf("%q: a URL or an environment marker (resolve the lock for one interpreter and platform: uv pip compile --python-version 3.13 --python-platform x86_64-manylinux_2_28 --generate-hashes)", spec)
	}
	m := pinnedRe.FindStringSubmatch(spec)
	if m == nil || !exactVersionRe.MatchString(m[3]) {
		return Requirement{}, fmt.Errorf("%q is not pinned to one version (want name==version)", spec)
	}
	r := Requirement{Name: Normalize(m[1]), Version: m[3]}
	for _, o := range opts {
		h := hashOptRe.FindStringSubmatch(o)
		if h == nil {
			return Requirement{}, fmt.Errorf("%s: option %q (only --hash=sha256:HEX may follow a requirement)", r.Name, o)
		}
		if !slices.Contains(r.Hashes, h[1]) {
			r.Hashes = append(r.Hashes, h[1])
		}
	}
	if len(r.Hashes) == 0 {
		return Requirement{}, fmt.Errorf("%s==%s has no --hash=sha256 (generate the lock with --generate-hashes)", r.Name, r.Version)
	}
	return r, nil
}
