package certify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/capture"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/model"
	"github.com/sandproof/sandproof/runner/probe"
	"github.com/sandproof/sandproof/runner/witness"
)

// The scenarios' verdict rules (scenario_checks.go), without an engine:
// each table's first row is the positive control (the rule passes), and
// each later row breaks one thing and sees the rule fail.

func scenario(t *testing.T, name string) Scenario {
	t.Helper()
	s, ok := ScenarioByName(name)
	if !ok {
		t.Fatalf("no scenario %q", name)
	}
	return s
}

func TestStopCheckRules(t *testing.T) {
	rc := 143
	good := func(cause string, timedOut bool) *reports.Receipt {
		return &reports.Receipt{Cause: cause, TimedOut: timedOut, CleanupConfirmed: true, ReturnCode: &rc}
	}
	timeout, cancel := scenario(t, ScenarioTimeout), scenario(t, ScenarioCancel)
	for _, tc := range []struct {
		name string
		sc   Scenario
		rec  *reports.Receipt
		want reports.Status
	}{
		{"timeout: deadline, timed out, confirmed", timeout, good("deadline", true), reports.StatusPassed},
		{"cancel: stopped, not timed out, confirmed", cancel, good("stopped", false), reports.StatusPassed},
		{"timeout: the harness exited by itself", timeout, good("exited", false), reports.StatusFailed},
		{"cancel: timed out instead of stopped", cancel, good("deadline", true), reports.StatusFailed},
		{"cancel: stopped but flagged timed_out", cancel, good("stopped", true), reports.StatusFailed},
		{"cancel: the harness exited before the close", cancel, good("exited", false), reports.StatusFailed},
		{"timeout: timed out, but the cause is a stop", timeout, good("stopped", true), reports.StatusFailed},
		{"timeout: cleanup not confirmed", timeout, &reports.Receipt{Cause: "deadline", TimedOut: true}, reports.StatusFailed},
		{"no receipt", timeout, nil, reports.StatusFailed},
	} {
		if c := stopCheck(tc.sc, tc.rec, 0, nil); c.ID != "scenario.stop" || c.Status != tc.want || c.Clause != clauseScenario {
			t.Errorf("%s: %s %s (%s), want %s", tc.name, c.ID, c.Status, c.Detail, tc.want)
		}
	}
}

// writerLines is the writer's file as it writes it: n lines from its
// first second, ten a second.
func writerLines(from int64, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%d %d\n", i, from+int64(i/10))
	}
	return b.String()
}

// reachedJSON is a receipt's reached list naming ps.
func reachedJSON(ps ...probe.Process) map[string]json.RawMessage {
	var ms []witness.Member
	for _, p := range ps {
		ms = append(ms, witness.Member{PID: p.PID, StartTime: p.StartTime, Comm: p.Comm, Why: "orphan"})
	}
	b, _ := json.Marshal(ms)
	return map[string]json.RawMessage{"reached": b}
}

// writerSight is one of the owner's looks at the writer at second sec
// (of 1_800_000_000), its file holding n of the writer's lines from second
// 5 (writerLines), the writer running the image's sh.
func writerSight(sec float64, n int) writerLook {
	at := time.Unix(1_800_000_000, 0).Add(time.Duration(sec * float64(time.Second)))
	return writerLook{at: at, proc: writerProc(81), sh: "/usr/bin/dash",
		file: probe.Marker{Path: writerFile, Size: int64(len(writerLines(1_800_000_005, n))), Lines: n, File: &probe.FileID{UID: 1000, GID: 1000, Mode: syscall.S_IFREG | 0o644},
			LastLine: fmt.Sprintf("%d %d", n-1, 1_800_000_005+int64((n-1)/10))}}
}

