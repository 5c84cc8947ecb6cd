package reports

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html/template"
	"strings"
	"unicode/utf8"
)

// Printable returns s with every control character a terminal or a
// renderer could act on replaced by visible text, so text from the sandbox
// (a failure message, a link target) cannot clear a screen, move the
// cursor or rewrite what was printed before it:
//
//   - C0 controls (U+0000-U+001F) and DEL become their Control Pictures
//     (ESC -> "␛", BS -> "␈", NUL -> "␀", DEL -> "␡"), except "\n" and
//     "\t" when keep says so;
//   - C1 controls (U+0080-U+009F, which some terminals read as ESC + a
//     letter: U+009B is CSI) become the text `\u009b`;
//   - a byte that is not UTF-8 (a lone 0x9b is CSI to an 8-bit terminal)
//     becomes the text `\x9b`.
//
// Everything else, other scripts included, is kept. One helper serves the
// console, Markdown and JUnit; HTML escapes on its own and uses it too.
func Printable(s string, keepNewlines bool) string {
	if isPrintable(s, keepNewlines) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case (r == '\n' || r == '\t') && keepNewlines:
			b.WriteRune(r)
		case r < 0x20:
			b.WriteRune(0x2400 + r)
		case r == 0x7f:
			b.WriteRune('␡')
		case r >= 0x80 && r <= 0x9f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func isPrintable(s string, keepNewlines bool) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			if c < 0x20 && !(keepNewlines && (c == '\n' || c == '\t')) || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || r <= 0x9f {
			return false
		}
		i += n
	}
	return true
}

// PrintableWriter wraps w so every write is made Printable (newlines and
// tabs kept): the console's progress lines pass through it. Each Write
// must hold whole lines (a multi-byte character split across two writes
// is shown as its bytes).
type PrintableWriter struct {
	W interface{ Write([]byte) (int, error) }
}

func (p PrintableWriter) Write(b []byte) (int, error) {
	if _, err := p.W.Write([]byte(Printable(string(b), true))); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Renderings returns s as each renderer writes it: as is, Markdown text
// and code, HTML (html/template's escaping), XML, JSON (with HTML-safe
// escapes) and Printable. The canary search looks for all of them.
func Renderings(s string) []string {
	out := []string{s, mdText(s), strings.TrimSuffix(strings.TrimPrefix(mdCode(s), "`"), "`"),
		template.HTMLEscapeString(s), Printable(s, false)}
	var x strings.Builder
	xml.EscapeText(&x, []byte(s))
	out = append(out, x.String())
	if b, err := json.Marshal(s); err == nil {
		out = append(out, string(b[1:len(b)-1]))
	}
	return out
}
