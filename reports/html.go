package reports

import (
	_ "embed"
	"fmt"
	"html"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

//go:embed report.html.tmpl
var htmlSource string

var htmlTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"short":   ShortStatus,
	"seconds": FormatSeconds,
	"rc": func(p *int) string {
		if p == nil {
			return "null"
		}
		return strconv.Itoa(*p)
	},
	"str": func(p *string) string {
		if p == nil {
			return "null"
		}
		return strconv.Quote(*p)
	},
	"time":      fmtTime,
	"span":      fmtSpan,
	"yesno":     yesNo,
	"num":       func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"python":    pythonSummary,
	"steps":     ModelStepsSummary,
	"stepLines": stepLines,
	"runtime":   RuntimeSummary,
	"gaps":      gapsSummary,
}).Parse(htmlSource))

// The view adds what only the HTML needs (timeline geometry) to the same
// tree the other formats render.
type htmlView struct {
	*Report
	Runs []htmlRun
}

type htmlRun struct {
	*Run
	Cases []htmlCase
}

type htmlCase struct {
	*Case
	Timeline *timeline
	Open     bool // expanded on load: everything not plainly passed
}

// timeline is a case's stages drawn to scale: bar widths are proportional
// to seconds, positions to start times.
type timeline struct {
	Width, Height float64
	ChartX        float64 // where the time axis starts
	AxisY         float64 // where the bars end and tick labels begin
	Total         float64 // seconds covered by the axis
	Bars          []timelineBar
	Ticks         []timelineTick
}

type timelineBar struct {
	Name       string
	X, Y, W, H float64
	TextY      float64
	Label      string
	LabelX     float64
}

type timelineTick struct {
	X     float64
	Label string
}

const (
	tlLabelWidth = 90.0
	tlChartWidth = 520.0
	tlRow        = 20.0
	tlAxis       = 22.0
)

// newTimeline lays out the stages; nil when there are none. A stage without
// a start time is placed right after the one before it.
func newTimeline(stages []Stage) *timeline {
	if len(stages) == 0 {
		return nil
	}
	var t0 time.Time
	for _, s := range stages {
		if !s.StartedAt.IsZero() && (t0.IsZero() || s.StartedAt.Before(t0)) {
			t0 = s.StartedAt
		}
	}
	starts := make([]float64, len(stages))
	end, total := 0.0, 0.0
	for i, s := range stages {
		at := end
		if !s.StartedAt.IsZero() {
			at = s.StartedAt.Sub(t0).Seconds()
		}
		starts[i] = at
		end = at + s.Seconds
		total = math.Max(total, end)
	}
	if total <= 0 {
		total = 1
	}
	scale := tlChartWidth / total
	tl := &timeline{
		Width:  tlLabelWidth + tlChartWidth + 70,
		Height: float64(len(stages))*tlRow + tlAxis,
		ChartX: tlLabelWidth,
		AxisY:  float64(len(stages)) * tlRow,
		Total:  total,
	}
	for i, s := range stages {
		x := tlLabelWidth + starts[i]*scale
		// A sub-pixel stage still gets a visible sliver.
		w := math.Max(s.Seconds*scale, 1)
		y := float64(i) * tlRow
		tl.Bars = append(tl.Bars, timelineBar{
			Name: s.Name, X: round1(x), Y: y + 3, W: round1(w), H: tlRow - 6, TextY: y + 14,
			Label: FormatSeconds(s.Seconds), LabelX: round1(x + w + 4),
		})
	}
	step := tickStep(total)
	for v := 0.0; v <= total+step/1000; v += step {
		tl.Ticks = append(tl.Ticks, timelineTick{X: round1(tlLabelWidth + v*scale), Label: strconv.FormatFloat(v, 'f', -1, 64) + " s"})
	}
	return tl
}

// tickStep picks 1, 2 or 5 times a power of ten so the axis has at most six
// ticks.
func tickStep(total float64) float64 {
	raw := total / 5
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= raw {
			return m * pow
		}
	}
	return 10 * pow
}

// SVG draws the timeline. It is built here rather than in the template
// because a few dozen numeric attributes per case made html/template the
// bulk of the page's rendering time; everything textual is escaped, and the
// stage names are from the fixed set Validate allows.
func (tl *timeline) SVG() template.HTML {
	var b strings.Builder
	n := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	esc := html.EscapeString
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" role="img" aria-label="timeline of the stages">`+"\n",
		n(tl.Width), n(tl.Height), n(tl.Width), n(tl.Height))
	for _, t := range tl.Ticks {
		fmt.Fprintf(&b, `<line class="axis" x1="%s" y1="0" x2="%s" y2="%s"/><text x="%s" y="%s" dy="-6" text-anchor="middle">%s</text>`,
			n(t.X), n(t.X), n(tl.AxisY), n(t.X), n(tl.Height), esc(t.Label))
	}
	b.WriteString("\n")
	for _, r := range tl.Bars {
		name := esc(r.Name)
		fmt.Fprintf(&b, `<text x="4" y="%s">%s</text><rect class="bar-%s" x="%s" y="%s" width="%s" height="%s" rx="2"><title>%s: %s</title></rect><text x="%s" y="%s">%s</text>`+"\n",
			n(r.TextY), name, name, n(r.X), n(r.Y), n(r.W), n(r.H), name, esc(r.Label), n(r.LabelX), n(r.TextY), esc(r.Label))
	}
	b.WriteString("</svg>")
	return template.HTML(b.String())
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// WriteHTML renders rep as one self-contained HTML page: inline CSS and SVG,
// no scripts, fonts or other fetches, so it can be archived and opened
// offline.
func WriteHTML(w io.Writer, rep *Report) error {
	v := htmlView{Report: rep}
	for _, r := range rep.Runs {
		hr := htmlRun{Run: r}
		for _, c := range r.Cases {
			hr.Cases = append(hr.Cases, htmlCase{
				Case:     c,
				Timeline: newTimeline(c.Evidence.Stages),
				Open:     c.Status != StatusPassed || len(c.Reasons) > 0,
			})
		}
		v.Runs = append(v.Runs, hr)
	}
	// html/template escapes markup but passes control characters: the
	// page is made Printable whole (markup needs none of them).
	var buf strings.Builder
	if err := htmlTemplate.Execute(&buf, v); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	if _, err := io.WriteString(w, Printable(buf.String(), true)); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	return nil
}
