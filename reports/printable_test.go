package reports

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// hostileText is what a sandbox can put in a failure message: ESC c
// (reset the terminal), a CSI through ESC [, the one-byte C1 CSI (0x9b,
// not UTF-8), U+009B as UTF-8, backspaces over text, a bell, CR, DEL.
const hostileText = "boom\x1bc\x1b[2J\x9b31m\u009b1mred\x08\x08\x08ok\a\rover\x7f\tend\nnext ünï"

func TestPrintable(t *testing.T) {
	got := Printable(hostileText, true)
	want := "boom␛c␛[2J\\x9b31m\\u009b1mred␈␈␈ok␇␍over␡\tend\nnext ünï"
	if got != want {
		t.Errorf("Printable(keep) =\n%q\nwant\n%q", got, want)
	}
	if got := Printable("a\tb\nc", false); got != "a␉b␊c" {
		t.Errorf("Printable(no keep) = %q", got)
	}
	if s := "plain ascii, ünïcödé, 日本"; Printable(s, false) != s {
		t.Errorf("printable text changed: %q", Printable(s, false))
	}
	assertClean(t, "Printable", []byte(got), true)
}

// assertClean fails on any byte a terminal could act on.
func assertClean(t *testing.T, what string, b []byte, keepNewlines bool) {
	t.Helper()
	if !utf8.Valid(b) {
		t.Errorf("%s: not UTF-8", what)
	}
	for _, r := range string(b) {
		if r < 0x20 && !(keepNewlines && (r == '\n' || r == '\t')) || r == 0x7f || r >= 0x80 && r <= 0x9f {
			t.Errorf("%s: control character %U in output", what, r)
			return
		}
	}
}

// Escape sequences in a failure message reach no renderer raw.
func TestRenderersShowControlsVisibly(t *testing.T) {
	e := okEvidence("r", "c", "debian", "pi")
	e.Checks[0].Status = StatusFailed
	e.Checks[0].Detail = hostileText
	e.Status, e.Passed = StatusFailed, false
	rep := build(t, e)
	// Positive control: the record really carries the raw bytes.
	if !strings.Contains(rep.Runs[0].Cases[0].Evidence.Checks[0].Detail, "\x1bc") {
		t.Fatal("positive control: the hostile detail did not reach the report tree")
	}
	for _, r := range []struct {
		name  string
		write func(*bytes.Buffer) error
	}{
		{"markdown", func(b *bytes.Buffer) error { return WriteMarkdown(b, rep) }},
		{"junit", func(b *bytes.Buffer) error { return WriteJUnit(b, rep) }},
		{"html", func(b *bytes.Buffer) error { return WriteHTML(b, rep) }},
	} {
		var b bytes.Buffer
		if err := r.write(&b); err != nil {
			t.Fatal(err)
		}
		assertClean(t, r.name, b.Bytes(), true)
		if !strings.Contains(b.String(), "␛c") {
			t.Errorf("%s: the escape is not shown visibly", r.name)
		}
	}
	var con bytes.Buffer
	PrintableWriter{W: &con}.Write([]byte(hostileText + "\n"))
	assertClean(t, "console", con.Bytes(), true)
}

func TestTailBounds(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	got := Tail([]byte(b.String() + "\x1b[31mred\r\n\n"))
	if len(got) != TailLines || got[0] != "line 12" || got[TailLines-1] != "␛[31mred" {
		t.Errorf("tail of 31 lines: %q", got)
	}
	long := strings.Repeat("é", 3*TailBytes) + "END"
	got = Tail([]byte("first\n" + long))
	if len(got) != 1 || len(got[0]) > TailBytes || !strings.HasSuffix(got[0], "END") || !strings.HasPrefix(got[0], "…") || !utf8.ValidString(got[0]) {
		t.Errorf("tail of a long line: %d line(s), %d bytes", len(got), len(got[0]))
	}
	if got := Tail([]byte("\n \n")); got != nil {
		t.Errorf("blank output: %q, want nil", got)
	}
}
