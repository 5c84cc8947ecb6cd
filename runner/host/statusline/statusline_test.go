package statusline

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
)

// screen is a fake terminal: it keeps the lines as a terminal shows them,
// honouring exactly the controls a status line may use (CR, EL, LF), and
// fails on any other escape, so the line cannot come to rely on one.
type screen struct {
	t      *testing.T
	mu     sync.Mutex
	lines  []string // scrolled-off and finished lines
	cur    []rune   // the line the cursor is on
	col    int
	writes int
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	text := string(p)
	for len(text) > 0 {
		switch {
		case strings.HasPrefix(text, "\x1b[K"):
			s.cur = s.cur[:s.col]
			text = text[3:]
			continue
		case text[0] == '\x1b':
			s.t.Errorf("escape the fake terminal does not know: %q", text)
			return len(p), nil
		case text[0] == '\r':
			s.col = 0
		case text[0] == '\n':
			s.lines = append(s.lines, string(s.cur))
			s.cur, s.col = nil, 0
		default:
			r := []rune(text)[0]
			if s.col < len(s.cur) {
				s.cur[s.col] = r
			} else {
				s.cur = append(s.cur, r)
			}
			s.col++
			text = text[len(string(r)):]
			continue
		}
		text = text[1:]
	}
	return len(p), nil
}

// view is what the terminal shows: the finished lines, then the cursor's.
func (s *screen) view() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(append([]string(nil), s.lines...), string(s.cur))
}

// fakeClock moves only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newLine(t *testing.T, width int) (*Line, *screen, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	scr := &screen{t: t}
	return New(scr, clk.now, width), scr, clk
}

// One live line under the progress lines: every progress line stays in
// the scrollback whole, and the bottom line is always the current status.
func TestLineStaysUnderTheProgressLines(t *testing.T) {
	l, scr, clk := newLine(t, 200)
	l.Planned(4)
	l.CaseStarted("debian-12/pi")
	l.CaseStarted("debian-12/pi/timeout")
	l.Write([]byte("certify: debian-12/pi: setup ...\n"))
	clk.t = clk.t.Add(40 * time.Second)
	l.CaseEnded("debian-12/pi", reports.StatusPassed)
	l.Write([]byte("certify: debian-12/pi: PASSED in 40.0s\n"))
	l.CaseStarted("alpine-class/pi")
	clk.t = clk.t.Add(20 * time.Second)
	l.CaseEnded("debian-12/pi/timeout", reports.StatusFailed)

	v := scr.view()
	want := []string{"certify: debian-12/pi: setup ...", "certify: debian-12/pi: PASSED in 40.0s"}
	if len(v) != 3 || v[0] != want[0] || v[1] != want[1] {
		t.Fatalf("screen %q, want the two progress lines then the status", v)
	}
	// 2 of 4 done in 60 s: 30 s a case, 60 s left.
	if got, want := v[2], "certify: 2/4 done, 1 passed, 1 failed | 1m00s, ETA 1m00s | running 1: alpine-class/pi"; got != want {
		t.Fatalf("status line %q, want %q", got, want)
	}
	if got := l.Status(); got != v[2] {
		t.Errorf("Status() %q, the screen shows %q", got, v[2])
	}
}

// The line never wraps: it is cut to the terminal's width less one.
func TestLineFitsTheTerminal(t *testing.T) {
	l, scr, _ := newLine(t, 40)
	l.Planned(9)
	for _, id := range []string{"debian-12/opencode/model-429", "alpine-class/opencode/borrowed"} {
		l.CaseStarted(id)
	}
	v := scr.view()
	if n := len([]rune(v[len(v)-1])); n != 39 || !strings.HasSuffix(v[len(v)-1], "…") {
		t.Fatalf("status line %q is %d runes, want 39 ending in …", v[len(v)-1], n)
	}
}

// A progress write that does not end its line is not drawn over: the
// status comes back once the line is ended.
func TestLineWaitsForAPartialLine(t *testing.T) {
	l, scr, _ := newLine(t, 200)
	l.Planned(1)
	l.Write([]byte("certify: half"))
	l.Tick()
	l.Write([]byte(" a line\n"))
	v := scr.view()
	if len(v) != 2 || v[0] != "certify: half a line" || !strings.HasPrefix(v[1], "certify: 0/1 done") {
		t.Fatalf("screen %q", v)
	}
}

// Close leaves the final status on its own line; later writes pass
// through untouched.
func TestLineCloseEndsTheLine(t *testing.T) {
	l, scr, clk := newLine(t, 200)
	l.Planned(1)
	l.CaseStarted("debian-12/pi")
	clk.t = clk.t.Add(3 * time.Second)
	l.CaseEnded("debian-12/pi", reports.StatusSkipped)
	clk.t = clk.t.Add(2 * time.Second) // the run's own end comes later
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.Write([]byte("run r: 0 passed\n"))
	v := scr.view()
	if len(v) != 3 || v[0] != "certify: 1/1 done, 0 passed, 0 failed, 1 skipped | 5s" || v[1] != "run r: 0 passed" || v[2] != "" {
		t.Fatalf("screen after close %q", v)
	}
}

func TestETA(t *testing.T) {
	for _, c := range []struct {
		elapsed     time.Duration
		done, total int
		want        time.Duration
		ok          bool
	}{
		{90 * time.Second, 3, 12, 270 * time.Second, true},
		{10 * time.Second, 0, 12, 0, false}, // no pace yet
		{10 * time.Second, 5, 5, 0, false},  // nothing left
		{1500 * time.Millisecond, 2, 3, time.Second, true},
	} {
		got, ok := ETA(c.elapsed, c.done, c.total)
		if got != c.want || ok != c.ok {
			t.Errorf("ETA(%v, %d, %d) = %v %v, want %v %v", c.elapsed, c.done, c.total, got, ok, c.want, c.ok)
		}
	}
}

func TestClock(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 59 * time.Second: "59s", 61 * time.Second: "1m01s", 3599 * time.Second: "59m59s", 3720 * time.Second: "1h02m",
	} {
		if got := Clock(d); got != want {
			t.Errorf("Clock(%v) = %q, want %q", d, got, want)
		}
	}
}

// Before any case ended the ETA is unknown, and says so.
func TestLineWithoutAPaceSaysSo(t *testing.T) {
	l, _, _ := newLine(t, 200)
	l.Planned(3)
	if got := l.Status(); !strings.HasSuffix(got, "| 0s, ETA --") {
		t.Fatalf("status %q, want an unknown ETA", got)
	}
}

// Status text from outside (a case id) is made printable: no control
// character reaches the terminal through the line.
func TestLineIsPrintable(t *testing.T) {
	l, scr, _ := newLine(t, 200)
	l.Planned(1)
	l.CaseStarted("evil\x1b]0;title\x07/pi")
	if v := scr.view(); strings.ContainsAny(v[len(v)-1], "\x1b\x07") {
		t.Fatalf("status line carries control characters: %q", v[len(v)-1])
	}
}
