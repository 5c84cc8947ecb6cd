package python

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Platform is what a wheel must be built for to run on the runtime's
// interpreter: its CPython version, its machine and the glibc the tree
// carries (which sets the newest manylinux it can load).
type Platform struct {
	Major, Minor int    // 3, 13
	Micro        int    // 5: what a wheel's Requires-Python is read against
	Machine      string // x86_64, aarch64
	GlibcMinor   int    // 41 for glibc 2.41
}

// Wheel is a wheel's file name, read (PEP 427): name-ver(-build)?-py-abi-plat.whl.
type Wheel struct {
	Name, Version         string
	Python, ABI, Platform []string // each a tag set, "." separated in the name
}

var wheelRe = regexp.MustCompile(`^([A-Za-z0-9_.]+)-([A-Za-z0-9_.!+]+)(-[0-9][A-Za-z0-9_.]*)?-([A-Za-z0-9_.]+)-([A-Za-z0-9_.]+)-([A-Za-z0-9_.]+)\.whl$`)

// ParseWheelName reads a wheel's file name; anything else is an error.
func ParseWheelName(file string) (Wheel, error) {
	m := wheelRe.FindStringSubmatch(file)
	if m == nil {
		return Wheel{}, fmt.Errorf("%q is not a wheel's file name", file)
	}
	return Wheel{Name: Normalize(m[1]), Version: m[2],
		Python: strings.Split(m[4], "."), ABI: strings.Split(m[5], "."), Platform: strings.Split(m[6], ".")}, nil
}

// Score is how well w fits p: 0 when it cannot be installed there, and
// higher the more specific it is (CPython's own ABI over the stable ABI
// over pure Python; a newer manylinux over an older), so the choice among
// a release's files is the same everywhere.
func (w Wheel) Score(p Platform) int {
	best := 0
	for _, py := range w.Python {
		for _, abi := range w.ABI {
			s := p.interpScore(py, abi)
			if s == 0 {
				continue
			}
			for _, pl := range w.Platform {
				if ps := p.platformScore(pl); ps > 0 && s*100+ps > best {
					best = s*100 + ps
				}
			}
		}
	}
	return best
}

// interpScore: cp313-cp313 3, cp3X-abi3 (X <= 13) 2, py3/py3X-none 1.
func (p Platform) interpScore(py, abi string) int {
	cp := fmt.Sprintf("cp%d%d", p.Major, p.Minor)
	switch {
	case py == cp && abi == cp:
		return 3
	case abi == "abi3" && strings.HasPrefix(py, "cp3"):
		if minor, err := strconv.Atoi(py[3:]); err == nil && minor <= p.Minor {
			return 2
		}
	case abi == "none":
		if py == "py3" || py == fmt.Sprintf("py%d%d", p.Major, p.Minor) || py == cp {
			return 1
		}
		if strings.HasPrefix(py, "py3") {
			if minor, err := strconv.Atoi(py[3:]); err == nil && minor <= p.Minor {
				return 1
			}
		}
	}
	return 0
}

// legacyManylinux are PEP 600's aliases: manylinux1 is 2_5, 2010 2_12,
// 2014 2_17.
var legacyManylinux = map[string]int{"manylinux1": 5, "manylinux2010": 12, "manylinux2014": 17}

// platformScore: any 1; manylinux_2_Y for this machine with Y at most the
// tree's glibc, 2+Y. A plain linux_* wheel is never taken (it names no
// glibc it can run with).
func (p Platform) platformScore(pl string) int {
	if pl == "any" {
		return 1
	}
	rest, ok := strings.CutSuffix(pl, "_"+p.Machine)
	if !ok {
		return 0
	}
	y, legacy := legacyManylinux[rest]
	if !legacy {
		v, ok := strings.CutPrefix(rest, "manylinux_2_")
		if !ok {
			return 0
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0
		}
		y = n
	}
	if y > p.GlibcMinor {
		return 0
	}
	return 2 + y
}

// String is the tag triple this platform installs, for messages.
func (p Platform) String() string {
	return fmt.Sprintf("cp%d%d manylinux_2_%d_%s", p.Major, p.Minor, p.GlibcMinor, p.Machine)
}
