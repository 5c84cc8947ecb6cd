package canary_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/canary"
)

const key = "sk-sandproof-canary-0123456789abcdef0123456789abcdef"

func reverse(s string) string {
	b := []byte(s)
	slices.Reverse(b)
	return string(b)
}

// encodings are the simple encodings of a key the matcher knows.
func encodings() map[string]func(string) string {
	jsonEsc := func(s string) string {
		var b strings.Builder
		for _, r := range s {
			b.WriteString(`\u00` + hex.EncodeToString([]byte{byte(r)}))
		}
		return b.String()
	}
	pct := func(s string) string {
		var b strings.Builder
		for _, c := range []byte(s) {
			b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
		return b.String()
	}
	return map[string]func(string) string{
		"hex lower":         func(s string) string { return hex.EncodeToString([]byte(s)) },
		"hex upper":         func(s string) string { return strings.ToUpper(hex.EncodeToString([]byte(s))) },
		"hex mixed":         func(s string) string { h := hex.EncodeToString([]byte(s)); return strings.ToUpper(h[:9]) + h[9:] },
		"reversed":          reverse,
		"reversed hex":      func(s string) string { return hex.EncodeToString([]byte(reverse(s))) },
		"base64 at 0":       func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
		"base64 at 1":       func(s string) string { return base64.StdEncoding.EncodeToString([]byte("x" + s)) },
		"base64 at 2":       func(s string) string { return base64.URLEncoding.EncodeToString([]byte("xy" + s)) },
		"URL escapes":       pct,
		"some URL escapes":  func(s string) string { return "q=" + strings.ReplaceAll(url.QueryEscape(s), "-", "%2d") },
		"JSON escapes":      jsonEsc,
		"JSON, twice":       func(s string) string { b, _ := json.Marshal(jsonEsc(s)); return string(b) },
		"URL of JSON":       func(s string) string { return pct(jsonEsc(s)) },
		"JSON of URL":       func(s string) string { return jsonEsc(pct(s)) },
		"JSON of base64":    func(s string) string { return jsonEsc(base64.StdEncoding.EncodeToString([]byte(s))) },
		"URL of hex":        func(s string) string { return pct(hex.EncodeToString([]byte(s))) },
		"some JSON escapes": func(s string) string { return strings.ReplaceAll(s, "-", `\u002D`) },
	}
}

// Every simple encoding of the key is found, each with the positive
// control that the key is not in the bytes as is; another key in the same
// encodings is not.
func TestFindDecodes(t *testing.T) {
	enc := encodings()
	m, other := canary.New(key), canary.New("sk-sandproof-canary-ffffffffffffffffffffffffffffffff")
	for name, f := range enc {
		t.Run(name, func(t *testing.T) {
			data := []byte("prefix " + f(key) + " suffix")
			if bytes.Contains(data, []byte(key)) {
				t.Fatalf("positive control: the key is in %q as is", data)
			}
			if how, ok := m.Find(data); !ok {
				t.Errorf("not found in %q", data)
			} else {
				t.Logf("found (%s)", how)
			}
			if how, ok := other.Find(data); ok {
				t.Errorf("another key found (%s) in %q", how, data)
			}
		})
	}
}

// Split keys are not found (documented): the positive control that the
// halves are there.
func TestFindDoesNotJoinPieces(t *testing.T) {
	data := key[:20] + " and " + key[20:]
	if !strings.Contains(data, key[:20]) || !strings.Contains(data, key[20:]) {
		t.Fatal("positive control")
	}
	if how, ok := canary.New(key).Find([]byte(data)); ok {
		t.Fatalf("found %s in a split key; the docs say split keys are not found", how)
	}
}

// A stream search finds the key across window edges, in any encoding,
// and holds at most a window.
func TestStreamAcrossWindows(t *testing.T) {
	m := canary.New(key)
	for _, encoded := range []string{key, hex.EncodeToString([]byte(key)), base64.StdEncoding.EncodeToString([]byte("z" + key))} {
		for _, at := range []int{0, 1, 256<<10 - 10, 256<<10 + 3, 3<<20 - 7} {
			s := m.NewStream()
			filler := bytes.Repeat([]byte("."), at)
			data := append(append(filler, encoded...), bytes.Repeat([]byte("."), 1000)...)
			// Written in odd pieces.
			for len(data) > 0 {
				k := min(len(data), 7919)
				s.Write(data[:k])
				data = data[k:]
			}
			if _, ok := s.Found(); !ok {
				t.Errorf("%.10s... at %d: not found", encoded, at)
			}
		}
	}
	s := m.NewStream()
	s.Write(bytes.Repeat([]byte("a"), 1<<20))
	if how, ok := s.Found(); ok {
		t.Errorf("found %s in filler", how)
	}
}

func TestEmptyKeyMatchesNothing(t *testing.T) {
	if _, ok := canary.New("").Find([]byte("anything")); ok {
		t.Fatal("the empty key matched")
	}
}

// BenchmarkStream is the relay's scan of one request body: 1 MiB of a
// Chat Completions request with escapes (docs/performance.md).
func BenchmarkStream(b *testing.B) {
	msg, _ := json.Marshal(map[string]string{"role": "tool", "content": "line \"one\"\n50% done, path C:\\tmp\\x é"})
	body := bytes.Repeat(append(msg, ','), (1<<20)/(len(msg)+1))
	m := canary.New(key)
	b.SetBytes(int64(len(body)))
	for i := 0; i < b.N; i++ {
		s := m.NewStream()
		s.Write(body)
		if _, ok := s.Found(); ok {
			b.Fatal("found")
		}
	}
}

// Redact takes the key out of a text in every encoding Find knows: what
// it returns is not found; where it could place the key (as is, hex,
// base64, reversed) only the key goes and the text around it stays; a
// text without the key is returned as it was.
func TestRedactEveryEncoding(t *testing.T) {
	m := canary.New(key)
	placed := map[string]bool{"hex lower": true, "hex upper": true, "hex mixed": true, "reversed": true, "reversed hex": true, "base64 at 0": true}
	for name, f := range encodings() {
		t.Run(name, func(t *testing.T) {
			text := "prefix " + f(key) + " suffix"
			if _, ok := m.Find([]byte(text)); !ok {
				t.Fatalf("positive control: %q does not hold the key", text)
			}
			got, hit := m.Redact(text)
			if _, ok := m.Find([]byte(got)); ok || !hit {
				t.Errorf("Redact = %q, %t: the key is still there", got, hit)
			}
			if placed[name] && (!strings.HasPrefix(got, "prefix ") || !strings.HasSuffix(got, " suffix") || !strings.Contains(got, canary.Redacted)) {
				t.Errorf("Redact = %q: want the text around the key kept", got)
			}
		})
	}
	if got, hit := m.Redact("nothing here " + key[:20]); hit || got != "nothing here "+key[:20] {
		t.Errorf("a text without the key: %q, %t", got, hit)
	}
}
