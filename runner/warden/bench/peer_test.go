package bench

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/warden/launch"
	"github.com/sandproof/sandproof/runner/warden/proc"
)

// peerScript is the field's standard-library Python supervisor (see its
// doc string): the baseline of the peer rows.
const peerScript = "../../../fixtures/peer/peer.py"

// runTokenVar is set in the supervisor's environment, so every process of
// the run inherits it: what still carries it after the supervisor exited is
// a leftover.
const runTokenVar = "PROCTREE_RUN"

// supervisorKind is the supervisor a peer row runs.
type supervisorKind string

const (
	wardenSup supervisorKind = "warden"
	peerSup   supervisorKind = "peer"
)

// peerRun is one run of a shape under one supervisor.
type peerRun struct {
	sup      supervisorKind
	args     []string // proctree's arguments, without --ready
	exit0    bool     // the harness exits 0 after starting its tool; else the deadline stops it
	deadline time.Duration
	grace    string
	// minReached is the least warden's receipt must show reached.
	minReached int
}

// wardenView is what the peer rows read from warden's receipt.
type wardenView struct {
	CleanupConfirmed bool              `json:"cleanup_confirmed"`
	TimedOut         bool              `json:"timed_out"`
	Reached          []json.RawMessage `json:"reached"`
	StartedAt        string            `json:"started_at"`
	DeadlineSeconds  float64           `json:"deadline_seconds"`
}

// peerView is the peer's one line.
type peerView struct {
	DeadlineAtNS int64 `json:"deadline_at_ns"`
	TimedOut     bool  `json:"timed_out"`
}

// run runs the shape in the foreground under the supervisor and returns
// the time from the stop's cause to the supervisor's exit, read by this
// process: from the deadline's instant (the receipt's started_at plus its
// deadline_seconds for warden, the instant the peer printed for it) for a
// timed-out harness, from the instant the harness wrote just before its
// exit 0 otherwise. It fails when the tool never started or anything of
// the run outlived its supervisor.
func (p peerRun) run(tb testing.TB) time.Duration {
	d, _ := p.runPhases(tb)
	return d
}

// runPhases is run, with warden's stop phases (stopPhases; nil for the
// peer).
func (p peerRun) runPhases(tb testing.TB) (time.Duration, map[string]float64) {
	tb.Helper()
	dir := tb.TempDir()
	ready := filepath.Join(dir, "ready")
	state := filepath.Join(dir, "state")
	token := make([]byte, 8)
	rand.Read(token)
	tok := hex.EncodeToString(token)
	harness := append([]string{bin.proctree}, p.args...)
	harness = append(harness, "--ready", ready)
	if p.exit0 {
		harness = append(harness, "--exit0")
	}
	secs := strconv.FormatFloat(p.deadline.Seconds(), 'f', -1, 64)
	var cmd *exec.Cmd
	switch p.sup {
	case wardenSup:
		cmd = exec.Command(bin.warden, append([]string{"supervise", "--state", state, "--deadline", secs, "--grace", p.grace, "--"}, harness...)...)
	case peerSup:
		cmd = exec.Command("python3", append([]string{peerScript, "--deadline", secs, "--grace", p.grace, "--"}, harness...)...)
	}
	cmd.Env = append(os.Environ(), runTokenVar+"="+tok)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	err := cmd.Wait()
	end := time.Now()
	if _, rerr := os.Stat(ready); rerr != nil {
		tb.Fatalf("%s %v: the harness never said its tool runs (%v); output %s", p.sup, p.args, err, out.Bytes())
	}
	if p.sup == wardenSup {
		// The foreground front returns at the receipt; the supervisor
		// process exits just after it.
		awaitSupervisor(tb, state)
	}
	if left := carrying(tok); len(left) > 0 {
		tb.Fatalf("%s %v: %d process(es) outlived the supervisor: %v", p.sup, p.args, len(left), left)
	}
	var from time.Time
	if p.exit0 {
		data, rerr := os.ReadFile(ready + ".at")
		ns, perr := strconv.ParseInt(string(data), 10, 64)
		if rerr != nil || perr != nil {
			tb.Fatalf("%s %v: the harness's exit instant: %v %v", p.sup, p.args, rerr, perr)
		}
		from = time.Unix(0, ns)
	}
	switch p.sup {
	case wardenSup:
		data, rerr := os.ReadFile(filepath.Join(state, "receipt.json"))
		var r wardenView
		if rerr != nil || json.Unmarshal(data, &r) != nil || !r.CleanupConfirmed || r.TimedOut == p.exit0 || len(r.Reached) < p.minReached {
			tb.Fatalf("warden %v: receipt %s (%v); want confirmed, timed_out %v, >= %d reached", p.args, data, rerr, !p.exit0, p.minReached)
		}
		if !p.exit0 {
			t0, perr := time.Parse(time.RFC3339Nano, r.StartedAt)
			if perr != nil {
				tb.Fatalf("receipt started_at %q: %v", r.StartedAt, perr)
			}
			from = t0.Add(time.Duration(r.DeadlineSeconds * float64(time.Second)))
		}
	case peerSup:
		var v peerView
		if err != nil || json.Unmarshal(bytes.TrimSpace(lastLine(out.Bytes())), &v) != nil || v.TimedOut == p.exit0 {
			tb.Fatalf("peer %v: %v, output %s", p.args, err, out.Bytes())
		}
		if !p.exit0 {
			from = time.Unix(0, v.DeadlineAtNS)
		}
	}
	return end.Sub(from), stopPhases(state)
}

