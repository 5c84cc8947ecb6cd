package certify

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/model"
	"github.com/sandproof/sandproof/runner/probe"
)

// The writer's witness (docs/threat-model.md, Witnesses): what shows that
// the writer of timeout and cancel ran is the owner's own looks, through
// the probe as root, from the stall up to the stop: the process running
// the writer's command, alive, not stopped, untraced, the image's sh, as
// the task user; and its file, the task user's and writable by it,
// growing between the looks at the writer's pace and never dated after
// the look that read it. The file's content after close only confirms
// the run the looks saw: a file is the harness's to write, so it never
// shows on its own that the writer ran.

// The writer's pace and what the owner's looks want of it.
const (
	// writerPeriod is the writer's sleep between lines
	// (model.WriterPeriod): it writes no faster than a line a period.
	writerPeriod = 100 * time.Millisecond
	// writerSpan and writerGrowth: two looks at least writerSpan (five
	// periods) apart, the later holding writerGrowth lines more, show the
	// file growing. A file written in one burst never does.
	writerSpan   = 500 * time.Millisecond
	writerGrowth = 2
	// writerGrowWait bounds the owner's looks for that growth from the
	// writer's first sighting: a cancel's owner closes past it anyway.
	writerGrowWait = 3 * time.Second
	// writerSlack is how many lines two looks may differ by beyond a
	// line a period: a look reads the file a moment after its time.
	writerSlack = 5
	// maxWriterLooks bounds the looks a witness keeps.
	maxWriterLooks = 16
	// nearStopLead: a timeout's owner looks once more this long before
	// the launch's deadline, so the looks span the writer's run up to
	// the stop, not only its start; more than lookMargin, so the look
	// is judged.
	nearStopLead = 2 * time.Second
	// lookMargin: a look taken this close to the stop (or after it) is
	// not judged; the stop holds the tree with SIGSTOP before it kills.
	lookMargin = 1500 * time.Millisecond
	// maxPerSecond bounds the lines of one second in the file after
	// close: the writer writes at most ten (a line a period, plus one for
	// where the second begins).
	maxPerSecond = 11
)

// writerSnapshot is one of the owner's looks at the writer: the probe's
// snapshot as root, no tool run, the task user's processes detailed, the
// writer's file hashed with its lines counted and its last line (and its
// owner and mode), and where `sh` on the image's PATH resolves.
func writerSnapshot(ctx context.Context, sb provider.Sandbox, uid int) (probe.Snapshot, error) {
	return probeRun(ctx, sb, []string{probePath, "snapshot", "--no-exec", "--detail-uids", strconv.Itoa(uid),
		"--markers", writerFile, "--lines", writerFile, "--resolve-sh"})
}

// isWriter reports whether p runs the writer: a process of uid, alive,
// whose command line (read by the probe) is `sh -c LOOP` with the
// writer's own loop (model.WriterLoop), uncut.
func isWriter(p probe.Process, uid int) bool {
	d := p.Detail
	if p.UID != uid || p.Dead() || d == nil || d.CmdlineCut || len(d.Cmdline) != 3 {
		return false
	}
	return d.Cmdline[1] == "-c" && d.Cmdline[2] == model.WriterLoop(writerFile)
}

// writerLook is one look of the owner's at the writer, from its first
// sighting on.
type writerLook struct {
	at   time.Time     // the probe's TakenAt: the sandbox's clock
	proc probe.Process // the writer as this look listed it; PID 0: not listed
	file probe.Marker  // its file, with its lines and last line
	sh   string        // where `sh` on the image's PATH resolves
}

// writerWitness is what the owner's probe saw of the writer from the
// stall on: the process that ran the writer's command, as listed with
// its detail (PID 0 when none was), when, in how many looks, each look
// from that first sighting on, and what else of the task user's it saw
// in the last one.
type writerWitness struct {
	proc  probe.Process
	at    time.Time
	looks int
	// sights are the looks from the first sighting on (maxWriterLooks
	// at most: past it the last is replaced).
	sights []writerLook
	// others are the comms of the task user's other processes in the
	// last look (short names, never command lines, which may hold what
	// the harness was given).
	others []string
	// limited says the last look's detail limit was reached: the writer
	// may be among the processes left unread.
	limited bool
	err     error // the last look's error
	// forwardErr is why a timeout's owner could not bring the launch's
	// deadline forward at the stall (its own deadline stopped it).
	forwardErr error
}

// maxOthers bounds the comms a witness's detail names.
const maxOthers = 10

// seen reports whether the probe listed the writer.
func (w writerWitness) seen() bool { return w.proc.PID != 0 }