// scenario.writer_started passes only on witnesses the harness cannot
// write: the probe saw the writer's process at the stall; its looks up to
// the stop saw it running the image's sh, not stopped, untraced, and its
// file (the task user's, writable) grow at the writer's pace, never
// dated after the look; the stop's receipt reached it; and its file
// after close keeps the writer's cadence up to the stop. The file
// alone, written by hand, fails it; so does a writer the harness stopped,
// one under another executable, a file written in a burst or read-only.
// writer_stopped wants the file's size unchanged after close: grown,
// shrunk or gone fail.
func TestWriterCheckRules(t *testing.T) {
	stop := time.Unix(1_800_000_020, 500)
	proc := writerProc(81)
	content := writerLines(1_800_000_005, 150)
	// The looks: at the stall, 0.6 s later, and a timeout's before its
	// deadline; one at the stop's hold (state T), past the cutoff.
	held := writerSight(20, 150)
	held.proc.State = "T"
	sights := []writerLook{writerSight(5, 1), writerSight(5.6, 6), writerSight(15, 100), held}
	good := writerSeen{state: writerRan, uid: 1000, present: true, content: content, atClose: int64(len(content)), then: int64(len(content)), stopAt: stop,
		lookCutoff: stop.Add(-lookMargin), readAt: stop.Add(time.Second),
		witness: writerWitness{proc: proc, at: time.Unix(1_800_000_005, 0), looks: 4, sights: sights}, reached: []witness.Member{{PID: 81, StartTime: 810, Comm: "sh"}}}
	look := func(i int, bend func(*writerLook)) func(*writerSeen) {
		return func(w *writerSeen) {
			w.witness.sights = slices.Clone(w.witness.sights)
			p := w.witness.sights[i].proc
			if p.Detail != nil {
				d := *p.Detail
				p.Detail = &d
			}
			w.witness.sights[i].proc = p
			bend(&w.witness.sights[i])
		}
	}
	lines := func(ns ...int) func(*writerSeen) {
		return func(w *writerSeen) {
			w.witness.sights = nil
			for i, n := range ns {
				w.witness.sights = append(w.witness.sights, writerSight([]float64{5, 5.6, 15}[i], n))
			}
		}
	}
	looks := func(ls ...writerLook) func(*writerSeen) {
		return func(w *writerSeen) { w.witness.sights = ls }
	}
	// A burst of lines dated in the past (none after the look).
	burst := writerSight(5.6, 400)
	burst.file.LastLine = "399 1800000005"
	for _, tc := range []struct {
		name             string
		bend             func(*writerSeen)
		started, stopped reports.Status
		says             string // in writer_started's detail
	}{
		{"ran from the stall to the stop, then still", func(*writerSeen) {}, reports.StatusPassed, reports.StatusPassed, "lists it as reached"},
		{"first line in the stop's second", func(w *writerSeen) { w.content = "0 1800000020\n" }, reports.StatusPassed, reports.StatusPassed, "1 line(s)"},
		{"a cancel's looks: every one judged", func(w *writerSeen) {
			w.lookCutoff, w.witness.sights = time.Time{}, sights[:3]
		}, reports.StatusPassed, reports.StatusPassed, "the writer running the image's sh throughout"},
		{"grew after close: it survived", func(w *writerSeen) { w.then += 13 }, reports.StatusPassed, reports.StatusFailed, ""},
		{"shrank after close", func(w *writerSeen) { w.then -= 13 }, reports.StatusPassed, reports.StatusFailed, ""},
		{"gone after close", func(w *writerSeen) { w.then, w.thenGone = 0, true }, reports.StatusPassed, reports.StatusFailed, ""},
		{"first line after the stop", func(w *writerSeen) { w.content = "0 1800000021\n" }, reports.StatusFailed, reports.StatusFailed, "no line before the stop"},
		{"never wrote", func(w *writerSeen) { w.present, w.content, w.atClose, w.then = false, "", 0, 0 }, reports.StatusFailed, reports.StatusFailed, "not there"},
		{"not the writer's lines", func(w *writerSeen) { w.content = "hello\n" }, reports.StatusFailed, reports.StatusFailed, "not \"0 EPOCH\""},
		{"lines not numbered from 0 in order", func(w *writerSeen) { w.content = "0 1800000005\n2 1800000005\n" }, reports.StatusFailed, reports.StatusFailed, "line 2"},
		{"a time that goes back", func(w *writerSeen) { w.content = "0 1800000009\n1 1800000005\n" }, reports.StatusFailed, reports.StatusFailed, "back in time"},
		{"a line dated after the owner read the file", func(w *writerSeen) {
			w.content = writerLines(1_800_000_005, 150) + "150 1800000099\n"
		}, reports.StatusFailed, reports.StatusFailed, "after the owner read the file"},
		{"twelve lines in one second", func(w *writerSeen) { w.content = writerLines(1_800_000_019, 10) + "10 1800000019\n11 1800000019\n" }, reports.StatusFailed, reports.StatusFailed, "faster than the writer writes"},
		{"the file written by hand, no writer seen", func(w *writerSeen) {
			w.content, w.witness = "0 1800000005\n", writerWitness{looks: 100, others: []string{"miniagent"}}
		}, reports.StatusFailed, reports.StatusFailed, "saw no process of uid 1000 running the writer's command"},
		{"the writer's whole file by hand, no writer seen", func(w *writerSeen) { w.witness = writerWitness{looks: 100} }, reports.StatusFailed, reports.StatusFailed, "saw no process"},
		{"no writer among many processes", func(w *writerSeen) {
			w.witness = writerWitness{looks: 1, others: strings.Fields(strings.Repeat("sh ", 300))}
		}, reports.StatusFailed, reports.StatusFailed, "sh, sh and 290 more"},
		{"the writer seen, its file one line by hand", func(w *writerSeen) { w.content = "0 1800000001\n" }, reports.StatusFailed, reports.StatusFailed, "want at least 18"},
		{"the writer stopped long before the stop", func(w *writerSeen) { w.content = writerLines(1_800_000_001, 30) }, reports.StatusFailed, reports.StatusFailed, "within 5s"},
		{"the stop did not reach it", func(w *writerSeen) { w.reached = []witness.Member{{PID: 81, StartTime: 811}} }, reports.StatusFailed, reports.StatusFailed, "does not list it"},
		{"no reached list", func(w *writerSeen) { w.reached, w.reachedErr = nil, fmt.Errorf("no receipt") }, reports.StatusFailed, reports.StatusFailed, "no receipt"},
		{"no shell tool", func(w *writerSeen) { w.state, w.whyNot = writerNoShell, "no shell tool (tools: read)" }, reports.StatusSkipped, reports.StatusSkipped, "no shell tool"},
		{"the harness never got to the writer", func(w *writerSeen) { w.state, w.whyNot = writerNotReached, "0 model request(s)" }, reports.StatusFailed, reports.StatusFailed, "never started"},
		// The owner's looks (writerWitness.judge).
		{"no look kept", func(w *writerSeen) { w.witness.sights = nil }, reports.StatusFailed, reports.StatusFailed, "no look of the owner's saw it before the stop"},
		{"every look at the stop or after", func(w *writerSeen) { w.lookCutoff = time.Unix(1_800_000_004, 0) }, reports.StatusFailed, reports.StatusFailed, "no look of the owner's saw it"},
		{"SIGSTOPped at a look", look(1, func(l *writerLook) { l.proc.State = "T" }), reports.StatusFailed, reports.StatusFailed, "stopped (state T) (1 of 3 looks)"},
		{"in a tracing stop at a look", look(2, func(l *writerLook) { l.proc.State = "t" }), reports.StatusFailed, reports.StatusFailed, "stopped (state t)"},
		{"dead at a look", look(2, func(l *writerLook) { l.proc.State = "Z" }), reports.StatusFailed, reports.StatusFailed, "dead (state Z)"},
		{"gone from a look", look(2, func(l *writerLook) { l.proc = probe.Process{} }), reports.StatusFailed, reports.StatusFailed, "gone from the process table"},
		{"traced, running", look(1, func(l *writerLook) { l.proc.Detail.TracerPID = 77 }), reports.StatusFailed, reports.StatusFailed, "traced (TracerPid 77)"},
		{"another executable under the writer's command line", look(0, func(l *writerLook) { l.proc.Detail.Exe = "/task/.rt/rtwriter" }), reports.StatusFailed, reports.StatusFailed,
			`executable "/task/.rt/rtwriter", not the image's sh ("/usr/bin/dash")`},
		{"the image's sh not resolved", look(0, func(l *writerLook) { l.sh = "" }), reports.StatusFailed, reports.StatusFailed, "not the image's sh"},
		{"its detail unread", look(0, func(l *writerLook) { l.proc.Detail = nil }), reports.StatusFailed, reports.StatusFailed, "unread"},
		{"another uid at a look", look(1, func(l *writerLook) { l.proc.UID = 1001 }), reports.StatusFailed, reports.StatusFailed, "uid 1001"},
		{"its file read-only", look(1, func(l *writerLook) { l.file.File = &probe.FileID{UID: 1000, Mode: syscall.S_IFREG | 0o444} }), reports.StatusFailed, reports.StatusFailed, "read-only to its owner (mode 0444)"},
		{"its file another uid's", look(1, func(l *writerLook) { l.file.File = &probe.FileID{UID: 0, Mode: syscall.S_IFREG | 0o644} }), reports.StatusFailed, reports.StatusFailed, "owned by uid 0"},
		{"its file's owner unread", look(1, func(l *writerLook) { l.file.File = nil }), reports.StatusFailed, reports.StatusFailed, "owner and mode unread"},
		{"its file unread at a look", look(1, func(l *writerLook) { l.file.Error = "a symbolic link" }), reports.StatusFailed, reports.StatusFailed, "its file unread"},
		{"its file over the probe's cap", look(2, func(l *writerLook) { l.file.OverCap = true }), reports.StatusFailed, reports.StatusFailed, "over the probe's cap"},
		{"a last line dated after the look", look(0, func(l *writerLook) { l.file.LastLine = "0 1800000099" }), reports.StatusFailed, reports.StatusFailed, "after the look that read it"},
		{"a last line misnumbered", look(1, func(l *writerLook) { l.file.LastLine = "3 1800000005" }), reports.StatusFailed, reports.StatusFailed, "numbered 3 in 6 lines"},
		{"a last line not the writer's", look(1, func(l *writerLook) { l.file.LastLine = "hello" }), reports.StatusFailed, reports.StatusFailed, "is not \"N EPOCH\""},
		{"written in a burst between two looks", looks(writerSight(5, 1), burst), reports.StatusFailed, reports.StatusFailed, "faster than the writer writes"},
		{"written before the first look, then still", lines(150, 150, 150), reports.StatusFailed, reports.StatusFailed, "did not grow"},
		{"growing too little for the looks to show it", lines(1, 2), reports.StatusFailed, reports.StatusFailed, "did not grow"},
		{"growing at the stall, then far too slowly", lines(1, 6, 8), reports.StatusFailed, reports.StatusFailed, "want 10 (a line a second)"},
		{"shrank between two looks", looks(writerSight(5, 1), writerSight(5.6, 6), writerSight(6.2, 4)), reports.StatusFailed, reports.StatusFailed, "shrank from 6 to 4"},
	} {
		w := good
		tc.bend(&w)
		cs := writerChecks(w)
		if len(cs) != 2 || cs[0].ID != "scenario.writer_started" || cs[1].ID != "scenario.writer_stopped" {
			t.Fatalf("%s: checks %+v", tc.name, cs)
		}
		if cs[0].Status != tc.started || cs[1].Status != tc.stopped {
			t.Errorf("%s: started %s (%s), stopped %s (%s); want %s, %s", tc.name, cs[0].Status, cs[0].Detail, cs[1].Status, cs[1].Detail, tc.started, tc.stopped)
		}
		if !strings.Contains(cs[0].Detail, tc.says) {
			t.Errorf("%s: writer_started's detail %q does not say %q", tc.name, cs[0].Detail, tc.says)
		}
	}
}

