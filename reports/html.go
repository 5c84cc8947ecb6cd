package reports

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"io"
	"math"
	"slices"
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
	"netflag":   func() string { return NetworkFlag },
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
	// Grid is the run's verdicts as the page lays them out.
	Grid verdictGrid
	// Cases are in the order a reader needs them: failed, unknown,
	// passed, skipped (each in evidence order).
	Cases []htmlCase
	Chart *runChart
}

type htmlCase struct {
	*Case
	Timeline *timeline
	// Open: expanded on load, a case that failed or is unknown (a
	// skipped case stays collapsed, so it cannot push a failure down).
	Open bool
	// Causes are the decisive lines of a case that did not pass.
	Causes []string
}

// htmlOrder ranks statuses for the page: what needs reading first.
func htmlOrder(s Status) int {
	switch s {
	case StatusFailed:
		return 0
	case StatusUnknown:
		return 1
	case StatusPassed:
		return 2
	}
	return 3
}

// HarnessSeconds is the time the harness itself ran: the activation
// receipt's ended_at - started_at, else the activation stage; 0 when the
// case never got there.
func HarnessSeconds(e *Evidence) float64 {
	if r := e.ActivationReceipt; r != nil {
		var a, b string
		if json.Unmarshal(r.Extra["started_at"], &a) == nil && json.Unmarshal(r.Extra["ended_at"], &b) == nil {
			ta, err1 := time.Parse(time.RFC3339Nano, a)
			tb, err2 := time.Parse(time.RFC3339Nano, b)
			if err1 == nil && err2 == nil && !tb.Before(ta) {
				return math.Min(tb.Sub(ta).Seconds(), e.Seconds)
			}
		}
	}
	for _, s := range e.Stages {
		if s.Name == StageActivation {
			return math.Min(s.Seconds, e.Seconds)
		}
	}
	return 0
}

// runChart is the whole run at a glance: per case, the harness's own time
// and what sandproof added around it (setup, seed, close, verify,
// teardown), to one scale.
type runChart struct {
	Width, Height float64
	Rows          []chartRow
	Ticks         []timelineTick
	AxisY         float64
}

type chartRow struct {
	Name, Anchor, Status string
	Y, TextY             float64
	HarnessW, OverheadX  float64
	OverheadW            float64
	Label                string
	LabelX               float64
}

const chartLabelWidth = 230.0

func newRunChart(cases []htmlCase) *runChart {
	if len(cases) == 0 {
		return nil
	}
	total := 0.0
	for _, c := range cases {
		total = math.Max(total, c.Evidence.Seconds)
	}
	if total <= 0 {
		total = 1
	}
	scale := tlChartWidth / total
	// The right margin holds the longest row label ("harness 1234 s,
	// sandproof 1234 s") past the longest bar.
	ch := &runChart{Width: chartLabelWidth + tlChartWidth + 230, AxisY: float64(len(cases)) * tlRow}
	ch.Height = ch.AxisY + tlAxis
	for i, c := range cases {
		e := c.Evidence
		h := HarnessSeconds(e)
		o := math.Max(e.Seconds-h, 0)
		y := float64(i) * tlRow
		hw, ow := round1(h*scale), round1(o*scale)
		ch.Rows = append(ch.Rows, chartRow{
			Name: c.Name, Anchor: c.Anchor, Status: string(c.Status), Y: y + 3, TextY: y + 14,
			HarnessW: hw, OverheadX: round1(chartLabelWidth + hw), OverheadW: math.Max(ow, 1),
			Label:  fmt.Sprintf("harness %s, sandproof %s", FormatSeconds(h), FormatSeconds(o)),
			LabelX: round1(chartLabelWidth + hw + math.Max(ow, 1) + 4),
		})
	}
	ch.Ticks = ticks(total, scale, chartLabelWidth)
	return ch
}

// SVG draws the run chart; text is escaped as in the timeline.
func (ch *runChart) SVG() template.HTML {
	var b strings.Builder
	n, esc := svgNum, html.EscapeString
	svgOpen(&b, `class="run-chart" `, "per case: harness time and sandproof overhead", ch.Width, ch.Height, ch.AxisY, ch.Ticks)
	for _, r := range ch.Rows {
		fmt.Fprintf(&b, `<a href="#%s"><text class="%s" x="4" y="%s">%s</text></a>`, esc(r.Anchor), esc(r.Status), n(r.TextY), esc(r.Name))
		if r.HarnessW > 0 {
			fmt.Fprintf(&b, `<rect class="bar-harness" x="%s" y="%s" width="%s" height="%s" rx="2"><title>%s</title></rect>`,
				n(chartLabelWidth), n(r.Y), n(r.HarnessW), n(tlRow-6), esc(r.Label))
		}
		fmt.Fprintf(&b, `<rect class="bar-overhead" x="%s" y="%s" width="%s" height="%s" rx="2"><title>%s</title></rect><text x="%s" y="%s">%s</text>`+"\n",
			n(r.OverheadX), n(r.Y), n(r.OverheadW), n(tlRow-6), esc(r.Label), n(r.LabelX), n(r.TextY), esc(r.Label))
	}
	b.WriteString("</svg>")
	return template.HTML(b.String())
}