// look records what one snapshot shows of the writer: once it was seen,
// the same process (pid and start time) in each later look, whatever it
// runs by then.
func (w *writerWitness) look(s probe.Snapshot, uid int) {
	w.looks++
	w.others, w.limited = nil, false
	l := writerLook{at: s.TakenAt, sh: s.Sh}
	for _, p := range s.Processes {
		switch {
		case w.seen() && p.ID() == w.proc.ID():
			l.proc = p
		case p.UID != uid:
		case !w.seen() && isWriter(p, uid):
			w.proc, w.at, l.proc = p, s.TakenAt, p
		default:
			w.others = append(w.others, p.Comm)
			w.limited = w.limited || (p.Detail != nil && strings.Contains(p.Detail.Error, "limit"))
		}
	}
	if !w.seen() {
		return
	}
	l.file = probe.Marker{Path: writerFile, Missing: true}
	for _, m := range s.Markers {
		if m.Path == writerFile {
			l.file = m
		}
	}
	if len(w.sights) == maxWriterLooks {
		w.sights = w.sights[:maxWriterLooks-1]
	}
	w.sights = append(w.sights, l)
}

// text says what the witness saw, for scenario.writer_started.
func (w writerWitness) text(uid int) string {
	if w.seen() {
		d := w.proc.Detail
		return fmt.Sprintf("the probe saw the writer at %s: pid %d (start %d), uid %d, %s, exe %s", w.at.UTC().Format(time.RFC3339Nano),
			w.proc.PID, w.proc.StartTime, w.proc.UID, d.Cmdline[0]+" -c <the writer's loop>", pick(d.Exe == "", "unread", d.Exe))
	}
	s := fmt.Sprintf("the probe saw no process of uid %d running the writer's command (sh -c <its loop>) in %d look(s) from the stall", uid, w.looks)
	if w.looks > 0 {
		others := strings.Join(w.others[:min(len(w.others), maxOthers)], ", ")
		if len(w.others) > maxOthers {
			others += fmt.Sprintf(" and %d more", len(w.others)-maxOthers)
		}
		s += fmt.Sprintf("; uid %d's other processes at the last: %s", uid, pick(len(w.others) == 0, "none", others))
	}
	if w.limited {
		s += fmt.Sprintf(" (the probe's limit of %d detailed processes was reached)", probe.MaxDetailed)
	}
	if w.err != nil {
		s += "; the last look failed: " + w.err.Error()
	}
	return s
}

// looksSeen is what the owner's looks show of the writer (judge).
type looksSeen struct {
	judged int      // the looks judged: from the first sighting, before the cutoff
	lines  []int    // the file's lines at each of them
	span   string   // from the first judged look to the last
	faults []string // each way the looks show no live writer, once
	ok     bool
}

// judge reads the looks from the writer's first sighting that came before
// cutoff (every one when cutoff is zero: a cancel's looks all precede
// its owner's close). At each, the writer is listed, alive, not stopped
// (T, t), untraced, of uid, its executable the image's sh as the probe
// resolved it (never another program under the writer's command line);
// its file, once there, is owned by uid, writable by it (a read-only file
// takes none of the writer's appends) and read whole, its last line
// numbered for the lines before it and dated no later than the look.
// Across them the file grows at the writer's pace (writerPace).
func (w writerWitness) judge(uid int, cutoff time.Time) looksSeen {
	var v looksSeen
	var ls []writerLook
	for _, l := range w.sights {
		if cutoff.IsZero() || l.at.Before(cutoff) {
			ls = append(ls, l)
		}
	}
	v.judged = len(ls)
	if len(ls) == 0 {
		v.faults = []string{"no look of the owner's saw it before the stop"}
		return v
	}
	// Each fault once, with the looks it was seen at.
	var kinds []string
	count := map[string]int{}
	for _, l := range ls {
		for _, f := range lookFaults(l, uid) {
			if count[f]++; count[f] == 1 {
				kinds = append(kinds, f)
			}
		}
		v.lines = append(v.lines, l.file.Lines)
	}
	for _, f := range kinds[:min(len(kinds), maxFaults)] {
		v.faults = append(v.faults, fmt.Sprintf("%s (%d of %d looks)", f, count[f], len(ls)))
	}
	v.faults = append(v.faults, writerPace(ls)...)
	v.span = ls[len(ls)-1].at.Sub(ls[0].at).Round(time.Millisecond).String()
	v.ok = len(v.faults) == 0
	return v
}

// maxFaults bounds the kinds of fault a detail names.
const maxFaults = 6

