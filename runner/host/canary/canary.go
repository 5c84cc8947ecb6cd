// Package canary finds a key in bytes, as is and in the simple encodings
// a harness (or sandproof's own renderers) could wrap it in. It is the one
// place the relay (which refuses a request that carries the case's key)
// and certify's run-dir scan (which fails a case whose files hold it)
// take their decoders from, so what one catches the other catches too.
//
// Found: the key as is and as sandproof's renderers escape it (Markdown,
// HTML, XML, JSON, Printable); reversed; hex in either case (any mix), of
// the key or of it reversed, and the hex reversed;
// base64 at any of the three alignments, standard and URL alphabets; and
// each of those below URL escapes (%XX, once) and JSON string escapes
// (\uXXXX, \n, \/ ..., up to four times nested), in any order. Not found:
// a key split into pieces, or put through an encoding not listed (gzip,
// base32, a cipher); see docs/threat-model.md.
package canary

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"slices"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/sandproof/sandproof/reports"
)

// maxJSONDepth is how many times JSON escapes are undone in a row (a JSON
// document inside a JSON string inside ...).
const maxJSONDepth = 4

// Matcher finds one key. The zero value is not usable; use New.
type Matcher struct {
	// exact are searched in the bytes as they are (and decoded);
	// folded in their ASCII lower-case copy.
	exact, folded [][]byte
	overlap       int
}

// New is the Matcher of key; "" matches nothing.
func New(key string) *Matcher {
	m := &Matcher{}
	if key == "" {
		return m
	}
	seen := map[string]bool{}
	add := func(list *[][]byte, s string) {
		if len(s) >= 8 && !seen[s] {
			seen[s] = true
			*list = append(*list, []byte(s))
		}
	}
	for _, r := range reports.Renderings(key) {
		add(&m.exact, r)
	}
	rev := []byte(key)
	slices.Reverse(rev)
	add(&m.exact, string(rev))
	// base64: with a prefix of 0, 1 or 2 bytes the key's bits start at a
	// different offset; keep the characters made of the key's bits only.
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for a := 0; a < 3; a++ {
			s := enc.EncodeToString(append(make([]byte, a), key...))
			from := (8*a + 5) / 6
			to := 8 * (a + len(key)) / 6
			if to-from >= 8 {
				add(&m.exact, s[from:to])
			}
		}
	}
	// Hex is searched case-folded, so any mix of cases is one needle.
	h := []byte(hex.EncodeToString([]byte(key)))
	add(&m.folded, string(h))
	add(&m.folded, hex.EncodeToString(rev))
	slices.Reverse(h)
	add(&m.folded, string(h))
	longest := 0
	for _, n := range append(slices.Clone(m.exact), m.folded...) {
		longest = max(longest, len(n))
	}
	// The carry holds the widest raw form of one occurrence of the
	// longest needle up to widestEscape bytes a byte, and room for an
	// escape cut at either end.
	m.overlap = widestEscape*longest + 32
	return m
}

// widestEscape is how many raw bytes one byte of a needle may take and
// still be found astride a stream window's edge: escaped as JSON twice,
// each level every byte a \u escape ("7" -> "\u0037" -> "\u005c\u0075
// \u0030\u0030\u0033\u0037", 36 bytes: a JSON document in a JSON
// string), then every byte URL-escaped (108). The decoders undo deeper
// JSON nesting (maxJSONDepth) in a window, but a form wider than this
// astride an edge may be missed, as a split key is (docs/threat-model.md).
const widestEscape = 6 * 6 * 3

// Overlap is how many bytes a stream search must carry from one window to
// the next so that no encoded occurrence is missed at a window's edge.
func (m *Matcher) Overlap() int { return m.overlap }

// Empty says the Matcher matches nothing (its key was "").
func (m *Matcher) Empty() bool { return len(m.exact) == 0 }

// Find reports whether b holds the key in one of the encodings, and which
// ("as is", "hex", "URL escapes, then as is", ...).
func (m *Matcher) Find(b []byte) (string, bool) {
	if m.Empty() {
		return "", false
	}
	var lower []byte
	return m.find(b, &lower, 0, false)
}

// find searches b, then b with one more layer of escapes undone. lower is
// a scratch buffer for the folded copy.
func (m *Matcher) find(b []byte, lower *[]byte, jsonDepth int, urlDone bool) (string, bool) {
	for _, n := range m.exact {
		if bytes.Contains(b, n) {
			return "as is", true
		}
	}
	*lower = foldASCII((*lower)[:0], b)
	for _, n := range m.folded {
		if bytes.Contains(*lower, n) {
			return "hex", true
		}
	}
	if !urlDone && bytes.IndexByte(b, '%') >= 0 {
		if d, changed := unURL(b); changed {
			if how, ok := m.find(d, lower, jsonDepth, true); ok {
				return "URL escapes, then " + how, true
			}
		}
	}
	if jsonDepth < maxJSONDepth && bytes.IndexByte(b, '\\') >= 0 {
		if d, changed := unJSON(b); changed {
			if how, ok := m.find(d, lower, jsonDepth+1, urlDone); ok {
				return "JSON escapes, then " + how, true
			}
		}
	}
	return "", false
}

