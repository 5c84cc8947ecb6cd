package certify

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/model"
	"github.com/sandproof/sandproof/runner/probe"
	"github.com/sandproof/sandproof/runner/witness"
)

// The witness reads (docs/threat-model.md, "Witnesses"): a positive
// control reads a witness the harness cannot write. The scenario checks
// take theirs from here, and so should the next scenario's:
//
//   - the probe's view of /proc, as root, through an engine exec of the
//     owner's (witnessSnapshot): which process runs what command line and
//     executable, as which uid, in which state, traced by whom;
//   - warden's receipt, written by root while the harness runs as the
//     task user (reachedBy): which processes the stop reached;
//   - the relay's record of the model calls (the loop proof, proof.go).
//
// A file under the task dir is the harness's to write: it may show how
// something ran (the writer's cadence), never that it ran.

// witnessSnapshot is a probe snapshot taken for a witness: run as root by
// an engine exec of the owner's, giving the processes of uids with their
// probe.Detail, the markers hashed, and no tool run (it may be taken
// while the harness runs).
func witnessSnapshot(ctx context.Context, sb provider.Sandbox, uids []int, markers []string) (probe.Snapshot, error) {
	return probeSnapshot(ctx, sb, markers, uids, true)
}

// probeSnapshot is the probe's snapshot as root with the markers hashed,
// the processes of uids detailed, and the tools run unless noExec.
func probeSnapshot(ctx context.Context, sb provider.Sandbox, markers []string, uids []int, noExec bool) (probe.Snapshot, error) {
	argv := []string{probePath, "snapshot"}
	if noExec {
		argv = append(argv, "--no-exec")
	}
	if len(uids) > 0 {
		ids := make([]string, len(uids))
		for i, u := range uids {
			ids[i] = strconv.Itoa(u)
		}
		argv = append(argv, "--detail-uids", strings.Join(ids, ","))
	}
	if len(markers) > 0 {
		argv = append(argv, "--markers", strings.Join(markers, ","))
	}
	return probeRun(ctx, sb, argv)
}

