package reports

import (
	"bytes"
	"strings"
	"testing"
)

// The renderers' escaping of harness text, one rule at a time (the
// host-path mutants, docs/mutation.md): each input holds one thing a
// renderer must not pass on raw, alone, so no other escape hides it.

// Printable's fast path passes a string on only when it holds nothing to
// escape: DEL alone, one C1 control alone (U+009B is CSI to a terminal),
// the last C1 control, U+009F. The positive control: printable text
// around them comes back as it was.
func TestPrintableAloneControls(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"over\x7f", "over␡"},
		{"a\u009bb", `a\u009bb`},
		{"a\u0080b", `a\u0080b`},
		{"a\u009fb", `a\u009fb`},
		{"a\u00a0b", "a\u00a0b"}, // the first character past C1: kept
		{"ünï 日本", "ünï 日本"},
	} {
		if got := Printable(tc.in, false); got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Markdown: harness text in a table cell or a code span never ends the
// row (a newline) or splits the cell (a pipe), and a fenced block's fence
// is longer than any run of backticks in the text it holds.
func TestMarkdownCellsAndFencesHoldHarnessText(t *testing.T) {
	for _, s := range []string{"one\ntwo", "one\r\ntwo", "a|b"} {
		if got := mdText(s); strings.ContainsAny(got, "\r\n") || strings.Contains(strings.ReplaceAll(got, `\|`, ""), "|") {
			t.Errorf("mdText(%q) = %q: a newline or a bare pipe", s, got)
		}
		if got := mdCode(s); strings.ContainsAny(got, "\r\n") || strings.Contains(strings.ReplaceAll(got, `\|`, ""), "|") {
			t.Errorf("mdCode(%q) = %q: a newline or a bare pipe", s, got)
		}
	}
	if got := mdText("plain"); got != "plain" {
		t.Errorf("positive control: mdText(plain) = %q", got)
	}
	lines := []string{"before", "````", "`````x", "after"}
	out := strings.Split(strings.TrimSuffix(mdFence(lines, "  "), "\n"), "\n")
	fence, ok := strings.CutSuffix(strings.TrimSpace(out[0]), "text")
	if !ok || strings.Trim(fence, "`") != "" || len(out) != len(lines)+2 || strings.TrimSpace(out[len(out)-1]) != fence {
		t.Fatalf("positive control: fenced block %q", out)
	}
	for _, l := range out[1 : len(out)-1] {
		if strings.HasPrefix(strings.TrimSpace(l), fence) {
			t.Errorf("line %q inside the block closes its fence %q", l, fence)
		}
	}
}

// Every harness text a record carries reaches JUnit, Markdown and HTML
// only Printable, shown visibly: the harness's output tails as well as a
// check's detail (TestRenderersShowControlsVisibly).
func TestRenderersShowHarnessTailsVisibly(t *testing.T) {
	e := okEvidence("r", "c", "debian", "pi")
	e.Checks[0].Status = StatusFailed
	e.Status, e.Passed = StatusFailed, false
	e.HarnessStdoutTail = []string{"out\x1b]0;title\x07", "more\x1bc"}
	e.HarnessStderrTail = []string{"err\x1b[2J"}
	rep := build(t, e)
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
		// Positive control: the tails reach the renderer.
		if !strings.Contains(b.String(), "more") {
			t.Errorf("%s: the stdout tail is not in the output", r.name)
			continue
		}
		assertClean(t, r.name, b.Bytes(), true)
		// Shown, not dropped: XML's encoder alone would turn the escape
		// into U+FFFD.
		if !strings.Contains(b.String(), "more␛c") || strings.ContainsRune(b.String(), '\uFFFD') {
			t.Errorf("%s: the stdout tail's escape is not shown visibly", r.name)
		}
	}
}