func lastLine(b []byte) []byte {
	b = bytes.TrimRight(b, "\n")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

// carrying lists the living processes whose environment holds the run's
// token. A process that cannot be read is listed (the safe side) unless
// it is gone or a plain zombie (its environment reads empty then).
func carrying(tok string) []string {
	fs := proc.NewFS("")
	pids, err := fs.PIDs()
	if err != nil {
		return []string{fmt.Sprintf("list /proc: %v", err)}
	}
	want := []byte(runTokenVar + "=" + tok)
	var left []string
	for _, pid := range pids {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			continue // gone, or not ours to read: no process of the run runs as another user
		}
		if bytes.Contains(env, want) {
			st, _ := fs.Stat(pid)
			left = append(left, fmt.Sprintf("%d %s %s", pid, st.Comm, string(st.State)))
		}
	}
	return left
}

// needPython ends tb when there is no python3 to run the peer.
func needPython(tb testing.TB) {
	if _, err := exec.LookPath("python3"); err != nil {
		testenv.Missing(tb, "python3 for the peer supervisor (fixtures/peer/peer.py)", "install python3")
	}
}

// peerShape is one row of BenchmarkPeerShapes.
type peerShape struct {
	name string
	run  peerRun
}

// peerShapes are the peer bench's shapes: each tool, with the harness
// timed out (a deadline stop 1 s after the start, grace 5 s) and with the
// harness exiting 0 once its tool runs.
func peerShapes() []peerShape {
	var shapes []peerShape
	for _, tool := range []string{"hopper", "writer", "daemon"} {
		args := []string{"shape", "--tool", tool}
		shapes = append(shapes,
			peerShape{tool + "-timedout", peerRun{args: args, deadline: time.Second, grace: "5", minReached: 2}},
			peerShape{tool + "-exit0", peerRun{args: args, exit0: true, deadline: 600 * time.Second, grace: "5", minReached: 1}})
	}
	return shapes
}

