package reports

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
)

// The page's verdicts read at a glance as the matrix grows (issue 38):
// with ten harnesses on three images through six scenarios, every verdict
// is in the grid, the harnesses with a failure lead, and the page does
// not scroll sideways at a laptop's width, measured by a real browser.

var (
	wideHarnesses = []string{"claude-code", "codex", "pi", "opencode", "kilo", "openclaw", "hermes", "mini-swe-agent", "gemini", "qwen-code"}
	wideImages    = []string{"debian-12", "old-python", "alpine-class"}
	wideScenarios = []string{"challenge", "timeout", "cancel", "model-429", "model-400", "borrowed"}
)

// wideRun writes a 10 x 3 x 6 run, made from the scenario fixture's first
// record, to a file in dir: every case passed but kilo on old-python
// through model-400 (failed) and gemini's borrowed (skipped).
func wideRun(t *testing.T, dir string) string {
	t.Helper()
	f, err := os.Open("testdata/scenarios.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	if !sc.Scan() {
		t.Fatal("testdata/scenarios.jsonl is empty")
	}
	first := sc.Bytes()
	var out bytes.Buffer
	for _, h := range wideHarnesses {
		for _, img := range wideImages {
			for _, s := range wideScenarios {
				var rec map[string]any
				if err := json.Unmarshal(first, &rec); err != nil {
					t.Fatal(err)
				}
				rec["run_id"], rec["harness"], rec["image"] = "wide", h, img
				rec["case_id"] = img + "/" + h + "/" + s
				if s != "challenge" {
					rec["scenario"] = s
				} else {
					rec["case_id"] = img + "/" + h
				}
				switch {
				case h == "kilo" && img == "old-python" && s == "model-400":
					rec["status"], rec["passed"] = "failed", false
				case h == "gemini" && s == "borrowed":
					rec["status"], rec["passed"], rec["skip_reason"] = "skipped", false, "scenario borrowed unsupported by the manifest"
				}
				b, err := json.Marshal(rec)
				if err != nil {
					t.Fatal(err)
				}
				out.Write(append(b, '\n'))
			}
		}
	}
	p := filepath.Join(dir, "wide.jsonl")
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func wideHTML(t *testing.T, dir string) []byte {
	t.Helper()
	rep := mustReport(t, wideRun(t, dir))
	var b bytes.Buffer
	if err := WriteHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestHTMLGridHoldsEveryVerdict: a row per harness x image, a column per
// scenario, every case linked once, the failing harness's group first.
func TestHTMLGridHoldsEveryVerdict(t *testing.T) {
	page := wideHTML(t, t.TempDir())
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var table *html.Node
	walk(doc, func(n *html.Node) {
		if table == nil && n.Type == html.ElementNode && n.Data == "table" && hasClass(n, "matrix") {
			table = n
		}
	})
	if table == nil {
		t.Fatal("no matrix table")
	}
	var groups []string
	links, rows, cols := map[string]int{}, 0, 0
	walk(table, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		switch {
		case n.Data == "th" && hasAttr(n, "scope", "rowgroup"):
			groups = append(groups, text(n))
		case n.Data == "th" && hasAttr(n, "scope", "row"):
			rows++
		case n.Data == "th" && hasAttr(n, "scope", "col"):
			cols++
		case n.Data == "a":
			href, _ := attr(n, "href")
			links[href]++
		}
	})
	if want := len(wideHarnesses) * len(wideImages); rows != want {
		t.Errorf("%d harness x image rows, want %d", rows, want)
	}
	if want := 2 + len(wideScenarios); cols != want {
		t.Errorf("%d columns, want %d (harness, image, one per scenario)", cols, want)
	}
	if want := len(wideHarnesses) * len(wideImages) * len(wideScenarios); len(links) != want {
		t.Errorf("%d cases linked from the grid, want %d", len(links), want)
	}
	for href, n := range links {
		if n != 1 {
			t.Errorf("%s linked %d times from the grid", href, n)
		}
	}
	want := append([]string{"kilo"}, wideHarnesses...)
	want = append(want[:5], want[6:]...) // kilo first, the rest in evidence order
	if strings.Join(groups, " ") != strings.Join(want, " ") {
		t.Errorf("harness groups in order\n %q\nwant\n %q (the failing one first)", groups, want)
	}
}

func hasAttr(n *html.Node, name, value string) bool {
	v, ok := attr(n, name)
	return ok && v == value
}

// laptopWidth is the viewport the page must fit: a common laptop's.
const laptopWidth = 1366

// fitsRe reads what the measuring script left in the DOM.
var fitsRe = regexp.MustCompile(`data-fits="(true|false)" data-scroll-width="(\d+)"`)

// TestHTMLFitsALaptopInABrowser loads the ten-harness page in headless
// Chromium at laptopWidth and reads the document's scroll width there: no
// sideways scrolling. A page made wider on purpose must be seen not to
// fit (positive control), so a browser that measured nothing would fail.
// With SANDPROOF_REPORT_SHOT=DIR it also leaves DIR/wide.png, the page as
// the browser drew it.
func TestHTMLFitsALaptopInABrowser(t *testing.T) {
	// -short skips the browser, except in strict mode (make test), where
	// every check must run.
	if testing.Short() && !testenv.Strict() {
		t.Skip("starts a browser")
	}
	browser, err := exec.LookPath("chromium")
	if err != nil {
		testenv.Package(t, "chromium", "chromium")
	}
	dir := t.TempDir()
	page := wideHTML(t, dir)
	measure := func(name string, extra string) (bool, string) {
		const probe = `<script>document.body.setAttribute("data-fits", String(document.documentElement.scrollWidth <= window.innerWidth));` +
			`document.body.setAttribute("data-scroll-width", String(document.documentElement.scrollWidth))</script>`
		doc := bytes.Replace(page, []byte("</body>"), []byte(extra+probe+"</body>"), 1)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, doc, 0o644); err != nil {
			t.Fatal(err)
		}
		out := chromium(t, browser, dir, "--dump-dom", "file://"+p)
		m := fitsRe.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%s: the browser's DOM holds no measurement:\n%.2000s", name, out)
		}
		return m[1] == "true", m[2]
	}
	if fits, w := measure("control.html", `<div style="width:3000px">wide</div>`); fits {
		t.Fatalf("a page with a 3,000 px element fits %d px (scroll width %s): the measurement measures nothing", laptopWidth, w)
	}
	if fits, w := measure("wide.html", ""); !fits {
		t.Errorf("the ten-harness report scrolls sideways at %d px: scroll width %s", laptopWidth, w)
	}
	if shots := os.Getenv("SANDPROOF_REPORT_SHOT"); shots != "" {
		chromium(t, browser, dir, "--screenshot="+filepath.Join(shots, "wide.png"), "file://"+filepath.Join(dir, "wide.html"))
	}
}

// chromium runs the headless browser at laptopWidth with args and returns
// its standard output; its profile is a dir of the test's.
func chromium(t *testing.T, browser, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	argv := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
		"--user-data-dir=" + filepath.Join(dir, "profile"), fmt.Sprintf("--window-size=%d,900", laptopWidth)}, args...)
	cmd := exec.CommandContext(ctx, browser, argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%.2000s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}
