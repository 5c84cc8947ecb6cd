package provider

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// withRegistry runs f against an empty registry, then puts back what was
// registered (the docker provider, when a test links it).
func withRegistry(t *testing.T, f func()) {
	t.Helper()
	registryMu.Lock()
	was := registry
	registry = map[string]Factory{}
	registryMu.Unlock()
	defer func() {
		registryMu.Lock()
		registry = was
		registryMu.Unlock()
	}()
	f()
}

func panics(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = r.(string)
		}
	}()
	f()
	return ""
}

// A provider is found by the name it registered; an unknown name is an
// ErrUnknownProvider that lists the known ones; a name registered twice,
// an empty one or a Factory without New panics at init.
func TestRegistry(t *testing.T) {
	withRegistry(t, func() {
		if _, err := New("docker"); !errors.Is(err, ErrUnknownProvider) || !strings.Contains(err.Error(), `"docker" (known: none registered)`) {
			t.Errorf("an empty registry: %v", err)
		}
		made := 0
		Register("b", Factory{New: func() (Provider, error) { made++; return nil, errors.New("b: no engine") }})
		Register("a", Factory{New: func() (Provider, error) { return nil, nil }})
		if got := Names(); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("Names() = %q, want [a b]", got)
		}
		if _, err := New("b"); err == nil || err.Error() != "b: no engine" || made != 1 {
			t.Errorf("New(b) = %v after %d calls; want b's own error, once", err, made)
		}
		if _, err := New("c"); !errors.Is(err, ErrUnknownProvider) || !strings.Contains(err.Error(), `"c" (known: a, b)`) {
			t.Errorf("New(c) = %v", err)
		}
		if _, ok := Lookup("a"); !ok {
			t.Error("Lookup(a): not found")
		}
		for _, bad := range []struct {
			name string
			f    Factory
		}{{"a", Factory{New: func() (Provider, error) { return nil, nil }}}, {"", Factory{New: func() (Provider, error) { return nil, nil }}}, {"d", Factory{}}} {
			if msg := panics(func() { Register(bad.name, bad.f) }); msg == "" {
				t.Errorf("Register(%q) did not panic", bad.name)
			}
		}
	})
}