// BenchmarkPeerShapes: warden against the field's standard-library Python
// supervisor (fixtures/peer/peer.py), side by side in every iteration, on
// the peer bench's shapes: a hopper (a setsid'd tool that ignores TERM and
// starts a copy of itself and exits every millisecond), a writer (certify's
// setsid'd `sh -c` append loop) and a double-forked daemon, each with the
// harness timed out and with the harness exiting 0. Medians, from the
// stop's cause (the deadline, the harness's exit) to the supervisor's exit,
// nothing of the run left; the ratio warden/peer per shape. Target (issue
// 39): no row slower than today's main's warden.
func BenchmarkPeerShapes(b *testing.B) {
	needPython(b)
	shapes := peerShapes()
	w := make([][]time.Duration, len(shapes))
	p := make([][]time.Duration, len(shapes))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, s := range shapes {
			r := s.run
			r.sup = wardenSup
			w[j] = append(w[j], r.run(b))
			r.sup = peerSup
			p[j] = append(p[j], r.run(b))
		}
	}
	b.StopTimer()
	for j, s := range shapes {
		mw, mp := median(w[j]), median(p[j])
		b.ReportMetric(msOf(mw), s.name+"-warden-ms")
		b.ReportMetric(msOf(mp), s.name+"-peer-ms")
		b.ReportMetric(float64(mw)/float64(mp), s.name+"-warden/peer")
	}
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkPeerBigTree: the 1,100-process tree (half in sessions of their
// own) timed out 5 s after its start, side by side in every iteration:
// warden and the peer at the peer's policy (grace 0: no TERM to the tools),
// warden at its own (grace 5 s: every tool TERMed first), and the floor (a
// bare SIGKILL of the same tree and its reaping, bareKill). Medians, from
// the deadline to the supervisor's exit (the floor: from the first KILL to
// the last reaped). Targets (issue 39): warden at grace 0 within 1.25x of
// the peer; warden at grace 5 no worse than 2x the floor.
func BenchmarkPeerBigTree(b *testing.B) {
	needPython(b)
	args := []string{"many", "--n", "1100", "--setsid-half"}
	big := func(sup supervisorKind, grace string) peerRun {
		return peerRun{sup: sup, args: args, deadline: 5 * time.Second, grace: grace, minReached: 1100}
	}
	var w0, p0, w5, floor []time.Duration
	ph0, ph5 := phaseSums{}, phaseSums{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, ph := big(wardenSup, "0").runPhases(b)
		w0 = append(w0, d)
		ph0.add(d, ph)
		p0 = append(p0, big(peerSup, "0").run(b))
		d, ph = big(wardenSup, "5").runPhases(b)
		w5 = append(w5, d)
		ph5.add(d, ph)
		floor = append(floor, bareKill(b))
	}
	b.StopTimer()
	ph0.report(b, "grace0-")
	ph5.report(b, "grace5-")
	mw0, mp0, mw5, mf := median(w0), median(p0), median(w5), median(floor)
	b.ReportMetric(msOf(mw0), "grace0-warden-ms")
	b.ReportMetric(msOf(mp0), "grace0-peer-ms")
	b.ReportMetric(float64(mw0)/float64(mp0), "grace0-warden/peer")
	b.ReportMetric(msOf(mw5), "grace5-warden-ms")
	b.ReportMetric(msOf(mf), "floor-ms")
	b.ReportMetric(float64(mw5)/float64(mf), "grace5-warden/floor")
	b.ReportMetric(float64(mp0)/float64(mf), "grace0-peer/floor")
}

// stopPhases reads warden's log in state for the stop's phases (the line
// stop.Engine logs: "stop phases: scan 1.234 ms, term ..."), in ms by
// name; nil when there is none (a warden that does not log them).
func stopPhases(state string) map[string]float64 {
	data, err := os.ReadFile(filepath.Join(state, "supervisor.log"))
	if err != nil {
		return nil
	}
	const tag = "stop phases: "
	i := bytes.LastIndex(data, []byte(tag))
	if i < 0 {
		return nil
	}
	line, _, _ := strings.Cut(string(data[i+len(tag):]), "\n")
	out := map[string]float64{}
	for _, part := range strings.Split(line, ", ") {
		f := strings.Fields(part)
		if len(f) != 3 {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			out[f[0]] = v
		}
	}
	return out
}

// phaseSums adds up warden's stop phases over a row's runs, and the runs'
// measured times, for each phase's share of them.
type phaseSums map[string]float64

// totalKey holds the sum of the measured times.
const totalKey = ""

func (s phaseSums) add(d time.Duration, ph map[string]float64) {
	if ph == nil {
		return
	}
	s[totalKey] += msOf(d)
	for k, v := range ph {
		s[k] += v
	}
}

// report reports each phase's share of the measured time, the walk's
// (the rounds' scans) first; the rest is the supervisor's start of the
// stop, the reaping, the receipt and its exit.
func (s phaseSums) report(b *testing.B, prefix string) {
	total := s[totalKey]
	if total == 0 {
		return
	}
	for k, v := range s {
		if k != totalKey && v > 0 {
			b.ReportMetric(v/total, prefix+k+"-share")
		}
	}
}

// awaitSupervisor waits (10 s at most) for the supervisor that holds the
// state dir's claim to exit: its pidfd becomes readable then.
func awaitSupervisor(tb testing.TB, state string) {
	tb.Helper()
	c, err := launch.ReadClaim(state)
	if err != nil {
		tb.Fatalf("read the claim: %v", err)
	}
	fd, err := unix.PidfdOpen(c.PID, 0)
	if err != nil {
		return // gone already
	}
	defer unix.Close(fd)
	if st, err := proc.NewFS("").Stat(c.PID); err != nil || st.StartTime != c.StartTime {
		return // gone, its pid reused
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 10000)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			tb.Fatalf("the supervisor %d still runs 10 s after its receipt (%v)", c.PID, err)
		}
		return
	}
}