// lookFaults is what one look shows against a live writer, each the same
// words at every look it is seen at.
func lookFaults(l writerLook, uid int) []string {
	p := l.proc
	if p.PID == 0 {
		return []string{"gone from the process table"}
	}
	var bad []string
	switch {
	case p.Dead():
		bad = append(bad, fmt.Sprintf("dead (state %s)", p.State))
	case p.State == "T" || p.State == "t":
		bad = append(bad, fmt.Sprintf("stopped (state %s)", p.State))
	}
	if p.UID != uid {
		bad = append(bad, fmt.Sprintf("uid %d, not the task user's", p.UID))
	}
	if d := p.Detail; d == nil {
		bad = append(bad, "its executable and tracer unread")
	} else {
		if l.sh == "" || d.Exe != l.sh {
			bad = append(bad, fmt.Sprintf("executable %q, not the image's sh (%q)", d.Exe, l.sh))
		}
		if d.TracerPID != 0 {
			bad = append(bad, fmt.Sprintf("traced (TracerPid %d)", d.TracerPID))
		}
	}
	return append(bad, fileFaults(l.file, l.at, uid)...)
}

// fileFaults is what one look shows against the writer's file: nothing
// while it is not there yet (the writer's first line may come after the
// first look; the pace wants lines).
func fileFaults(f probe.Marker, at time.Time, uid int) []string {
	switch {
	case f.Missing:
		return nil
	case f.Error != "":
		return []string{"its file unread: " + truncate(f.Error, 120)}
	case f.OverCap:
		return []string{fmt.Sprintf("its file over the probe's cap (%d bytes)", f.Size)}
	}
	var bad []string
	switch id := f.File; {
	case id == nil:
		bad = append(bad, "its file's owner and mode unread")
	default:
		if int(id.UID) != uid {
			bad = append(bad, fmt.Sprintf("its file owned by uid %d, not the task user's", id.UID))
		}
		if id.Mode&0o200 == 0 {
			bad = append(bad, fmt.Sprintf("its file read-only to its owner (mode %04o): the writer's appends fail", id.Mode&0o7777))
		}
	}
	if f.Lines == 0 {
		return bad
	}
	n, secs, err := writerLine(f.LastLine)
	switch {
	case err != nil:
		bad = append(bad, fmt.Sprintf("its last line %q is not \"N EPOCH\"", truncate(f.LastLine, 40)))
	case n != f.Lines-1:
		bad = append(bad, fmt.Sprintf("its last line is numbered %d in %d lines", n, f.Lines))
	case secs > at.Unix():
		bad = append(bad, fmt.Sprintf("its last line dated %s, after the look that read it", time.Unix(secs, 0).UTC().Format(time.RFC3339)))
	}
	return bad
}

// writerLine reads one of the writer's lines, "N EPOCH".
func writerLine(line string) (int, int64, error) {
	f := strings.Fields(line)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("want 2 fields, got %d", len(f))
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 0, 0, err
	}
	secs, err := strconv.ParseInt(f[1], 10, 64)
	return n, secs, err
}

// writerPace is what the looks ls (in order) show against the writer's
// pace: the file never shrinks from one look to the next, nor grows
// faster than a line a period (writerSlack aside: a burst written by
// hand does); two looks writerSpan apart or more show it grow by
// writerGrowth lines (a file written once never does); and from the first
// look to the last it grows a line a second at least (a tenth of the
// pace, room for a loaded host), so the looks before the stop show the
// writer still writing, not only starting.
func writerPace(ls []writerLook) []string {
	var bad []string
	grew := false
	for i := 1; i < len(ls); i++ {
		a, b := ls[i-1], ls[i]
		span, more := b.at.Sub(a.at), b.file.Lines-a.file.Lines
		if more < 0 {
			bad = append(bad, fmt.Sprintf("its file shrank from %d to %d lines between two looks", a.file.Lines, b.file.Lines))
		}
		if more > int(span/writerPeriod)+writerSlack {
			bad = append(bad, fmt.Sprintf("its file grew %d lines in %s, faster than the writer writes (a line a %s)", more, span.Round(time.Millisecond), writerPeriod))
		}
	}
	for i, a := range ls {
		for _, b := range ls[i+1:] {
			grew = grew || b.at.Sub(a.at) >= writerSpan && b.file.Lines-a.file.Lines >= writerGrowth
		}
	}
	if !grew {
		bad = append(bad, fmt.Sprintf("its file did not grow across the owner's looks (want %d lines or more between two looks %s apart)", writerGrowth, writerSpan))
	}
	first, last := ls[0], ls[len(ls)-1]
	if want := int(last.at.Sub(first.at) / time.Second); last.file.Lines-first.file.Lines < want {
		bad = append(bad, fmt.Sprintf("its file grew %d lines in the %s between the first look and the last, want %d (a line a second)",
			last.file.Lines-first.file.Lines, last.at.Sub(first.at).Round(time.Millisecond), want))
	}
	return bad
}