// isWriter knows the writer by what the probe read as root: a live
// process of the task user whose command line is sh -c and the writer's
// own loop, whole. A process carrying the writer's mark in another
// command, the setsid before its exec, another uid's, a cut command
// line, a zombie and an unread detail are not it.
func TestIsWriter(t *testing.T) {
	for _, tc := range []struct {
		name string
		bend func(*probe.Process)
		want bool
	}{
		{"the writer", func(*probe.Process) {}, true},
		{"BusyBox's sh", func(p *probe.Process) { p.Detail.Exe = "/bin/busybox" }, true},
		{"the mark in another command", func(p *probe.Process) { p.Detail.Cmdline[2] = ": sandproof-writer; sleep 100" }, false},
		{"the loop inside a longer command", func(p *probe.Process) { p.Detail.Cmdline[2] += "; true" }, false},
		{"setsid before its exec", func(p *probe.Process) { p.Detail.Cmdline = append([]string{"setsid"}, p.Detail.Cmdline...) }, false},
		{"not -c", func(p *probe.Process) { p.Detail.Cmdline[1] = "-x" }, false},
		{"another uid", func(p *probe.Process) { p.UID = 0 }, false},
		{"a cut command line", func(p *probe.Process) { p.Detail.CmdlineCut = true }, false},
		{"a zombie", func(p *probe.Process) { p.State = "Z" }, false},
		{"no detail read", func(p *probe.Process) { p.Detail = nil }, false},
	} {
		p := writerProc(90)
		tc.bend(&p)
		if got := isWriter(p, 1000); got != tc.want {
			t.Errorf("%s: isWriter %t, want %t", tc.name, got, tc.want)
		}
	}
}

