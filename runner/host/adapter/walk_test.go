package adapter_test

import (
	"fmt"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sandproof/sandproof/runner/host/adapter"
)

// The manifest and the preparers' `with` blocks are both walked by
// WalkMapping: known keys reach their handlers once, in file order, and
// every unknown, repeated or missing key is an issue on the right line.
func TestWalkMapping(t *testing.T) {
	var doc yaml.Node
	src := "a: 1\nx: 2\na: 3\nb: 4\n"
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	m := doc.Content[0]
	var calls, issues []string
	h := func(key string, v *yaml.Node) { calls = append(calls, fmt.Sprintf("%s=%s@%d", key, v.Value, v.Line)) }
	handlers := map[string]func(string, *yaml.Node){"a": h, "b": h, "c": h}
	ok := adapter.WalkMapping(m, "w", []string{"a", "c"}, handlers, func(is adapter.MappingIssue) {
		issues = append(issues, fmt.Sprintf("%d %s %s @%d %v", is.Kind, is.Name, is.Path, is.Node.Line, is.Known))
	})
	if !ok {
		t.Errorf("WalkMapping of a mapping returned false")
	}
	if want := []string{"w.a=1@1", "w.b=4@4"}; !reflect.DeepEqual(calls, want) {
		t.Errorf("handler calls %q, want %q", calls, want)
	}
	want := []string{
		fmt.Sprintf("%d x w.x @2 [a b c]", adapter.UnknownKey),
		fmt.Sprintf("%d a w.a @3 []", adapter.GivenTwice),
		fmt.Sprintf("%d c w.c @1 []", adapter.MissingKey),
	}
	if !reflect.DeepEqual(issues, want) {
		t.Errorf("issues %q, want %q", issues, want)
	}

	// At the top (where ""), paths are the bare keys.
	calls, issues = nil, nil
	adapter.WalkMapping(m, "", nil, map[string]func(string, *yaml.Node){"b": h}, func(is adapter.MappingIssue) {
		issues = append(issues, is.Path)
	})
	if want := []string{"b=4@4"}; !reflect.DeepEqual(calls, want) {
		t.Errorf("top-level handler calls %q, want %q", calls, want)
	}
	// a is unknown here each time it appears: unknown comes before twice.
	if want := []string{"a", "x", "a"}; !reflect.DeepEqual(issues, want) {
		t.Errorf("top-level issue paths %q, want %q", issues, want)
	}
}

// A node that is not a mapping is one issue and no handler call.
func TestWalkMappingNotAMapping(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("- a\n"), &doc); err != nil {
		t.Fatal(err)
	}
	var kinds []adapter.MappingIssueKind
	called := false
	ok := adapter.WalkMapping(doc.Content[0], "w", []string{"a"}, map[string]func(string, *yaml.Node){
		"a": func(string, *yaml.Node) { called = true },
	}, func(is adapter.MappingIssue) { kinds = append(kinds, is.Kind) })
	if ok || called || !reflect.DeepEqual(kinds, []adapter.MappingIssueKind{adapter.NotMapping}) {
		t.Errorf("a list: ok %v, handler called %v, issues %v; want false, false, [NotMapping]", ok, called, kinds)
	}
}
