// Package runtimestest is the contract every runtime kind's tests call
// (runtimes.Kind): an empty with block is refused, a valid one is
// accepted and plans the same spec every time, and Pins reads what the
// block pins. A kind's own behaviour (what it fetches, how it stages) is
// its package's tests'; docs/add-runtime-kind.md.
package runtimestest

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/runtimes"
	"go.yaml.in/yaml/v3"
)

// Case is one valid with block of the kind under test.
type Case struct {
	// Dir is the manifest's directory (relative paths in With resolve
	// against it).
	Dir string
	// With is the prepare.with block, YAML.
	With string
	// Target is what Plan is asked for; the block must cover it.
	Target runtimes.Target
	// Pins are what Kind.Pins must read from With's scalars.
	Pins adapter.Pins
}

// Kind runs the contract on k with c and fails t for each break.
func Kind(t *testing.T, k runtimes.Kind, c Case) {
	t.Helper()
	for _, p := range Problems(k, c) {
		t.Error(p)
	}
}

// Problems is what Kind reports, as values (a planted bad kind's are
// tested).
func Problems(k runtimes.Kind, c Case) []string {
	var out []string
	if k.Name() == "" {
		out = append(out, "Name is empty")
	}
	if errs := k.Check(c.Dir, nil); len(errs) == 0 {
		out = append(out, "Check accepts a manifest without a with block")
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(c.With), &doc); err != nil || len(doc.Content) != 1 {
		return append(out, fmt.Sprintf("the case's with block is no YAML: %v", err))
	}
	n := doc.Content[0]
	if errs := k.Check(c.Dir, n); len(errs) > 0 {
		out = append(out, fmt.Sprintf("Check refuses the case's with block: %+v", errs))
	}
	with := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if v := n.Content[i+1]; v.Kind == yaml.ScalarNode {
			with[n.Content[i].Value] = v.Value
		}
	}
	if got := k.Pins(with); got != c.Pins {
		out = append(out, fmt.Sprintf("Pins = %+v, want %+v", got, c.Pins))
	}
	req := adapter.PrepareRequest{ManifestDir: c.Dir, With: with, Node: n, GOOS: "linux", GOARCH: c.Target.Arch, Libc: c.Target.Libc}
	a, err := k.Plan(req, c.Target)
	if err != nil {
		return append(out, fmt.Sprintf("Plan: %v", err))
	}
	b, err := k.Plan(req, c.Target)
	if err != nil {
		return append(out, fmt.Sprintf("Plan, again: %v", err))
	}
	if a.Key() != b.Key() || !sameSpec(a, b) {
		out = append(out, fmt.Sprintf("Plan is not deterministic: %q, then %q", a.Key(), b.Key()))
	}
	if a.Name == "" || a.Version == "" || a.Hash == "" || a.Stage == nil || len(a.Entry) == 0 {
		out = append(out, fmt.Sprintf("Plan's spec is incomplete (name, version, hash, stage, entry): %q", a.Key()))
	}
	if a.Version != c.Pins.Version || a.Integrity != c.Pins.Integrity {
		out = append(out, fmt.Sprintf("Plan's spec is %s (%s), the pins %s (%s)", a.Version, a.Integrity, c.Pins.Version, c.Pins.Integrity))
	}
	return out
}

// sameSpec compares two specs' data (their funcs cannot be).
func sameSpec(a, b runtimes.Spec) bool {
	a.Stage, b.Stage, a.HostParts, b.HostParts = nil, nil, nil, nil
	return reflect.DeepEqual(a, b) && slices.Equal(a.Entry, b.Entry)
}