// The stop's time for the writer's cadence: the deadline when it came
// before the launch ended (a harness that outlived its TERM's grace ends
// later than its writer), else the receipt's end.
func TestStopBegan(t *testing.T) {
	rec := &reports.Receipt{Extra: map[string]json.RawMessage{
		"started_at": json.RawMessage(`"2026-12-04T22:51:06.5Z"`), "ended_at": json.RawMessage(`"2026-12-04T22:51:56.5Z"`)}}
	ev := &reports.Evidence{ActivationReceipt: rec, LaunchDeadlineSeconds: 40}
	if got := stopBegan(ev); !got.Equal(time.Date(2026, 12, 4, 22, 51, 46, 5e8, time.UTC)) {
		t.Errorf("deadline 40 s: %s, want started_at + 40 s", got)
	}
	ev.LaunchDeadlineSeconds = 120
	if got := stopBegan(ev); !got.Equal(time.Date(2026, 12, 4, 22, 51, 56, 5e8, time.UTC)) {
		t.Errorf("deadline past the end: %s, want ended_at", got)
	}
	// Brought forward at the stall: the receipt's deadline_seconds, not
	// the launch's ceiling.
	rec.Extra["deadline_seconds"] = json.RawMessage(`7.25`)
	if got := stopBegan(ev); !got.Equal(time.Date(2026, 12, 4, 22, 51, 13, 75e7, time.UTC)) {
		t.Errorf("deadline brought forward to 7.25 s: %s, want started_at + 7.25 s", got)
	}
}

func TestPartialTranscriptRules(t *testing.T) {
	calls := []model.Call{{Seq: 1, Reply: "read_challenge"}, {Seq: 2, Reply: "start_writer"}, {Seq: 3, Reply: "stall"}, {Seq: 0, Path: "/v1/models"}}
	good := transcriptSeen{calls: calls, relayCalls: 3, records: 2, eventLines: 40, roundTripped: true, gaps: []string{}}
	for _, tc := range []struct {
		name string
		bend func(*transcriptSeen)
		want reports.Status
	}{
		{"kept up to the stall", func(*transcriptSeen) {}, reports.StatusPassed},
		{"the model never stalled", func(s *transcriptSeen) { s.calls = calls[:2] }, reports.StatusFailed},
		{"the relay lost a call", func(s *transcriptSeen) { s.relayCalls = 2 }, reports.StatusFailed},
		{"the challenge never came back", func(s *transcriptSeen) { s.roundTripped = false }, reports.StatusFailed},
		{"the captures gave nothing", func(s *transcriptSeen) { s.records, s.eventLines = 0, 0 }, reports.StatusFailed},
		{"the result could not be read", func(s *transcriptSeen) { s.gaps = []string{capture.GapResult} }, reports.StatusFailed},
	} {
		s := good
		tc.bend(&s)
		if c := partialTranscriptCheck(s); c.ID != "scenario.partial_transcript" || c.Status != tc.want {
			t.Errorf("%s: %s %s (%s), want %s", tc.name, c.ID, c.Status, c.Detail, tc.want)
		}
	}
}

