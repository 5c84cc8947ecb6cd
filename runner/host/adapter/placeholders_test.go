package adapter_test

import (
	"slices"
	"sort"
	"testing"

	"github.com/sandproof/sandproof/runner/host/adapter"
)

// Every name Expand accepts (Placeholders) has a value in a session's env
// (Values), and Values gives no value a template could not name: a
// placeholder added to one and not the other fails here, not in a case.
func TestPlaceholdersAreTheValuesKeys(t *testing.T) {
	m := &adapter.Manifest{Name: "x", APIKeyEnv: "K"}
	vals := m.Values(adapter.Context{ModelURL: "http://127.0.0.1:1/v1", Model: "m", TaskDir: "/task"}, "/s", "/h", "p")
	var keys []string
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := slices.Clone(adapter.Placeholders)
	sort.Strings(want)
	if !slices.Equal(keys, want) {
		t.Errorf("Values gives %q, Placeholders are %q", keys, want)
	}
}