// ticks are the axis marks of a chart of total seconds, at most six, each
// label written with only the decimals its step needs ("0.6 s", never
// "0.6000000000000001 s").
func ticks(total, scale, x0 float64) []timelineTick {
	step := tickStep(total)
	prec := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	var out []timelineTick
	for i := 0; float64(i)*step <= total+step/1000; i++ {
		v := float64(i) * step
		out = append(out, timelineTick{X: round1(x0 + v*scale), Label: strconv.FormatFloat(v, 'f', prec, 64) + " s"})
	}
	return out
}

// timeline is a case's stages drawn to scale: bar widths are proportional
// to seconds, positions to start times. Marks are the moments the stop came
// from outside the harness: where the launch deadline fell and, in a
// scenario other than challenge, where the owner's close began.
type timeline struct {
	Width, Height float64
	ChartX        float64 // where the time axis starts
	AxisY         float64 // where the bars end and tick labels begin
	Total         float64 // seconds covered by the axis
	Bars          []timelineBar
	Ticks         []timelineTick
	Marks         []timelineMark
}

// timelineMark is a vertical line across the bars at X, named below the
// axis on a row of its own.
type timelineMark struct {
	X      float64
	Label  string
	Detail string
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
	tlMarkRow    = 14.0 // below the axis: the marks' names
)

// newTimeline lays out e's stages; nil when there are none. A stage
// without a start time is placed right after the one before it.
func newTimeline(e *Evidence) *timeline {
	stages := e.Stages
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
	tl.Ticks = ticks(total, scale, tlLabelWidth)
	if !t0.IsZero() {
		for _, m := range stopMarks(e) {
			at := m.at.Sub(t0).Seconds()
			if at < 0 || at > total {
				continue // outside the case's stages: nothing to point at
			}
			tl.Marks = append(tl.Marks, timelineMark{X: round1(tlLabelWidth + at*scale), Label: m.label, Detail: m.detail})
		}
	}
	// Each mark is named on a row of its own, so a deadline and a close
	// a moment apart do not write over each other.
	tl.Height += tlMarkRow * float64(len(tl.Marks))
	return tl
}

// stopMark is a moment the stop came from outside the harness.
type stopMark struct {
	at            time.Time
	label, detail string
}

// stopMarks are the moments a case's timeline marks: the launch deadline
// (the activation receipt's started_at, else the activation stage's start,
// plus launch_deadline_seconds; without that field, where a timed-out
// receipt's stop began) and, for a scenario other than challenge
// (whose close comes after the harness is done, as its bar shows), the
// start of the close stage.
func stopMarks(e *Evidence) []stopMark {
	var out []stopMark
	if d := e.LaunchDeadlineSeconds; d > 0 {
		start, from := launchStart(e)
		label := fmt.Sprintf("launch deadline %s after %s", FormatSeconds(d), from)
		if in, ok := e.ActivationReceipt.DeadlineSeconds(); ok && in < d {
			d, label = in, fmt.Sprintf("deadline brought forward to %s after %s (the launch's ceiling %s)", FormatSeconds(in), from, FormatSeconds(e.LaunchDeadlineSeconds))
		}
		if !start.IsZero() {
			out = append(out, stopMark{start.Add(time.Duration(d * float64(time.Second))), "deadline", label})
		}
	} else if at, ok := deadlineStop(e.ActivationReceipt); ok {
		out = append(out, stopMark{at, "deadline", "the deadline's stop began (the receipt's ended_at - stop_seconds)"})
	}
	if e.ScenarioName() != ScenarioChallenge {
		for _, s := range e.Stages {
			if s.Name == StageClose && !s.StartedAt.IsZero() {
				out = append(out, stopMark{s.StartedAt, "close", "the owner's close began (" + e.ScenarioName() + ")"})
				break
			}
		}
	}
	return out
}