// serviceProc is the owner's service as the probe lists it: uid 65534's
// sleep, with its detail.
func serviceProc() probe.Process {
	return probe.Process{PID: 40, StartTime: 400, Comm: "sleep", State: "S", UID: 65534,
		Detail: &probe.Detail{GID: 65534, Cmdline: []string{"sleep", "1799"}, Exe: "/usr/bin/sleep"}}
}

// borrowed on the in-memory sandbox: the owner's service in the process
// table after close as it started (same process, alive, not stopped,
// untraced, same executable and command line) and its state as written
// pass scenario.borrowed_kept, and the service is not a new process of
// the harness's; each way of losing, stopping or hijacking the service,
// or changing its state, fails it.
func TestBorrowedRules(t *testing.T) {
	svc := serviceProc()
	state := "owner task state 1\n"
	sum := sha256.Sum256([]byte(state))
	stateID := probe.FileID{UID: 65534, GID: 65534, Dev: 77, Inode: 901, Mode: syscall.S_IFREG | 0o644}
	for _, tc := range []struct {
		name string
		bend func(w *world, in *verifyInput)
		want reports.Status
		says string
	}{
		{"service alive, state intact", func(*world, *verifyInput) {}, reports.StatusPassed, "kept after close: true"},
		{"the stop killed the service", func(w *world, _ *verifyInput) { w.sb.procs = w.sb.procs[:1] }, reports.StatusFailed, "gone"},
		{"the service is a zombie", func(w *world, _ *verifyInput) { w.sb.procs[1].State = "Z" }, reports.StatusFailed, "dead"},
		{"another process reuses its pid", func(w *world, _ *verifyInput) { w.sb.procs[1].StartTime = 401 }, reports.StatusFailed, "gone"},
		{"SIGSTOPped", func(w *world, _ *verifyInput) { w.sb.procs[1].State = "T" }, reports.StatusFailed, "stopped (state T)"},
		{"held in a tracing stop", func(w *world, _ *verifyInput) {
			w.sb.procs[1].State, w.sb.procs[1].Detail.TracerPID = "t", 77
		}, reports.StatusFailed, "stopped (state t)"},
		{"traced, running", func(w *world, _ *verifyInput) { w.sb.procs[1].Detail.TracerPID = 77 }, reports.StatusFailed, "traced (TracerPid 77)"},
		{"made to exec another program, name and arguments kept", func(w *world, _ *verifyInput) { w.sb.procs[1].Detail.Exe = "/task/.h/sleep" }, reports.StatusFailed, "executable"},
		{"made to exec with other arguments", func(w *world, _ *verifyInput) {
			w.sb.procs[1].Detail.Cmdline = []string{"sh", "-c", "writer"}
		}, reports.StatusFailed, "command line"},
		{"another uid", func(w *world, _ *verifyInput) { w.sb.procs[1].UID = 1000 }, reports.StatusFailed, "uid 1000"},
		{"its detail not read after close", func(_ *world, in *verifyInput) { in.detailUIDs = nil }, reports.StatusFailed, "not read"},
		{"its executable unreadable", func(w *world, _ *verifyInput) {
			w.sb.procs[1].Detail.Exe, w.sb.procs[1].Detail.Error = "", "readlink: permission denied"
		}, reports.StatusFailed, "unread"},
		{"the state was rewritten", func(w *world, _ *verifyInput) { w.sb.write(borrowedState, "clobbered") }, reports.StatusFailed, "unchanged: false"},
		{"the state was removed", func(w *world, _ *verifyInput) { w.sb.remove(borrowedState) }, reports.StatusFailed, "missing"},
		// The red team's: cp $f /task/.s && rm -f $f && mv /task/.s $f, as
		// the task user, who may write /task: the same bytes, the
		// harness's file.
		{"the state was replaced with its own bytes", func(w *world, _ *verifyInput) {
			w.sb.identify(borrowedState, probe.FileID{UID: 1000, GID: 1000, Dev: 77, Inode: 902, Mode: syscall.S_IFREG | 0o644})
		}, reports.StatusFailed, "owner 1000:1000, was 65534:65534; another file (inode 902 on device 77, was 901 on 77): replaced"},
		{"the state was put back as another file of the owner's", func(w *world, _ *verifyInput) {
			w.sb.identify(borrowedState, probe.FileID{UID: 65534, GID: 65534, Dev: 77, Inode: 903, Mode: syscall.S_IFREG | 0o644})
		}, reports.StatusFailed, "another file (inode 903"},
		{"the state's group changed", func(w *world, _ *verifyInput) {
			w.sb.identify(borrowedState, probe.FileID{UID: 65534, GID: 1000, Dev: 77, Inode: 901, Mode: syscall.S_IFREG | 0o644})
		}, reports.StatusFailed, "owner 65534:1000, was 65534:65534"},
		{"the state's mode changed", func(w *world, _ *verifyInput) {
			w.sb.identify(borrowedState, probe.FileID{UID: 65534, GID: 65534, Dev: 77, Inode: 901, Mode: syscall.S_IFREG | 0o666})
		}, reports.StatusFailed, "mode 100666, was 100644"},
		{"which file the state is not read", func(w *world, _ *verifyInput) { delete(w.sb.ids, borrowedState) }, reports.StatusFailed, "which file it is was not read"},
	} {
		w := cleanWorld(t)
		now := serviceProc()
		w.sb.spawn(now)
		w.sb.write(borrowedState, state)
		w.sb.identify(borrowedState, stateID)
		cr := &caseRun{r: &runner{opts: Options{TaskHome: ruleHome}}, ev: &reports.Evidence{Status: reports.StatusUnknown}}
		in := verifyInput{before: w.before, allMarkers: append(slices.Clone(ruleMarkers), ruleReq), markers: ruleMarkers,
			sessDir: ruleSession, proof: w.proof, allowed: cr.allowed(), ownerProcs: []witness.ID{svc.ID()}, scenarioPaths: []string{borrowedState},
			detailUIDs: scenario(t, ScenarioBorrowed).detailUIDs(1000)}
		tc.bend(w, &in)
		v, err := cr.verify(context.Background(), memDiffer{w.sb}, in)
		if err != nil {
			t.Fatalf("%s: verify: %v", tc.name, err)
		}
		// A process on the service's pid with another start time is not
		// the owner's: it is new.
		if st, detail := statusOf(cr.ev, "verify.no_new_processes"); st != reports.StatusPassed && !strings.Contains(tc.name, "reuses") {
			t.Errorf("%s: verify.no_new_processes %s (%s): the owner's service counted as the harness's", tc.name, st, detail)
		}
		b := borrowedAfter(borrowedSeen{service: "40/400 sleep", started: svc, stateBefore: hex.EncodeToString(sum[:]), stateWas: &stateID}, v.after)
		if c := borrowedCheck(b); c.ID != "scenario.borrowed_kept" || c.Status != tc.want || !strings.Contains(c.Detail, tc.says) {
			t.Errorf("%s: %s %s (%s), want %s saying %q", tc.name, c.ID, c.Status, c.Detail, tc.want, tc.says)
		}
	}
	// The service never found (no process recorded at the start) is not
	// kept, whatever the table holds.
	if c := borrowedCheck(borrowedSeen{stateBefore: "x", stateAfter: "x"}); c.Status != reports.StatusFailed {
		t.Errorf("no service found at the start: %s (%s), want failed", c.Status, c.Detail)
	}
}