// text says what the looks showed, for scenario.writer_started.
func (v looksSeen) text() string {
	s := fmt.Sprintf("the owner's %d look(s) before the stop over %s: its file's lines %s", v.judged, pick(v.span == "", "0s", v.span), linesText(v.lines))
	if v.ok {
		return s + ", the writer running the image's sh throughout"
	}
	return s + "; " + strings.Join(v.faults, "; ")
}

// linesText lists the lines at each look, the middle left out past 8.
func linesText(ns []int) string {
	var parts []string
	for i, n := range ns {
		if len(ns) > 8 && i == 4 {
			parts = append(parts, "...")
		}
		if len(ns) <= 8 || i < 4 || i >= len(ns)-4 {
			parts = append(parts, strconv.Itoa(n))
		}
	}
	return pick(len(parts) == 0, "none", strings.Join(parts, " -> "))
}

// The writer's cadence in its file after close: it appends a line every
// writerPeriod; before the stop its file must hold at least one line for
// each whole second from its first line to the stop (a tenth of the
// period's count, room for a loaded host), the last no more than
// cadenceGap before the stop; no second holds more than maxPerSecond
// lines, and no line is dated after the owner's read of the file. The
// looks show that the writer ran; the file shows it ran on up to the
// stop: a file written by hand in a burst, or a writer stopped long
// before the stop, does not have it.
const cadenceGap = 5 * time.Second

// cadence is what the writer's file shows of its run before the stop.
type cadence struct {
	before      int       // "N EPOCH" lines, numbered from 0, no later than the stop
	first, last time.Time // the first and last of them
	err         error     // the file is not the writer's lines
}

// writerCadence reads the writer's lines up to the stop (the lines after
// it, written while the stop went on, are not counted) from content, read
// by the owner before readAt (the sandbox's clock: no line is later).
func writerCadence(content string, stop, readAt time.Time) cadence {
	var c cadence
	var prev time.Time
	same := 0
	for i, line := range strings.Split(strings.TrimSuffix(content, "\n"), "\n") {
		n, secs, err := writerLine(line)
		if err != nil || n != i {
			c.err = fmt.Errorf("line %d %q is not \"%d EPOCH\"", i+1, truncate(line, 80), i)
			return c
		}
		t := time.Unix(secs, 0)
		if i > 0 && t.Before(prev) {
			c.err = fmt.Errorf("line %d goes back in time (%s after %s)", i+1, t.UTC().Format(time.RFC3339), prev.UTC().Format(time.RFC3339))
			return c
		}
		if t.After(readAt) {
			c.err = fmt.Errorf("line %d is dated %s, after the owner read the file (%s)", i+1, t.UTC().Format(time.RFC3339), readAt.UTC().Format(time.RFC3339Nano))
			return c
		}
		if i > 0 && t.Equal(prev) {
			same++
		} else {
			same = 1
		}
		if same > maxPerSecond {
			c.err = fmt.Errorf("line %d is the %dth dated %s, faster than the writer writes", i+1, same, t.UTC().Format(time.RFC3339))
			return c
		}
		prev = t
		if t.After(stop) {
			continue
		}
		if i == 0 {
			c.first = t
		}
		c.before, c.last = i+1, t
	}
	return c
}

// want is how many lines the cadence asks for before the stop.
func (c cadence) want(stop time.Time) int {
	return max(0, int(stop.Sub(c.first)/time.Second)-1)
}

// ok reports whether the lines before the stop keep the cadence.
func (c cadence) ok(stop time.Time) bool {
	return c.err == nil && c.before > 0 && c.before >= c.want(stop) && !c.last.Add(cadenceGap).Before(stop.Truncate(time.Second))
}

// text says what the file showed, for scenario.writer_started.
func (c cadence) text(stop time.Time) string {
	switch {
	case c.err != nil:
		return c.err.Error()
	case c.before == 0:
		return "no line before the stop"
	}
	return fmt.Sprintf("%d line(s) before the stop, from %s to %s (want at least %d, the last within %s of the stop)",
		c.before, c.first.UTC().Format(time.RFC3339), c.last.UTC().Format(time.RFC3339), c.want(stop), cadenceGap)
}