// deadlineStop is when the stop of a launch that timed out began, read
// from its receipt (ended_at - stop_seconds, within the reap of the
// harness's status after it), for a record without
// launch_deadline_seconds; false when the receipt is not a deadline's or
// lacks the times.
func deadlineStop(r *Receipt) (time.Time, bool) {
	if r == nil || !r.TimedOut {
		return time.Time{}, false
	}
	var ended string
	var stop float64
	if json.Unmarshal(r.Extra["ended_at"], &ended) != nil || json.Unmarshal(r.Extra["stop_seconds"], &stop) != nil || stop < 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, ended)
	if err != nil {
		return time.Time{}, false
	}
	return t.Add(-time.Duration(stop * float64(time.Second))), true
}

// launchStart is when the activation launch started: the receipt's
// started_at, else the activation stage's start; zero when neither is
// known. from says which.
func launchStart(e *Evidence) (time.Time, string) {
	if r := e.ActivationReceipt; r != nil {
		var a string
		if json.Unmarshal(r.Extra["started_at"], &a) == nil {
			if t, err := time.Parse(time.RFC3339Nano, a); err == nil {
				return t, "the receipt's started_at"
			}
		}
	}
	for _, s := range e.Stages {
		if s.Name == StageActivation && !s.StartedAt.IsZero() {
			return s.StartedAt, "the activation stage's start"
		}
	}
	return time.Time{}, ""
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
	n, esc := svgNum, html.EscapeString
	svgOpen(&b, "", "timeline of the stages", tl.Width, tl.Height, tl.AxisY, tl.Ticks)
	for _, r := range tl.Bars {
		name := esc(r.Name)
		fmt.Fprintf(&b, `<text x="4" y="%s">%s</text><rect class="bar-%s" x="%s" y="%s" width="%s" height="%s" rx="2"><title>%s: %s</title></rect><text x="%s" y="%s">%s</text>`+"\n",
			n(r.TextY), name, name, n(r.X), n(r.Y), n(r.W), n(r.H), name, esc(r.Label), n(r.LabelX), n(r.TextY), esc(r.Label))
	}
	for i, m := range tl.Marks {
		fmt.Fprintf(&b, `<line class="mark" x1="%s" y1="0" x2="%s" y2="%s"><title>%s</title></line><text class="mark" x="%s" y="%s" text-anchor="middle">%s</text>`+"\n",
			n(m.X), n(m.X), n(tl.AxisY), esc(m.Detail), n(m.X), n(tl.AxisY+tlAxis+float64(i+1)*tlMarkRow-3), esc(m.Label))
	}
	b.WriteString("</svg>")
	return template.HTML(b.String())
}

func svgNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// svgOpen starts a chart: the svg element (attrs, when set, ends with a
// space) and its time axis, a line and a label per tick (the labels in the
// tlAxis band below axisY; a timeline's marks are named below that).
func svgOpen(b *strings.Builder, attrs, label string, width, height, axisY float64, ticks []timelineTick) {
	n, esc := svgNum, html.EscapeString
	fmt.Fprintf(b, `<svg %sxmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" role="img" aria-label="%s">`+"\n",
		attrs, n(width), n(height), n(width), n(height), esc(label))
	for _, t := range ticks {
		fmt.Fprintf(b, `<line class="axis" x1="%s" y1="0" x2="%s" y2="%s"/><text x="%s" y="%s" dy="-6" text-anchor="middle">%s</text>`,
			n(t.X), n(t.X), n(axisY), n(t.X), n(axisY+tlAxis), esc(t.Label))
	}
	b.WriteString("\n")
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// WriteHTML renders rep as one self-contained HTML page: inline CSS and SVG,
// no scripts, fonts or other fetches, so it can be archived and opened
// offline.
func WriteHTML(w io.Writer, rep *Report) error {
	v := htmlView{Report: rep}
	for _, r := range rep.Runs {
		hr := htmlRun{Run: r, Grid: newVerdictGrid(r)}
		for _, c := range r.Cases {
			hc := htmlCase{
				Case:     c,
				Timeline: newTimeline(c.Evidence),
				Open:     c.Status == StatusFailed || c.Status == StatusUnknown,
			}
			if c.Status != StatusPassed {
				// The case's files get a link of their own below.
				hc.Causes = slices.DeleteFunc(CauseLines(c), func(l string) bool { return strings.HasPrefix(l, "case files: ") })
			}
			hr.Cases = append(hr.Cases, hc)
		}
		slices.SortStableFunc(hr.Cases, func(a, b htmlCase) int { return htmlOrder(a.Status) - htmlOrder(b.Status) })
		hr.Chart = newRunChart(hr.Cases)
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