// The owner's task state is looked at before the launch (the positive
// control of what borrowed_kept compares after close): the probe read
// it, as written, a regular file 0644 of the service's uid and gid.
// Anything else fails setup.borrowed.
func TestBorrowedStateAsWritten(t *testing.T) {
	sum := "5e1f"
	good := probe.FileID{UID: 65534, GID: 65534, Dev: 77, Inode: 901, Mode: syscall.S_IFREG | 0o644}
	with := func(f func(*probe.FileID)) *probe.FileID { id := good; f(&id); return &id }
	if err := stateAsWritten(probe.Marker{Path: borrowedState, SHA256: sum, File: &good}, sum, 65534); err != nil {
		t.Fatalf("the state as written: %v", err)
	}
	for name, m := range map[string]probe.Marker{
		"the task user's":  {SHA256: sum, File: with(func(id *probe.FileID) { id.UID, id.GID = 1000, 1000 })},
		"another group":    {SHA256: sum, File: with(func(id *probe.FileID) { id.GID = 1000 })},
		"writable by all":  {SHA256: sum, File: with(func(id *probe.FileID) { id.Mode = syscall.S_IFREG | 0o666 })},
		"other bytes":      {SHA256: "0bad", File: &good},
		"its file unread":  {SHA256: sum},
		"missing":          {Missing: true},
		"read with errors": {Error: "permission denied", File: &good},
	} {
		m.Path = borrowedState
		if err := stateAsWritten(m, sum, 65534); err == nil || !strings.Contains(err.Error(), "not as written") {
			t.Errorf("%s: %v, want the state not as written", name, err)
		}
	}
}

