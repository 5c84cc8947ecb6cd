package certify

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The key escaped in a JSON object's key (not its value) is found: a
// harness that logs a map keyed by credentials leaks it as surely as one
// that logs a value. The positive control is that a plain search misses
// it; the same document with another key is clean.
func TestFindCanaryInAJSONKey(t *testing.T) {
	key, other := NewCanary(), NewCanary()
	doc := func(k string) []byte {
		return []byte(`{"type":"x","creds":{"` + strings.ReplaceAll(k, "-", `\u002d`) + `":"ok"}}` + "\n")
	}
	for _, tc := range []struct {
		k    string
		want int
	}{{key, 1}, {other, 0}} {
		dir := t.TempDir()
		data := doc(tc.k)
		if bytes.Contains(data, []byte(key)) {
			t.Fatalf("positive control: the key is in the file as is, a plain search finds it: %q", data)
		}
		if err := os.WriteFile(filepath.Join(dir, "events.jsonl"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		hits, err := FindCanary(dir, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) != tc.want {
			t.Errorf("%d hit(s) in %q, want %d", len(hits), data, tc.want)
		}
	}
}
