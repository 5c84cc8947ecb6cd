package python

import (
	"strconv"
	"strings"
)

// Allows says whether a wheel's Requires-Python (PEP 440 specifiers, as
// the index lists them: ">=3.10", "<3.14,>=3.11", "!=3.0.*") admits the
// interpreter version v (major, minor, micro). ok is false for a
// specifier this reader does not understand (an arbitrary-equality or a
// pre-release clause): pip passes those over with a warning, and so does
// Choose (the wheel's tags still have to fit).
func Allows(spec string, v [3]int) (allowed, ok bool) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return true, true
	}
	for _, clause := range strings.Split(spec, ",") {
		a, ok := allowsClause(strings.TrimSpace(clause), v)
		if !ok {
			return true, false
		}
		if !a {
			return false, true
		}
	}
	return true, true
}

func allowsClause(c string, v [3]int) (allowed, ok bool) {
	var op string
	for _, o := range []string{"~=", "==", "!=", "<=", ">=", "<", ">"} {
		if strings.HasPrefix(c, o) {
			op = o
			break
		}
	}
	if op == "" || strings.HasPrefix(c, "===") {
		return true, false
	}
	ver := strings.TrimSpace(c[len(op):])
	if prefix, wild := strings.CutSuffix(ver, ".*"); wild {
		want, n, ok := release(prefix)
		if !ok || (op != "==" && op != "!=") {
			return true, false
		}
		match := true
		for i := 0; i < n; i++ {
			match = match && v[i] == want[i]
		}
		return match == (op == "=="), true
	}
	want, n, ok := release(ver)
	if !ok {
		return true, false
	}
	cmp := compare(v, want)
	switch op {
	case "==":
		return cmp == 0, true
	case "!=":
		return cmp != 0, true
	case "<=":
		return cmp <= 0, true
	case ">=":
		return cmp >= 0, true
	case "<":
		return cmp < 0, true
	case ">":
		return cmp > 0, true
	}
	// ~=X.Y[.Z]: >= it, and the same release but its last part.
	if n < 2 {
		return true, false
	}
	same := true
	for i := 0; i < n-1; i++ {
		same = same && v[i] == want[i]
	}
	return cmp >= 0 && same, true
}

// release reads "3", "3.13" or "3.13.5" (no pre-, post- or dev-release):
// the parts, missing ones 0, and how many were given.
func release(s string) ([3]int, int, bool) {
	var out [3]int
	parts := strings.Split(s, ".")
	if len(parts) == 0 || len(parts) > 3 {
		return out, 0, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, 0, false
		}
		out[i] = n
	}
	return out, len(parts), true
}

func compare(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}
