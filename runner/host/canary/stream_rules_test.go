package canary

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The stream search's edges and the decoders' edge cases (the host-path
// mutants, docs/mutation.md). In package canary: the window is the
// package's constant, so the placements below follow it.

const ruleKey = "sk-sandproof-canary-0123456789abcdef0123456789abcdef"

func jsonEscapeAll(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		fmt.Fprintf(&b, `\u%04x`, c)
	}
	return b.String()
}

func urlEscapeAll(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// An encoded key astride a window's edge is found, at every edge and in
// every encoding up to the widest the carry holds (widestEscape): the key
// \u-escaped, URL-escaped, both (18 bytes a byte), and its hex escaped as
// JSON twice, every byte a \u escape, then every byte URL-escaped (108
// bytes a byte of the hex, the widest). The placements start one byte
// before the first, second and third edges (found only if the carry holds
// the whole form, and is kept after every window), a quarter of the form
// before the first, and astride the end of the first and second carries. Each placement's positive control is that
// the form really straddles the edge it is placed at.
func TestStreamFindsEscapedKeysAcrossEveryEdge(t *testing.T) {
	m := New(ruleKey)
	o := m.Overlap()
	hexKey := hex.EncodeToString([]byte(ruleKey))
	widest := urlEscapeAll(jsonEscapeAll(jsonEscapeAll(hexKey)))
	forms := map[string]string{
		"as is":                                 ruleKey,
		"JSON escapes":                          jsonEscapeAll(ruleKey),
		"URL escapes":                           urlEscapeAll(ruleKey),
		"URL of JSON escapes":                   urlEscapeAll(jsonEscapeAll(ruleKey)),
		"hex, URL of JSON":                      urlEscapeAll(jsonEscapeAll(hexKey)),
		"hex, JSON twice":                       jsonEscapeAll(jsonEscapeAll(strings.ToUpper(hexKey))),
		"hex, URL of JSON of JSON (the widest)": widest,
	}
	if len(widest) != 6*6*3*len(hexKey) {
		t.Fatalf("positive control: the widest form is %d bytes, want 108 a byte of the hex", len(widest))
	}
	for name, form := range forms {
		l := len(form)
		if name != "as is" && strings.Contains(form, ruleKey) {
			t.Fatalf("positive control: %s holds the key as is", name)
		}
		for _, p := range []struct{ at, edge int }{
			{window - 1, window}, {window - l/4, window}, {2*window - 1, 2 * window}, {3*window - 1, 3 * window},
			{window + o - l/2, window + o}, {2*window + o - l/2, 2*window + o},
		} {
			if !(p.at < p.edge && p.at+l > p.edge) {
				t.Fatalf("positive control: %s at %d is not astride %d", name, p.at, p.edge)
			}
			data := slices.Concat(bytes.Repeat([]byte("."), p.at), []byte(form), bytes.Repeat([]byte("."), 1000))
			s := m.NewStream()
			for rest := data; len(rest) > 0; {
				k := min(len(rest), 7919)
				s.Write(rest[:k])
				rest = rest[k:]
			}
			if _, ok := s.Found(); !ok {
				t.Errorf("%s (%d bytes) at %d, astride %d (carry %d): not found", name, l, p.at, p.edge, o)
			}
		}
	}
	if o < len(widest) {
		t.Errorf("the carry (%d bytes) is shorter than the widest form (%d)", o, len(widest))
	}
}

// A stream shorter than the carry (a small file, a small request body)
// is searched; an empty one finds nothing.
func TestStreamSearchesAShortStream(t *testing.T) {
	m := New(ruleKey)
	s := m.NewStream()
	s.Write([]byte("k=" + ruleKey))
	if len("k="+ruleKey) >= m.Overlap() {
		t.Fatalf("positive control: the stream (%d bytes) is not shorter than the carry (%d)", len("k="+ruleKey), m.Overlap())
	}
	if _, ok := s.Found(); !ok {
		t.Error("the key in a short stream: not found")
	}
	if _, ok := m.NewStream().Found(); ok {
		t.Error("an empty stream: found")
	}
}

// The decoders' edges: a URL escape in the last three bytes (the key
// escaped at the very end of a file or body, nothing after it); the
// key's hex reversed as a string (any case); the key base64-encoded in
// the URL alphabet at each alignment, for a key whose standard encoding
// differs (a model key may hold any byte). Each with the positive
// control that the form does not hold the key as is.
func TestFindDecoderEdges(t *testing.T) {
	m := New(ruleKey)
	for name, data := range map[string]string{
		"URL escapes, nothing after":  urlEscapeAll(ruleKey),
		"one URL escape at the end":   ruleKey[:len(ruleKey)-1] + urlEscapeAll(ruleKey[len(ruleKey)-1:]),
		"JSON escape at the end":      ruleKey[:len(ruleKey)-1] + jsonEscapeAll(ruleKey[len(ruleKey)-1:]),
		"hex reversed as a string":    reverseString(hex.EncodeToString([]byte(ruleKey))),
		"hex reversed, upper":         strings.ToUpper(reverseString(hex.EncodeToString([]byte(ruleKey)))),
		"hex of the reversed, at end": "x" + hex.EncodeToString([]byte(reverseString(ruleKey))),
	} {
		if strings.Contains(data, ruleKey) {
			t.Fatalf("positive control: %s holds the key as is", name)
		}
		if _, ok := m.Find([]byte(data)); !ok {
			t.Errorf("%s: not found in %q", name, data)
		}
	}
	const modelKey = "sk-model-??>>~~??>>~~-0123456789"
	mk := New(modelKey)
	for a := 0; a < 3; a++ {
		prefix := strings.Repeat("z", a)
		std := base64.RawStdEncoding.EncodeToString([]byte(prefix + modelKey))
		url := base64.RawURLEncoding.EncodeToString([]byte(prefix + modelKey))
		if std == url {
			t.Fatalf("positive control: at %d the two alphabets encode %q alike", a, modelKey)
		}
		if _, ok := mk.Find([]byte("token=" + url + ";")); !ok {
			t.Errorf("base64 URL alphabet after %d byte(s): not found in %q", a, url)
		}
	}
}

func reverseString(s string) string {
	b := []byte(s)
	slices.Reverse(b)
	return string(b)
}
