package python

import (
	"strings"
	"testing"
)

func TestAllowsReadsRequiresPython(t *testing.T) {
	v := [3]int{3, 13, 5}
	for spec, want := range map[string]bool{
		"": true, ">=3.12": true, ">=3.14": false, "<3.14,>=3.11": true, "<3.13,>=3.11": false,
		">=3.8, <4.0": true, "!=3.13.*": false, "==3.13.*": true, "==3.*": true, "!=3.0.*,!=3.1.*": true,
		"~=3.10": true, "~=3.13.6": false, "~=3.13.0": true, ">3.13.5": false, "<=3.13.5": true, "==3.13.5": true,
	} {
		got, ok := Allows(spec, v)
		if !ok || got != want {
			t.Errorf("Allows(%q) = %v (understood %v), want %v", spec, got, ok, want)
		}
	}
	for _, spec := range []string{"===3.13.5", ">=3.14.0a1", "~=3", "^3.12"} {
		if got, ok := Allows(spec, v); ok || !got {
			t.Errorf("Allows(%q) = %v, %v: want passed over (not understood)", spec, got, ok)
		}
	}
}

// A pinned wheel whose Requires-Python excludes the tree's interpreter is
// not taken, and the refusal names what it needs.
func TestChooseRefusesAWheelForAnotherPython(t *testing.T) {
	r := Requirement{Name: "x", Version: "1.0", Hashes: []string{hashA}, Line: 2}
	f := file("x-1.0-py3-none-any.whl", hashA)
	f.RequiresPython = ">=3.14"
	plat := cp313
	plat.Micro = 5
	_, _, err := Choose(r, []File{f}, plat)
	if err == nil || !strings.Contains(err.Error(), "requires Python >=3.14; the tree's CPython is 3.13.5") {
		t.Fatalf("Choose = %v, want the interpreter named", err)
	}
	f.RequiresPython = ">=3.12"
	if _, _, err := Choose(r, []File{f}, plat); err != nil {
		t.Fatalf("a wheel for 3.12 and newer: %v", err)
	}
}
