package npm

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// NodeRange is the Node versions a manifest's `with.node` accepts: npm's
// range syntax (node-semver) for release versions, which is what Node
// ships: `>=24.16.0`, `^24.16.0`, `~24.16`, `24.x`, `>=22 <23 || >=24.1`,
// comparators in a set all hold, sets joined by `||` any one. One
// exception keeps the key's first meaning: a range that is a single bare
// x.y.z ("20.6.0") is a minimum (>=20.6.0), not npm's exact version; write
// `=20.6.0` for that. Pre-release tags and hyphen ranges are refused (no
// Node release has one, and `a - b` is `>=a <=b`).
type NodeRange struct {
	src  string
	sets []versionInterval
}

// versionInterval is one set: lo <= v < hi. Versions are integers (no
// pre-releases), so > and <= become >= and < of the next version.
type versionInterval struct{ lo, hi [3]int }

var (
	unbounded     = [3]int{math.MaxInt, 0, 0}
	comparatorRe  = regexp.MustCompile(`^(>=|<=|>|<|=|\^|~)?v?([0-9]+|[xX*])(?:\.([0-9]+|[xX*]))?(?:\.([0-9]+|[xX*]))?$`)
	bareVersionRe = regexp.MustCompile(`^v?[0-9]+\.[0-9]+\.[0-9]+$`)
)

// ParseNodeRange reads a `with.node` value.
func ParseNodeRange(s string) (NodeRange, error) {
	r := NodeRange{src: s}
	src := strings.TrimSpace(s)
	if src == "" {
		return r, fmt.Errorf("empty Node range")
	}
	if bareVersionRe.MatchString(src) {
		src = ">=" + src // the key's first meaning: a minimum
	}
	for _, alt := range strings.Split(src, "||") {
		fields := strings.Fields(alt)
		if len(fields) == 0 {
			return r, fmt.Errorf("bad Node range %q: an empty alternative around ||", s)
		}
		set := versionInterval{hi: unbounded}
		for _, f := range fields {
			iv, err := parseComparator(f)
			if err != nil {
				return r, fmt.Errorf("bad Node range %q: %v", s, err)
			}
			if less(set.lo, iv.lo) {
				set.lo = iv.lo
			}
			if less(iv.hi, set.hi) {
				set.hi = iv.hi
			}
		}
		r.sets = append(r.sets, set)
	}
	if r.empty() {
		return r, fmt.Errorf("Node range %q matches no version", s)
	}
	return r, nil
}

func (r NodeRange) empty() bool {
	for _, s := range r.sets {
		if less(s.lo, s.hi) {
			return false
		}
	}
	return true
}

// String is the range as the manifest wrote it.
func (r NodeRange) String() string { return r.src }

// IsZero reports a manifest without `with.node` (any Node).
func (r NodeRange) IsZero() bool { return r.sets == nil }

// Contains reports whether version ("v24.16.0" or "24.16.0") is in the
// range; the zero range contains every version.
func (r NodeRange) Contains(version string) bool {
	v, ok := parseVersion("v" + strings.TrimPrefix(version, "v"))
	if !ok {
		return false
	}
	if r.IsZero() {
		return true
	}
	for _, s := range r.sets {
		if !less(v, s.lo) && less(v, s.hi) {
			return true
		}
	}
	return false
}

// parseComparator turns one comparator into the interval it allows. A
// missing or wildcard part (1, 1.2, 1.x) is a partial version: "=1.2" and
// "1.2" are 1.2.x, ">1.2" is >=1.3.0, "<=1.2" is <1.3.0.
func parseComparator(f string) (versionInterval, error) {
	m := comparatorRe.FindStringSubmatch(f)
	if m == nil {
		return versionInterval{}, fmt.Errorf("%q is not a comparator (want e.g. >=24.16.0, ^24.16.0, ~24.16, 24.x)", f)
	}
	op := m[1]
	var v [3]int
	given := 0 // how many leading parts are numbers
	for i, p := range m[2:5] {
		if p == "" || p == "x" || p == "X" || p == "*" {
			break
		}
		v[i], _ = strconv.Atoi(p)
		given = i + 1
	}
	for _, p := range m[2+given : 5] {
		if p != "" && p != "x" && p != "X" && p != "*" {
			return versionInterval{}, fmt.Errorf("%q has a number after a wildcard", f)
		}
	}
	// next is the first version past the partial one: 1.2 -> 1.3.0.
	next := func() [3]int {
		if given == 0 {
			return unbounded
		}
		n := v
		n[given-1]++
		for i := given; i < 3; i++ {
			n[i] = 0
		}
		return n
	}
	switch op {
	case "", "=":
		return versionInterval{lo: v, hi: next()}, nil
	case ">=":
		return versionInterval{lo: v, hi: unbounded}, nil
	case ">":
		if given == 0 {
			return versionInterval{lo: unbounded, hi: unbounded}, nil // nothing is > *
		}
		return versionInterval{lo: next(), hi: unbounded}, nil
	case "<":
		if given == 0 {
			return versionInterval{}, nil // nothing is < *
		}
		return versionInterval{hi: v}, nil
	case "<=":
		return versionInterval{hi: next()}, nil
	case "~", "^":
		return rangeOf(op, v, given), nil
	}
	return versionInterval{}, fmt.Errorf("unknown operator %q", op)
}

// rangeOf is what ~ and ^ allow from v, of which given parts were
// written: ~ the patch releases (~1.2.3, ~1.2) or the minor ones (~1);
// ^ up to the next change of the first non-zero part given.
func rangeOf(op string, v [3]int, given int) versionInterval {
	if given == 0 {
		return versionInterval{hi: unbounded}
	}
	if op == "~" {
		if given >= 2 {
			return versionInterval{lo: v, hi: [3]int{v[0], v[1] + 1, 0}}
		}
		return versionInterval{lo: v, hi: [3]int{v[0] + 1, 0, 0}}
	}
	switch {
	case v[0] > 0 || given == 1:
		return versionInterval{lo: v, hi: [3]int{v[0] + 1, 0, 0}}
	case v[1] > 0 || given == 2:
		return versionInterval{lo: v, hi: [3]int{0, v[1] + 1, 0}}
	default:
		return versionInterval{lo: v, hi: [3]int{0, 0, v[2] + 1}}
	}
}
