package reports

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// node helpers over the parsed page.
func walk(n *html.Node, fn func(*html.Node)) {
	fn(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, fn)
	}
}

func attr(n *html.Node, name string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val, true
		}
	}
	return "", false
}

func hasClass(n *html.Node, class string) bool {
	v, _ := attr(n, "class")
	return strings.Contains(" "+v+" ", " "+class+" ")
}

func text(n *html.Node) string {
	var b strings.Builder
	walk(n, func(c *html.Node) {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	})
	return b.String()
}

// pageOf renders the smoke evidence (one failed and one skipped case among
// passed ones) plus a case with stages of sub-second lengths, and parses it.
func pageOf(t *testing.T) (*html.Node, string) {
	t.Helper()
	rep := mustReport(t, "testdata/smoke.jsonl")
	var buf bytes.Buffer
	if err := WriteHTML(&buf, rep); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return doc, buf.String()
}

// TestHTMLReadingOrder: failures first and open, skips collapsed and last,
// the provenance after the cases, a run chart with a row per case.
func TestHTMLReadingOrder(t *testing.T) {
	doc, _ := pageOf(t)
	type seen struct {
		kind, status string
		open         bool
	}
	var order []seen
	walk(doc, func(n *html.Node) {
		switch {
		case n.Type == html.ElementNode && n.Data == "details" && hasClass(n, "case"):
			_, open := attr(n, "open")
			status := ""
			walk(n, func(c *html.Node) {
				if status == "" && c.Type == html.ElementNode && c.Data == "span" && hasClass(c, "badge") {
					status = text(c)
				}
			})
			order = append(order, seen{"case", status, open})
		case n.Type == html.ElementNode && n.Data == "h3":
			order = append(order, seen{kind: "h3:" + text(n)})
		}
	})
	var got []string
	for _, s := range order {
		if s.kind == "case" {
			o := ""
			if s.open {
				o = " open"
			}
			got = append(got, s.status+o)
		} else {
			got = append(got, s.kind)
		}
	}
	// smoke.jsonl: debian x kilo fails, alpine x codex is skipped, the
	// rest (8) pass.
	want := "h3:Time per case | h3:Cases | fail open | pass | pass | pass | pass | pass | pass | pass | pass | skip | h3:Provenance"
	if g := strings.Join(got, " | "); g != want {
		t.Errorf("page order:\n got %s\nwant %s", g, want)
	}
}

// TestHTMLRunChart: one harness/overhead row per case, linked to it, tick
// labels with no float noise, and a teardown bar that is not an alarm red.
func TestHTMLRunChart(t *testing.T) {
	doc, page := pageOf(t)
	var chart *html.Node
	walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "svg" && hasClass(n, "run-chart") {
			chart = n
		}
	})
	if chart == nil {
		t.Fatal("no run chart")
	}
	overhead, links := 0, 0
	var labels []string
	walk(chart, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		switch {
		case n.Data == "rect" && hasClass(n, "bar-overhead"):
			overhead++
		case n.Data == "a":
			if h, _ := attr(n, "href"); strings.HasPrefix(h, "#r1-c") {
				links++
			}
		case n.Data == "text":
			if a, _ := attr(n, "text-anchor"); a == "middle" {
				labels = append(labels, text(n))
			}
		}
	})
	if overhead != 10 || links != 10 {
		t.Errorf("run chart: %d overhead bars, %d case links; want 10 each", overhead, links)
	}
	tick := regexp.MustCompile(`^\d+(\.\d{1,3})? s$`)
	if len(labels) < 2 {
		t.Errorf("run chart ticks %q", labels)
	}
	for _, l := range labels {
		if !tick.MatchString(l) {
			t.Errorf("tick label %q is not a readable number", l)
		}
	}
	if m := regexp.MustCompile(`svg \.bar-teardown\{fill:(#[0-9a-f]+)\}`).FindStringSubmatch(page); m == nil || m[1] == "#cf222e" || m[1] == "#a40e26" {
		t.Errorf("teardown bar colour %v: want a neutral one", m)
	}
}

// Ticks of a sub-second timeline are written with the step's decimals.
func TestTicksReadable(t *testing.T) {
	// 0.9 s steps by 0.2: summing the steps would give 0.6000000000000001.
	for _, tc := range []struct {
		total float64
		i     int
		want  string
	}{{0.9, 3, "0.6 s"}, {0.12, 1, "0.05 s"}, {120, 1, "50 s"}, {3, 3, "3 s"}} {
		total := tc.total
		ts := ticks(total, 1, 0)
		if len(ts) <= tc.i || ts[tc.i].Label != tc.want {
			t.Errorf("ticks(%v): %+v, want label %d %q", total, ts, tc.i, tc.want)
		}
		for _, tk := range ts {
			if strings.Contains(tk.Label, "00000") {
				t.Errorf("ticks(%v): label %q", total, tk.Label)
			}
		}
	}
}

// TestHTMLCauses: a failed case shows its decisive lines and its files.
func TestHTMLCauses(t *testing.T) {
	e := okEvidence("r", "c", "alpine-class", "opencode")
	e.Status, e.Passed = StatusFailed, false
	e.Checks = append(e.Checks, Check{ID: "activation.result", Status: StatusFailed, Clause: "§7.2 seed and activation", Detail: "response_status failed"})
	e.HarnessStderrTail = []string{"version `GLIBC_2.34' not found <b>"}
	e.CaseDir = "cases/alpine-class__opencode"
	e.StartedAt = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var buf bytes.Buffer
	if err := WriteHTML(&buf, build(t, e)); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var pre, link string
	walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "pre" && hasClass(n, "causes") {
			pre = text(n)
		}
		if n.Type == html.ElementNode && n.Data == "a" {
			if h, _ := attr(n, "href"); h == "cases/alpine-class__opencode/" {
				link = h
			}
		}
	})
	for _, want := range []string{"check activation.result failed (§7.2 seed and activation): response_status failed", "version `GLIBC_2.34' not found <b>"} {
		if !strings.Contains(pre, want) {
			t.Errorf("causes %q lack %q", pre, want)
		}
	}
	if link == "" {
		t.Error("no link to the case's files")
	}
}