// borrowed's setup on the in-memory sandbox: the owner uploads its state
// as the service's uid, starts the service, and one snapshot finds the
// service and reads which file the state is (owner, inode, mode), which
// borrowed_kept compares after close: the state left alone passes, the
// same bytes put back by the task user fail, naming the owner and the
// file.
func TestBorrowLooksAtTheStateItWrote(t *testing.T) {
	sb := newMemSandbox(nil)
	sb.execs["/bin/sh -c"] = func(spec provider.ExecSpec) (provider.ExecResult, error) {
		if spec.User != "65534:65534" || !strings.Contains(spec.Argv[2], "setsid sleep 1799") {
			return provider.ExecResult{ExitCode: 1}, nil
		}
		sb.procs = append(sb.procs, serviceProc()) // Exec holds the lock
		return provider.ExecResult{}, nil
	}
	cr := &caseRun{r: &runner{}, ev: &reports.Evidence{Status: reports.StatusUnknown}, owner: ownerPaths{uid: 1000, gid: 1000}}
	bx, err := cr.borrow(context.Background(), sandboxed{sb: sb})
	if err != nil {
		t.Fatalf("borrow: %v (checks %+v)", err, cr.ev.Checks)
	}
	if st, detail := statusOf(cr.ev, "setup.borrowed"); st != reports.StatusPassed {
		t.Fatalf("setup.borrowed %s (%s)", st, detail)
	}
	was := cr.borrowed.stateWas
	if was == nil || was.UID != 65534 || was.GID != 65534 || was.Mode != syscall.S_IFREG|0o644 || len(bx.ownerProcs) != 1 {
		t.Fatalf("the state as set up: %v, owner's processes %v; want the file of 65534:65534, 0644, and the service", was, bx.ownerProcs)
	}
	after := func() afterClose {
		s := sb.probeLocked([]string{probePath, "snapshot", "--markers", borrowedState, "--detail-uids", "65534"})
		a := afterClose{snap: s, seen: map[string]probe.Marker{}}
		for _, m := range s.Markers {
			a.seen[m.Path] = m
		}
		return a
	}
	if c := borrowedCheck(borrowedAfter(cr.borrowed, after())); c.Status != reports.StatusPassed {
		t.Errorf("the state left alone: %s (%s), want passed", c.Status, c.Detail)
	}
	content := sb.files[borrowedState]
	sb.remove(borrowedState)
	if err := sb.Upload(context.Background(), borrowedState, strings.NewReader(content), int64(len(content)), 0o644, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if c := borrowedCheck(borrowedAfter(cr.borrowed, after())); c.Status != reports.StatusFailed || !strings.Contains(c.Detail, "owner 1000:1000, was 65534:65534") || !strings.Contains(c.Detail, "replaced") {
		t.Errorf("the state put back by the task user: %s (%s), want failed naming the owner and the file", c.Status, c.Detail)
	}
}

// The owner's service runs as another uid than the task user's, so the
// harness can neither signal nor ptrace it; verify's snapshot details
// that uid, and only borrowed asks for it.
func TestServiceUIDIsNotTheTaskUsers(t *testing.T) {
	for _, task := range []int{1000, 65534, 0} {
		if u := serviceUID(task); u == task || u == 0 {
			t.Errorf("task uid %d: service uid %d, want another, not root", task, u)
		}
	}
	if got := scenario(t, ScenarioBorrowed).detailUIDs(1000); !slices.Equal(got, []int{65534}) {
		t.Errorf("borrowed details %v, want [65534]", got)
	}
	if got := scenario(t, ScenarioTimeout).detailUIDs(1000); got != nil {
		t.Errorf("timeout details %v, want none", got)
	}
}

// readWriter on the in-memory sandbox: a writer that stopped leaves its
// file's size still between verify's snapshot and the one a second
// later; one that survived grows it (the probe's snapshot is scripted to
// append a line each time it looks, as a live writer would), and
// scenario.writer_stopped names it.
func TestReadWriterSeesASurvivingWriter(t *testing.T) {
	for _, survived := range []bool{false, true} {
		sb := newMemSandbox(map[string]string{writerFile: "0 1800000000\n"})
		sb.execs[probePath+" snapshot"] = func(spec provider.ExecSpec) (provider.ExecResult, error) {
			if survived {
				sb.files[writerFile] += "1 1800000000\n" // sb.mu is held by Exec
			}
			var paths []string
			if i := slices.Index(spec.Argv, "--markers"); i >= 0 {
				paths = strings.Split(spec.Argv[i+1], ",")
			}
			snap := sb.snapshotLocked(paths)
			sb.linesLocked(&snap, spec.Argv)
			out, err := json.Marshal(snap)
			return provider.ExecResult{Stdout: out}, err
		}
		first, err := snapshot(context.Background(), sb, []string{writerFile})
		if err != nil {
			t.Fatal(err)
		}
		a := afterClose{snap: first, seen: map[string]probe.Marker{}}
		for _, m := range first.Markers {
			a.seen[m.Path] = m
		}
		proc := writerProc(61)
		cr := &caseRun{r: &runner{}, ev: &reports.Evidence{CloseReceipt: &reports.Receipt{Extra: reachedJSON(proc)}}, owner: ownerPaths{uid: 1000}}
		calls := []model.Call{{Seq: 1, Reply: "read_challenge"}, {Seq: 2, Reply: "start_writer"}, {Seq: 3, Reply: "stall"}}
		// The cancel's looks saw the writer's first lines, in the second
		// before the stop; its later look reads the sandbox's clock.
		sb.now = func() time.Time { return time.Unix(1_800_000_002, 0) }
		look1, look2 := writerSight(0, 1), writerSight(0.6, 4)
		for i, l := range []*writerLook{&look1, &look2} {
			l.at, l.proc = time.Unix(1_800_000_000, 0).Add(time.Duration(i)*600*time.Millisecond), proc
			l.file.LastLine = fmt.Sprintf("%d 1800000000", l.file.Lines-1)
		}
		w, err := cr.readWriter(context.Background(), sb, calls, verified{after: a},
			activationResult{cancelled: time.Unix(1_800_000_001, 0), writer: writerWitness{proc: proc, at: time.Unix(1_800_000_000, 0), looks: 2, sights: []writerLook{look1, look2}}})
		if err != nil {
			t.Fatal(err)
		}
		cs := writerChecks(w)
		want := reports.StatusPassed
		if survived {
			want = reports.StatusFailed
		}
		if cs[0].Status != reports.StatusPassed || cs[1].Status != want {
			t.Errorf("survived %t: started %s (%s), stopped %s (%s); want passed, %s", survived, cs[0].Status, cs[0].Detail, cs[1].Status, cs[1].Detail, want)
		}
		if survived && !strings.Contains(cs[1].Detail, "survived") {
			t.Errorf("the survivor is not named: %q", cs[1].Detail)
		}
	}
}

// writerCalled: the writer counts as started once a request came after
// the model asked for it (the harness ran the call); a harness with no
// shell tool is named with its tools.
func TestWriterCalled(t *testing.T) {
	for _, tc := range []struct {
		calls []model.Call
		want  writerState
		why   string
	}{
		{[]model.Call{{Seq: 1, Reply: "read_challenge", ToolNames: []string{"read", "bash"}}, {Seq: 2, Reply: "start_writer"}, {Seq: 3, Reply: "stall"}}, writerRan, ""},
		{[]model.Call{{Seq: 1, Reply: "read_challenge"}, {Seq: 2, Reply: "start_writer"}}, writerNotReached, "request 2"},
		{[]model.Call{{Seq: 1, Reply: "read_challenge", ToolNames: []string{"read"}}, {Seq: 2, Reply: "stall", Error: model.StallNoShell + "; client went away"}}, writerNoShell, "tools: read"},
		// A stall the model did not note as shell-less (before the
		// model kept its own record, a history claiming the writer's
		// call made it stall: red team D4) is not "no shell tool".
		{[]model.Call{{Seq: 1, Reply: "read_challenge", ToolNames: []string{"read", "bash"}}, {Seq: 2, Reply: "stall", Error: "stalled after the writer started; client went away"}}, writerNotReached, "never asked for it"},
		{[]model.Call{{Seq: 0, Path: "/v1/models"}}, writerNotReached, "0 model request(s)"},
	} {
		if got, why := writerCalled(tc.calls); got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%+v: %v %q, want %v and %q", tc.calls, got, why, tc.want, tc.why)
		}
	}
}