func foldASCII(dst, b []byte) []byte {
	dst = slices.Grow(dst, len(b))
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// unURL undoes %XX escapes and '+'; anything malformed is kept as is.
func unURL(b []byte) ([]byte, bool) {
	out := make([]byte, 0, len(b))
	changed := false
	for i := 0; i < len(b); i++ {
		if b[i] == '%' && i+2 < len(b) {
			h, ok1 := unhex(b[i+1])
			l, ok2 := unhex(b[i+2])
			if ok1 && ok2 {
				out = append(out, h<<4|l)
				i += 2
				changed = true
				continue
			}
		}
		if b[i] == '+' {
			out = append(out, ' ')
			changed = true
			continue
		}
		out = append(out, b[i])
	}
	return out, changed
}

// unJSON undoes JSON string escapes wherever they are (no need for the
// bytes to be valid JSON); anything malformed is kept as is.
func unJSON(b []byte) ([]byte, bool) {
	out := make([]byte, 0, len(b))
	changed := false
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		switch e := b[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(b[i+2:])
			if !ok {
				out = append(out, b[i])
				continue
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if i+3 < len(b) && b[i+2] == '\\' && b[i+3] == 'u' {
					if lo, ok := hex4(b[i+4:]); ok {
						if d := utf16.DecodeRune(r, lo); d != utf8.RuneError {
							r = d
							i += 6
						}
					}
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			out = append(out, b[i])
			continue
		}
		i++
		changed = true
	}
	return out, changed
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		v, ok := unhex(c)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

// Stream searches a stream window by window, carrying Overlap bytes from
// one to the next, so it holds at most one window and the carry.
type Stream struct {
	m     *Matcher
	buf   []byte
	how   string
	found bool
}

// window is the bytes searched at once.
const window = 256 << 10

// NewStream starts a stream search for m's key.
func (m *Matcher) NewStream() *Stream { return &Stream{m: m} }

// Write adds p to the stream; it never fails.
func (s *Stream) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && !s.found {
		room := window + s.m.overlap - len(s.buf)
		k := min(room, len(p))
		s.buf = append(s.buf, p[:k]...)
		p = p[k:]
		if len(s.buf) >= window+s.m.overlap {
			s.search()
		}
	}
	return n, nil
}

func (s *Stream) search() {
	if s.how, s.found = s.m.Find(s.buf); s.found {
		s.buf = nil
		return
	}
	keep := min(len(s.buf), s.m.overlap)
	s.buf = append(s.buf[:0], s.buf[len(s.buf)-keep:]...)
}

// Found searches what is left and reports whether the key was seen
// anywhere in the stream, and in what encoding.
func (s *Stream) Found() (string, bool) {
	if !s.found && len(s.buf) > 0 {
		s.search()
	}
	return s.how, s.found
}

// Redacted replaces each occurrence of the key that Redact can place.
const Redacted = "[REDACTED]"

// RedactedWhole replaces a whole text that holds the key in an encoding
// whose place Redact cannot tell (below URL or JSON escapes).
const RedactedWhole = "[REDACTED: this text held the run's key]"

// Redact returns s with the key taken out in every encoding Find knows,
// and whether there was anything to take out. Each occurrence found as is
// (or in a rendering, reversed, base64) or as hex (any case) is replaced
// by Redacted; if the key is still found after that (it was below URL or
// JSON escapes), the whole text is replaced by RedactedWhole. What Redact
// returns never holds the key for Find.
func (m *Matcher) Redact(s string) (string, bool) {
	if _, found := m.Find([]byte(s)); !found {
		return s, false
	}
	b := []byte(s)
	for _, n := range m.exact {
		b = bytes.ReplaceAll(b, n, []byte(Redacted))
	}
	for _, n := range m.folded {
		b = replaceFolded(b, n)
	}
	if _, still := m.Find(b); still {
		return RedactedWhole, true
	}
	return string(b), true
}

// replaceFolded replaces every occurrence of the lower-case needle n in
// b, matched without regard to ASCII case, by Redacted.
func replaceFolded(b, n []byte) []byte {
	lower := foldASCII(nil, b)
	if !bytes.Contains(lower, n) {
		return b
	}
	var out []byte
	for {
		i := bytes.Index(lower, n)
		if i < 0 {
			return append(out, b...)
		}
		out = append(append(out, b[:i]...), Redacted...)
		b, lower = b[i+len(n):], lower[i+len(n):]
	}
}