// reachedBy lists the processes a receipt says the stop reached: warden's
// record, written as root, of what it found in the harness's tree.
func reachedBy(rec *reports.Receipt) ([]witness.Member, error) {
	if rec == nil {
		return nil, fmt.Errorf("no receipt")
	}
	raw, ok := rec.Extra["reached"]
	if !ok {
		return nil, fmt.Errorf("the receipt has no reached list")
	}
	var ms []witness.Member
	if err := json.Unmarshal(raw, &ms); err != nil {
		return nil, fmt.Errorf("read the receipt's reached list: %w", err)
	}
	return ms, nil
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

// writerWitness is what the owner's probe saw of the writer from the
// stall on: the process that ran the writer's command, as listed with
// its detail (PID 0 when none was), when, in how many looks, and what
// else of the task user's it saw in the last one.
type writerWitness struct {
	proc  probe.Process
	at    time.Time
	looks int
	// others are the comms of the task user's other processes in the
	// last look (short names, never command lines, which may hold what
	// the harness was given).
	others []string
	// limited says the last look's detail limit was reached: the writer
	// may be among the processes left unread.
	limited bool
	err     error // the last look's error
}

// maxOthers bounds the comms a witness's detail names.
const maxOthers = 10

// seen reports whether the probe listed the writer.
func (w writerWitness) seen() bool { return w.proc.PID != 0 }

// look records what one snapshot shows of the writer.
func (w *writerWitness) look(s probe.Snapshot, uid int) {
	w.looks++
	w.others, w.limited = nil, false
	for _, p := range s.Processes {
		switch {
		case p.UID != uid:
		case isWriter(p, uid):
			if !w.seen() {
				w.proc, w.at = p, s.TakenAt
			}
		default:
			w.others = append(w.others, p.Comm)
			w.limited = w.limited || (p.Detail != nil && strings.Contains(p.Detail.Error, "limit"))
		}
	}
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

// The writer's cadence: it appends a line every model.WriterPeriod (0.1
// s); before the stop its file must hold at least one line for each whole
// second from its first line to the stop (a tenth of the period's count,
// room for a loaded host), the last no more than cadenceGap before the
// stop. A file written by hand once, or a writer stopped (SIGSTOP, kill)
// long before the stop, does not have it.
const cadenceGap = 5 * time.Second

// cadence is what the writer's file shows of its run before the stop.
type cadence struct {
	before      int // "N EPOCH" lines, numbered from 0, no later than the stop
	first, last time.Time
	err         error // the file is not the writer's lines
}

// writerCadence reads the writer's lines up to the stop (the lines after
// it, written while the stop went on, are not counted).
func writerCadence(content string, stop time.Time) cadence {
	var c cadence
	for i, line := range strings.Split(strings.TrimSuffix(content, "\n"), "\n") {
		f := strings.Fields(line)
		n, nerr := 0, error(nil)
		var secs int64
		if len(f) == 2 {
			n, nerr = strconv.Atoi(f[0])
			if nerr == nil {
				secs, nerr = strconv.ParseInt(f[1], 10, 64)
			}
		}
		if len(f) != 2 || nerr != nil || n != i {
			c.err = fmt.Errorf("line %d %q is not \"%d EPOCH\"", i+1, truncate(line, 80), i)
			return c
		}
		t := time.Unix(secs, 0)
		if i > 0 && t.Before(c.last) {
			c.err = fmt.Errorf("line %d goes back in time (%s after %s)", i+1, t.UTC().Format(time.RFC3339), c.last.UTC().Format(time.RFC3339))
			return c
		}
		if t.After(stop) {
			break
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

// keptAsStarted compares a process the owner keeps with how the probe saw
// it when the owner started it: nothing, when it is the same process
// (pid and start time), alive and not stopped (T, t), running the same
// executable and command line as the same uid, with no tracer. Otherwise
// what differs, each read as root by the probe; a detail the probe could
// not read differs too.
func keptAsStarted(was probe.Process, now []probe.Process) []string {
	i := slices.IndexFunc(now, func(p probe.Process) bool { return p.ID() == was.ID() })
	if i < 0 {
		return []string{"gone"}
	}
	p := now[i]
	var bad []string
	if p.Dead() {
		bad = append(bad, fmt.Sprintf("dead (state %s)", p.State))
	}
	if p.State == "T" || p.State == "t" {
		bad = append(bad, fmt.Sprintf("stopped (state %s)", p.State))
	}
	if p.UID != was.UID {
		bad = append(bad, fmt.Sprintf("uid %d, was %d", p.UID, was.UID))
	}
	d, w := p.Detail, was.Detail
	if d == nil || w == nil {
		return append(bad, "its executable, command line and tracer were not read")
	}
	if d.Exe == "" || d.Exe != w.Exe {
		bad = append(bad, fmt.Sprintf("executable %q, was %q", d.Exe, w.Exe))
	}
	if d.CmdlineCut || !slices.Equal(d.Cmdline, w.Cmdline) {
		bad = append(bad, fmt.Sprintf("command line %q, was %q", truncate(strings.Join(d.Cmdline, " "), 80), truncate(strings.Join(w.Cmdline, " "), 80)))
	}
	if d.TracerPID != 0 {
		bad = append(bad, fmt.Sprintf("traced (TracerPid %d)", d.TracerPID))
	}
	if d.Error != "" {
		bad = append(bad, "unread: "+d.Error)
	}
	return bad
}

// fileKept is how the file a look found now differs from the one it found
// before (the probe's fstat, as root): another owner, another mode, or
// another file (inode or device: deleted and put back, whatever it
// holds). A look that did not read it is not shown kept.
func fileKept(was, now *probe.FileID) []string {
	if was == nil || now == nil {
		return []string{"which file it is was not read"}
	}
	var bad []string
	if now.UID != was.UID || now.GID != was.GID {
		bad = append(bad, fmt.Sprintf("owner %d:%d, was %d:%d", now.UID, now.GID, was.UID, was.GID))
	}
	if now.Mode != was.Mode {
		bad = append(bad, fmt.Sprintf("mode %o, was %o", now.Mode, was.Mode))
	}
	if now.Inode != was.Inode || now.Dev != was.Dev {
		bad = append(bad, fmt.Sprintf("another file (inode %d on device %d, was %d on %d): replaced", now.Inode, now.Dev, was.Inode, was.Dev))
	}
	return bad
}