// A timeout's looks are judged up to lookMargin before its stop (the
// receipt's deadline, on the sandbox's clock as the looks are): a look
// the stop's hold overlaps, the writer in state T, is not the harness's
// doing; one earlier is.
func TestReadWriterJudgesATimeoutsLooksBeforeItsStop(t *testing.T) {
	for _, tc := range []struct {
		heldAt float64 // the second of the look that saw the writer stopped
		want   reports.Status
	}{{19.5, reports.StatusPassed}, {17, reports.StatusFailed}} {
		content := writerLines(1_800_000_005, 150)
		sb := newMemSandbox(map[string]string{writerFile: content})
		first, err := snapshot(context.Background(), sb, []string{writerFile})
		if err != nil {
			t.Fatal(err)
		}
		// The later look's time (verify's is zero: no wait for it).
		sb.now = func() time.Time { return time.Unix(1_800_000_022, 0) }
		a := afterClose{snap: first, seen: map[string]probe.Marker{}}
		for _, m := range first.Markers {
			a.seen[m.Path] = m
		}
		proc := writerProc(81)
		extra := reachedJSON(proc)
		extra["started_at"] = json.RawMessage(`"2027-01-15T08:00:00Z"`) // 1_800_000_000
		extra["ended_at"] = json.RawMessage(`"2027-01-15T08:00:21Z"`)
		ev := &reports.Evidence{CloseReceipt: &reports.Receipt{Extra: extra}, LaunchDeadlineSeconds: 20}
		cr := &caseRun{r: &runner{}, ev: ev, owner: ownerPaths{uid: 1000}}
		held := writerSight(tc.heldAt, int(tc.heldAt-5)*10)
		held.proc.State = "T"
		sights := []writerLook{writerSight(5, 1), writerSight(5.6, 6), writerSight(15, 100), held}
		calls := []model.Call{{Seq: 1, Reply: "read_challenge"}, {Seq: 2, Reply: "start_writer"}, {Seq: 3, Reply: "stall"}}
		w, err := cr.readWriter(context.Background(), sb, calls, verified{after: a},
			activationResult{writer: writerWitness{proc: proc, at: time.Unix(1_800_000_005, 0), looks: 4, sights: sights}})
		if err != nil {
			t.Fatal(err)
		}
		if !w.stopAt.Equal(time.Unix(1_800_000_020, 0)) {
			t.Fatalf("stop at %s, want the receipt's deadline", w.stopAt)
		}
		if c := writerChecks(w)[0]; c.Status != tc.want {
			t.Errorf("the writer stopped at a look %gs before the stop: writer_started %s (%s), want %s", 20-tc.heldAt, c.Status, c.Detail, tc.want)
		}
	}
}
