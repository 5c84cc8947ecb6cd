package session

import (
	"slices"
	"testing"
)

// The owner's markers are the paths docs/certify.md gives (§7.1 setup):
// /home/task/{.config,.local/share,.cache,.local/state}/sandproof-owner/marker.
func TestOwnerMarkers(t *testing.T) {
	want := []string{
		"/home/task/.config/sandproof-owner/marker",
		"/home/task/.local/share/sandproof-owner/marker",
		"/home/task/.cache/sandproof-owner/marker",
		"/home/task/.local/state/sandproof-owner/marker",
	}
	if got := OwnerMarkers("/home/task"); !slices.Equal(got, want) {
		t.Errorf("OwnerMarkers = %q, want %q", got, want)
	}
	env := XDGDefaults("{home}")
	for i, v := range []string{"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"} {
		if got, want := env[v], XDGDirs("{home}")[i]; got != want || len(env) != 4 {
			t.Errorf("XDGDefaults[%s] = %q (of %d), want %q", v, got, len(env), want)
		}
	}
}
