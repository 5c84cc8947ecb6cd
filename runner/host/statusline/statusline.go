// Package statusline draws certify's live status line on a terminal: one
// line at the bottom (cases done of the total, passed, failed, the running
// cases, an ETA) that the run's progress lines scroll above. Without a
// terminal certify prints its plain progress lines and nothing of this.
package statusline

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sandproof/sandproof/reports"
)

// The terminal controls the line uses: back to the start of the line and
// erase it. Nothing else (no colours, no cursor movement across lines), so
// any terminal that honours a carriage return and EL shows it right.
const (
	eraseLine = "\r\x1b[K"
	// DefaultWidth is used when the terminal's width is unknown.
	DefaultWidth = 80
)

// Line is the status line. It is an io.Writer for the progress lines
// (each is written above the status line, which is drawn again under it)
// and certify's watcher of the cases. Safe for concurrent use.
type Line struct {
	mu      sync.Mutex
	out     io.Writer
	now     func() time.Time
	width   int
	start   time.Time
	total   int
	done    int
	counts  map[reports.Status]int
	running []string // in the order they started
	partial bool     // the last write ended without a newline
	closed  bool
}

// New returns a status line on out, a terminal width columns wide (< 1
// means DefaultWidth); now is the clock (time.Now outside tests).
func New(out io.Writer, now func() time.Time, width int) *Line {
	if width < 1 {
		width = DefaultWidth
	}
	return &Line{out: out, now: now, width: width, start: now(), counts: map[reports.Status]int{}}
}

// Planned sets how many cases the run will run; the ETA counts from now.
func (l *Line) Planned(cases int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total, l.start = cases, l.now()
	l.draw("")
}

// CaseStarted adds a running case.
func (l *Line) CaseStarted(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running = append(l.running, id)
	l.draw("")
}

// CaseEnded counts a case that ended with status st.
func (l *Line) CaseEnded(id string, st reports.Status) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, r := range l.running {
		if r == id {
			l.running = append(l.running[:i], l.running[i+1:]...)
			break
		}
	}
	l.done++
	l.counts[st]++
	l.draw("")
}

// Tick draws the line again: the elapsed time and the ETA move on their
// own.
func (l *Line) Tick() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.draw("")
}

// Write puts p above the status line: the line is erased, p written, and
// the line drawn again once p ends a line.
func (l *Line) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.out.Write(p)
	}
	l.draw(string(p))
	return len(p), nil
}

// Close leaves the last status on screen, ended by a newline, so what
// follows (the summary) starts on a line of its own. Writes after Close go
// straight through.
func (l *Line) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.draw("")
	l.closed = true
	_, err := io.WriteString(l.out, "\n")
	return err
}

// draw writes text (progress output, may be empty) and then the status
// line, in one write so the terminal never shows a half-drawn line. A
// text that does not end its line is kept on screen without a status
// under it until a later write ends it.
func (l *Line) draw(text string) {
	if l.closed {
		return
	}
	var b bytes.Buffer
	if !l.partial {
		b.WriteString(eraseLine)
	}
	b.WriteString(text)
	if text != "" {
		l.partial = !strings.HasSuffix(text, "\n")
	}
	if !l.partial {
		// Case ids come from manifests and image names: made printable
		// like every other line certify writes.
		b.WriteString(Fit(reports.Printable(l.status(), false), l.width-1))
	}
	l.out.Write(b.Bytes())
}

// Status is the text of the line, for tests and for a caller that wants
// it without the terminal controls.
func (l *Line) Status() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.status()
}

func (l *Line) status() string {
	elapsed := l.now().Sub(l.start)
	var b strings.Builder
	fmt.Fprintf(&b, "certify: %d/%d done, %d passed, %d failed", l.done, l.total, l.counts[reports.StatusPassed], l.counts[reports.StatusFailed])
	if n := l.counts[reports.StatusSkipped]; n > 0 {
		fmt.Fprintf(&b, ", %d skipped", n)
	}
	if n := l.counts[reports.StatusUnknown]; n > 0 {
		fmt.Fprintf(&b, ", %d unknown", n)
	}
	fmt.Fprintf(&b, " | %s", Clock(elapsed))
	if eta, ok := ETA(elapsed, l.done, l.total); ok {
		fmt.Fprintf(&b, ", ETA %s", Clock(eta))
	} else if l.done < l.total {
		b.WriteString(", ETA --")
	}
	if len(l.running) > 0 {
		fmt.Fprintf(&b, " | running %d: %s", len(l.running), strings.Join(l.running, ", "))
	}
	return b.String()
}

// ETA estimates the time left from the pace so far: elapsed per case
// done, times the cases left (parallel runs are in the pace already).
// false when no case has ended yet, or none is left.
func ETA(elapsed time.Duration, done, total int) (time.Duration, bool) {
	if done <= 0 || done >= total {
		return 0, false
	}
	return (elapsed / time.Duration(done) * time.Duration(total-done)).Round(time.Second), true
}

// Clock writes d as "42s", "3m07s" or "1h02m".
func Clock(d time.Duration) string {
	s := int(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
}

// Fit cuts s to at most width runes (the last one "…" when cut), so the
// line never wraps: a wrapped line would leave its head behind each time
// it is drawn again.
func Fit(s string, width int) string {
	if width < 1 {
		return ""
	}
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:width-1]) + "…"
}
