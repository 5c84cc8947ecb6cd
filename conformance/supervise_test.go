package conformance_test

// The local conformance specs of warden supervise, stop, wait, renew and
// service (contract sections 2, 3 and 4), run against real processes on this
// host. Every harness is the adversary fixture, which records each process
// it creates by (pid, start time) and says "ready" only once all of them run,
// so each spec first proves that the processes it expects to be stopped were
// alive and visible, and then that the confirmed receipt is true: they are
// gone, checked from /proc, with no grace period after the receipt.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sandproof/sandproof/conformance/framework"
	"github.com/sandproof/sandproof/conformance/procs"
	"github.com/sandproof/sandproof/runner/witness"
)

// craftedName is the name the adversary's crafted-name role gives itself.
const craftedName = "x) S 1 1 $(>p)"

// readyTimeout bounds how long a harness may take to plant its processes.
const readyTimeout = 30 * time.Second

// launch is one spec's private state: its own temp dir holding the state
// dir (created by warden), the adversary's record file and warden's
// working directory, and the supervisor once one runs.
type launch struct {
	dir, state, record, cwd string
	supervisor              witness.ID
}

// newLaunch creates a spec's dirs and a cleanup that SIGKILLs, by identity,
// every recorded process and the supervisor the spec leaves behind.
func newLaunch() *launch {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	l := &launch{dir: dir, state: filepath.Join(dir, "state"), record: filepath.Join(dir, "record"), cwd: filepath.Join(dir, "cwd")}
	Expect(os.Mkdir(l.cwd, 0o755)).To(Succeed())
	// Runs after the kill below (cleanups run last first): a supervisor
	// killed there leaves its cgroups (tier cgroup) behind, empty.
	DeferCleanup(func() {
		var claim struct {
			LaunchID string `json:"launch_id"`
		}
		if data, err := os.ReadFile(filepath.Join(l.state, "claim")); err == nil && json.Unmarshal(data, &claim) == nil {
			witness.RemoveLaunchCgroup(claim.LaunchID)
		}
	})
	procs.KillOnCleanup(func() []witness.ID {
		ids := witness.RecordedIDs(l.record)
		if l.supervisor.PID != 0 {
			ids = append(ids, l.supervisor)
		}
		return ids
	})
	return l
}

// warden runs a warden command in the launch's working directory.
func (l *launch) warden(ctx context.Context, args ...string) procs.Result {
	GinkgoHelper()
	return procs.Warden(ctx, framework.Bin.Warden, l.cwd, args...)
}

// adversary returns the harness command line: the fixture recording into
// the launch's record file, with roles.
func (l *launch) adversary(roles ...string) []string {
	return append([]string{framework.Fixture("adversary"), "--record", l.record}, roles...)
}

// superviseArgs builds a supervise command line.
func (l *launch) superviseArgs(flags []string, command []string) []string {
	args := append([]string{"supervise", "--state", l.state}, flags...)
	return append(append(args, "--"), command...)
}

// detach starts a detached launch of the adversary with roles and checks
// what supervise --detach prints; the supervisor must be alive.
func (l *launch) detach(ctx context.Context, flags []string, roles ...string) witness.Detached {
	GinkgoHelper()
	res := l.warden(ctx, l.superviseArgs(append(flags, "--detach"), l.adversary(roles...))...)
	Expect(res.Code).To(Equal(0), "%s", res)
	d, err := witness.ParseDetached(res.Stdout)
	Expect(err).NotTo(HaveOccurred())
	Expect(filepath.Clean(d.State)).To(Equal(l.state))
	st, err := witness.Proc.ReadStat(d.SupervisorPID)
	Expect(err).NotTo(HaveOccurred(), "the supervisor_pid supervise printed does not run")
	Expect(st.Dead()).To(BeFalse(), "the supervisor is a zombie already")
	l.supervisor = st.ID()
	return d
}

// ready waits for the adversary's "ready" and proves that every process it
// planted and did not see exit is alive and visible in /proc now: the
// positive control of every "is gone" check that follows.
func (l *launch) ready(ctx context.Context) *witness.Record {
	GinkgoHelper()
	var rec *witness.Record
	Eventually(ctx, func() (bool, error) {
		var err error
		rec, err = witness.ReadRecord(l.record)
		if os.IsNotExist(err) {
			return false, nil
		}
		return err == nil && rec.Ready, err
	}).WithTimeout(readyTimeout).Should(BeTrue(), "the harness never said it was ready; %s", l.diagnose())
	for _, p := range running(rec) {
		st, err := witness.Proc.Lookup(p.ID())
		Expect(err).NotTo(HaveOccurred(), "positive control: %s %v should be alive after ready", p.Role, p.ID())
		Expect(st.Dead()).To(BeFalse(), "positive control: %s %v is a zombie already", p.Role, p.ID())
		Expect(st.Comm).To(Equal(p.Comm), "positive control: %s %v is visible under its name", p.Role, p.ID())
	}
	return rec
}

// exitByDesign are the adversary roles that end on their own: double-fork
// middles and the children left as zombies.
var exitByDesign = map[string]bool{"daemon-middle": true, "zombie-maker": true, "exit0": true, "hopper": true}

// running returns the recorded processes that should still run at ready:
// not reaped by the harness, not the ones that exit by design.
func running(rec *witness.Record) []witness.Line {
	var out []witness.Line
	for _, p := range rec.Procs {
		if _, reaped := rec.Exits[p.PID]; reaped || exitByDesign[p.Role] {
			continue
		}
		out = append(out, p)
	}
	return out
}

// diagnose returns what the state dir says, for failure messages.
func (l *launch) diagnose() string {
	var b strings.Builder
	for _, name := range []string{"stderr", "supervisor.log", witness.ReceiptFile} {
		if data, err := os.ReadFile(filepath.Join(l.state, name)); err == nil {
			b.WriteString("\n" + name + ": " + string(data))
		}
	}
	return b.String()
}

// stopWait runs `warden stop --wait`, which must exit 0 and print the
// receipt it found, identical to the file.
func (l *launch) stopWait(ctx context.Context, extra ...string) *witness.Receipt {
	GinkgoHelper()
	res := l.warden(ctx, append([]string{"stop", "--state", l.state, "--wait", "45"}, extra...)...)
	Expect(res.Code).To(Equal(0), "%s%s", res, l.diagnose())
	return l.receiptPrinted(res)
}

// waitReceipt runs `warden wait`, which must exit 0 (confirmed).
func (l *launch) waitReceipt(ctx context.Context) *witness.Receipt {
	GinkgoHelper()
	res := l.warden(ctx, "wait", "--state", l.state, "--timeout", "45")
	Expect(res.Code).To(Equal(0), "%s%s", res, l.diagnose())
	return l.receiptPrinted(res)
}

// receiptPrinted checks that a command printed the receipt in the state dir
// and returns it.
func (l *launch) receiptPrinted(res procs.Result) *witness.Receipt {
	GinkgoHelper()
	printed, err := witness.ParseReceipt([]byte(res.Stdout))
	Expect(err).NotTo(HaveOccurred(), "%s", res)
	r := l.receipt()
	Expect(printed).To(Equal(r), "the printed receipt differs from %s", witness.ReceiptFile)
	return r
}

// receipt reads and checks STATE/receipt.json, and that no temp file of its
// atomic write is left beside it.
func (l *launch) receipt() *witness.Receipt {
	GinkgoHelper()
	r, err := witness.ReadReceipt(l.state)
	Expect(err).NotTo(HaveOccurred(), "%s", l.diagnose())
	expectNoTempFiles(l.state)
	return r
}

var tempName = regexp.MustCompile(`(?i)(^\.|tmp|temp|~$|\.swp$|\.part$)`)

// expectNoTempFiles: a receipt written by temp file and rename leaves no
// temp or reserve file behind. The writer may still be removing one in the
// moment after the receipt appears, so this waits (bounded) for them to go.
func expectNoTempFiles(dir string) {
	GinkgoHelper()
	Eventually(func() ([]string, error) {
		entries, err := os.ReadDir(dir)
		var left []string
		for _, e := range entries {
			if tempName.MatchString(e.Name()) {
				left = append(left, e.Name())
			}
		}
		return left, err
	}).WithTimeout(5*time.Second).Should(BeEmpty(), "temp files left in the state dir")
}

// expectGone checks, right after a receipt that confirms cleanup, that each
// process is gone (or a zombie: dead, awaiting its reaper).
func expectGone(what string, ps ...witness.Line) {
	GinkgoHelper()
	Expect(ps).NotTo(BeEmpty(), "no %s recorded: the spec would check nothing", what)
	for _, p := range ps {
		Expect(procs.Alive(p.ID())).To(BeFalse(), "%s %s %v survived a confirmed cleanup: %s", what, p.Role, p.ID(), witness.Proc.State(p.ID()))
	}
}

// expectReached checks that the receipt lists p as reached, for one of whys.
func expectReached(r *witness.Receipt, p witness.Line, whys ...string) witness.Member {
	GinkgoHelper()
	m, ok := witness.Find(r.Reached, p.ID())
	Expect(ok).To(BeTrue(), "%s %v is not in reached: %+v", p.Role, p.ID(), r.Reached)
	Expect(m.Comm).To(Equal(p.Comm))
	if len(whys) > 0 {
		Expect(m.Why).To(BeElementOf(whys), "why %s %v was reached", p.Role, p.ID())
	}
	return m
}

// one returns the single recorded process with role.
func one(rec *witness.Record, role string) witness.Line {
	GinkgoHelper()
	ps := rec.Role(role)
	Expect(ps).To(HaveLen(1), "recorded %q processes", role)
	return ps[0]
}

// spawned returns the single child with role as its parent recorded it.
func spawned(rec *witness.Record, role string) witness.Line {
	GinkgoHelper()
	var out []witness.Line
	for _, l := range rec.Spawned {
		if l.Role == role {
			out = append(out, l)
		}
	}
	Expect(out).To(HaveLen(1), "children spawned as %q", role)
	return out[0]
}

func harness(rec *witness.Record) witness.Line {
	GinkgoHelper()
	h, err := rec.Harness()
	Expect(err).NotTo(HaveOccurred())
	return h
}

// expectOutcome checks the receipt's outcome fields.
// sharedAdversary copies the adversary fixture into a fresh world-writable
// temp dir that uid 1000 can reach (the suite's build dir is private) and
// returns the dir and the copy's path.
func sharedAdversary(prefix string) (dir, bin string) {
	GinkgoHelper()
	dir, err := os.MkdirTemp("", prefix)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	Expect(os.Chmod(dir, 0o777)).To(Succeed())
	bin = filepath.Join(dir, "adversary")
	data, err := os.ReadFile(framework.Fixture("adversary"))
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(bin, data, 0o755)).To(Succeed())
	return dir, bin
}

func expectOutcome(r *witness.Receipt, cause string, returnCode any, signal any, confirmed bool) {
	GinkgoHelper()
	Expect(r.Cause).To(Equal(cause), "cause")
	if returnCode == nil {
		Expect(r.ReturnCode).To(BeNil(), "return_code")
	} else {
		Expect(r.ReturnCode).To(HaveValue(Equal(returnCode)), "return_code")
	}
	if signal == nil {
		Expect(r.Signal).To(BeNil(), "signal")
	} else {
		Expect(r.Signal).To(HaveValue(Equal(signal)), "signal")
	}
	Expect(r.TimedOut).To(Equal(cause == "deadline"), "timed_out")
	Expect(r.Stopped).To(Equal(cause == "stopped" || cause == "fenced"), "stopped")
	Expect(r.CleanupConfirmed).To(Equal(confirmed), "cleanup_confirmed; survivors %+v", r.Survivors)
	if confirmed {
		Expect(r.Survivors).To(BeEmpty())
	}
}

var _ = Describe("warden supervise", framework.Local, func() {
	Context("on a deadline", func() {
		framework.ConformanceIt("2 stop rules", "should kill a tool that called setsid", func(ctx SpecContext) {
			l := newLaunch()
			l.detach(ctx, []string{"--deadline", "3", "--grace", "0.5"}, "setsid-tool")
			rec := l.ready(ctx)
			h, tool := harness(rec), one(rec, "setsid")
			Expect(tool.SID).To(Equal(tool.PID), "positive control: the tool leads a session of its own")
			Expect(tool.PGID).NotTo(Equal(h.PGID), "positive control: the tool left the harness's group")

			r := l.waitReceipt(ctx)
			expectOutcome(r, "deadline", 143, "TERM", true)
			expectReached(r, h, "group")
			expectReached(r, tool)
			expectGone("process", h, tool)
		})

		framework.ConformanceIt("2 stop rules", "should kill a double-forked daemon, reached as an orphan", func(ctx SpecContext) {
			l := newLaunch()
			l.detach(ctx, []string{"--deadline", "3", "--grace", "0.5"}, "daemon")
			rec := l.ready(ctx)
			h, daemon := harness(rec), one(rec, "daemon")
			st, err := witness.Proc.Lookup(daemon.ID())
			Expect(err).NotTo(HaveOccurred())
			Expect(st.PPID).To(Equal(l.supervisor.PID), "positive control: the supervisor, a subreaper, adopted the daemon")

			r := l.waitReceipt(ctx)
			expectOutcome(r, "deadline", 143, "TERM", true)
			expectReached(r, daemon, "orphan")
			expectGone("process", h, daemon)
		})
	})

	Context("on a stop request", func() {
		framework.ConformanceIt("2 stop rules", "should stop what a TERM handler starts with setsid before it exits, and report the handler's status", func(ctx SpecContext) {
			l := newLaunch()
			l.detach(ctx, []string{"--deadline", "60", "--grace", "1"}, "--term-exit", "7", "term-respawn")
			rec := l.ready(ctx)
			Expect(rec.Role("respawned")).To(BeEmpty(), "nothing respawned before the stop")

			r := l.stopWait(ctx)
			expectOutcome(r, "stopped", 7, nil, true)
			rec, err := witness.ReadRecord(l.record)
			Expect(err).NotTo(HaveOccurred())
			// Positive control: the handler saw it alive right after
			// starting it.
			respawned := spawned(rec, "respawned")
			expectReached(r, respawned)
			expectGone("process", harness(rec), respawned)
		})

		framework.ConformanceIt("2 stop rules", "should KILL a harness that ignores TERM once the grace has passed", func(ctx SpecContext) {
			l := newLaunch()
			l.detach(ctx, []string{"--deadline", "60", "--grace", "0.3"}, "ignore-term")
			rec := l.ready(ctx)
			r := l.stopWait(ctx)
			expectOutcome(r, "stopped", 137, "KILL", true)
			expectReached(r, harness(rec), "group")
			expectGone("process", harness(rec))
		})

		framework.ConformanceIt("2 stop rules", "should continue a stopped tool so that TERM ends it", func(ctx SpecContext) {
			l := newLaunch()
			// A grace far longer than the stop: a stopped tool that only
			// KILL could end would be recorded as killed, not terminated.
			l.detach(ctx, []string{"--deadline", "60", "--grace", "30"}, "stopped-tool")
			rec := l.ready(ctx)
			tool := one(rec, "stopped")
			st, err := witness.Proc.Lookup(tool.ID())
			Expect(err).NotTo(HaveOccurred())
			Expect(string(st.State)).To(Equal("T"), "positive control: the tool is stopped")

			r := l.stopWait(ctx)
			// The harness waits for its children on TERM, then exits 0.
			expectOutcome(r, "stopped", 0, nil, true)
			expectReached(r, tool)
			expectGone("process", harness(rec), tool)
			rec, err = witness.ReadRecord(l.record)
			Expect(err).NotTo(HaveOccurred())
			Expect(rec.Exits).To(HaveKey(tool.PID), "the harness saw its tool end")
			Expect(rec.Exits[tool.PID].Signal).To(Equal("TERM"), "the stopped tool was ended by TERM after a CONT, not by KILL")
		})

		framework.ConformanceIt("2 stop rules", "should reach a child forked during the stop", func(ctx SpecContext) {
			l := newLaunch()
			l.detach(ctx, []string{"--deadline", "60", "--grace", "0.5"}, "fork-during-stop")
			rec := l.ready(ctx)
			Expect(rec.Role("ignore-term")).To(BeEmpty(), "nothing forked before the stop")

			r := l.stopWait(ctx)
			expectOutcome(r, "stopped", 0, nil, true)
			rec, err := witness.ReadRecord(l.record)
			Expect(err).NotTo(HaveOccurred())
			// Positive control: the harness saw the child alive in /proc
			// right after forking it. (The stop may TERM it before it can
			// record itself, so its own line is not required.)
			late := spawned(rec, "ignore-term")
			expectReached(r, late)
			expectGone("process", harness(rec), late)
		})

		framework.ConformanceIt("2 stop rules", "should reach a process that dropped the marker and then double-forked", func(ctx SpecContext) {
			l := newLaunch()
			d := l.detach(ctx, []string{"--deadline", "60", "--grace", "0.5"}, "drop-marker")
			rec := l.ready(ctx)
			h, dropper, daemon := harness(rec), one(rec, "drop-marker"), one(rec, "daemon")
			Expect(h.Marker).To(Equal(d.LaunchID), "positive control: the harness carries the marker")
			for _, p := range []witness.Line{dropper, daemon} {
				Expect(p.HasMarker).To(BeFalse(), "positive control: %s dropped WARDEN_LAUNCH", p.Role)
				env, err := witness.Proc.Environ(p.PID)
				Expect(err).NotTo(HaveOccurred())
				Expect(env).NotTo(ContainElement(HavePrefix("WARDEN_LAUNCH=")), "positive control: %s has no marker in /proc", p.Role)
				Expect(p.SID).NotTo(Equal(h.SID), "positive control: %s left the harness's session", p.Role)
			}
			st, err := witness.Proc.Lookup(daemon.ID())
			Expect(err).NotTo(HaveOccurred())
			Expect(st.PPID).To(Equal(l.supervisor.PID), "positive control: the daemon was orphaned to the supervisor")

			r := l.stopWait(ctx)
			expectOutcome(r, "stopped", 143, "TERM", true)
			expectReached(r, dropper, "descendant")
			expectReached(r, daemon, "orphan", "descendant")
			expectGone("process", h, dropper, daemon)
		})

		framework.ConformanceIt("2 stop rules", "should stop a process outside the supervisor's tree that carries the launch's marker, not taking it for one older than the launch", func(ctx SpecContext) {
			l := newLaunch()
			d := l.detach(ctx, []string{"--deadline", "60", "--grace", "0.5"}, "sleep")
			l.ready(ctx)
			// Started by this spec, not by the harness: only its marker
			// ties it to the launch (a tool server's client would be one).
			outsider, waited := startOutsider(ctx, l, d.LaunchID)
			// Its /proc entry exists before the stop lists the table (the
			// birth fence judges a listed entry by its inode's ctime).
			_, err := witness.Proc.Table()
			Expect(err).NotTo(HaveOccurred())

			r := l.stopWait(ctx)
			expectOutcome(r, "stopped", 143, "TERM", true)
			expectReached(r, outsider, "marker")
			Eventually(ctx, waited).WithTimeout(10*time.Second).Should(BeClosed(), "the outsider outlived the stop")
			expectGone("outsider with the marker", outsider)
		})

		framework.ConformanceIt("2 stop rules", "should, with --grace 0, KILL the harness, its daemon and a process outside its tree that carries the marker, listing each as reached", func(ctx SpecContext) {
			// In tier cgroup the stop kills the launch's cgroup before its
			// first round (nothing is TERMed at grace 0): the members it
			// ended must still be listed, and the marker rule still holds
			// for what lives outside the cgroup (mutants cgroupblind,
			// cgrouponly). The subreaper tier goes the rounds' way.
			l := newLaunch()
			d := l.detach(ctx, []string{"--deadline", "60", "--grace", "0"}, "daemon")
			rec := l.ready(ctx)
			h, daemon := harness(rec), one(rec, "daemon")
			outsider, waited := startOutsider(ctx, l, d.LaunchID)
			_, err := witness.Proc.Table()
			Expect(err).NotTo(HaveOccurred())

			r := l.stopWait(ctx)
			expectOutcome(r, "stopped", 137, "KILL", true)
			expectReached(r, h, "group")
			expectReached(r, daemon, "orphan", "descendant")
			expectReached(r, outsider, "marker")
			Eventually(ctx, waited).WithTimeout(10*time.Second).Should(BeClosed(), "the outsider outlived the stop")
			expectGone("process", h, daemon, outsider)
		})

		framework.ConformanceIt("2 stop rules", "should list a crafted process name exactly and evaluate nothing in it", func(ctx SpecContext) {
			l := newLaunch()
			// A supervisor may work from / (daemons do): check it too, if
			// no "p" was there before.
			dirs := []string{l.cwd, l.state, l.dir}
			if _, err := os.Lstat("/p"); os.IsNotExist(err) {
				dirs = append(dirs, "/")
			}
			l.detach(ctx, []string{"--deadline", "60", "--grace", "0.5"}, "crafted-name")
			rec := l.ready(ctx)
			crafted := one(rec, "crafted")
			Expect(crafted.Comm).To(Equal(craftedName), "positive control: the name shows in /proc")

			r := l.stopWait(ctx)
			expectOutcome(r, "stopped", 143, "TERM", true)
			// Any why will do: what matters is that a parse of its stat
			// that stopped at the first ')' (seeing ppid 1) did not hide it.
			m := expectReached(r, crafted)
			Expect(m.Comm).To(Equal(craftedName))
			expectGone("process", harness(rec), crafted)
			// `$(>p)` evaluated by anyone would have created a file "p" in
			// that evaluator's working directory.
			for _, dir := range dirs {
				Expect(filepath.Join(dir, "p")).NotTo(BeAnExistingFile(), "the crafted name was evaluated")
			}
		})
	})

	Context("when the harness exits by itself", func() {
		for _, c := range []struct{ code, wantExit int }{{0, 0}, {3, 1}} {
			framework.ConformanceIt("4 exit statuses", fmt.Sprintf("should report status %d and exit %d in the foreground", c.code, c.wantExit), func(ctx SpecContext) {
				l := newLaunch()
				res := l.warden(ctx, l.superviseArgs([]string{"--deadline", "60", "--grace", "0.5"}, l.adversary("exit", strconv.Itoa(c.code)))...)
				Expect(res.Code).To(Equal(c.wantExit), "%s%s", res, l.diagnose())
				rec, err := witness.ReadRecord(l.record)
				Expect(err).NotTo(HaveOccurred(), "positive control: the harness ran")
				Expect(rec.Ready).To(BeTrue())
				// The foreground relays the harness's stdout and stderr.
				Expect(res.Stdout).To(ContainSubstring("adversary stdout %d", harness(rec).PID))
				Expect(res.Stderr).To(ContainSubstring("adversary stderr %d", harness(rec).PID))
				expectOutcome(l.receipt(), "exited", c.code, nil, true)
				expectGone("process", harness(rec))
			})
		}

		framework.ConformanceIt("3 receipt", "should report 128+N and the signal's name when a signal ended it", func(ctx SpecContext) {
			l := newLaunch()
			res := l.warden(ctx, l.superviseArgs([]string{"--deadline", "60", "--grace", "0.5"}, l.adversary("signal", "TERM"))...)
			Expect(res.Code).To(Equal(1), "%s", res)
			rec, err := witness.ReadRecord(l.record)
			Expect(err).NotTo(HaveOccurred(), "positive control: the harness ran")
			Expect(rec.Ready).To(BeTrue())
			expectOutcome(l.receipt(), "exited", 143, "TERM", true)
		})

		framework.ConformanceIt("2 stop rules", "should stop a setsid'd sleep and a double-forked daemon it left and still report its status", func(ctx SpecContext) {
			// The black-box check: the harness leaves both behind
			// and exits 3; the receipt must confirm cleanup, be true, and
			// keep the status.
			l := newLaunch()
			gate := filepath.Join(l.dir, "gate")
			done := make(chan procs.Result, 1)
			go func() {
				defer GinkgoRecover()
				done <- l.warden(ctx, l.superviseArgs([]string{"--deadline", "60", "--grace", "0.5"},
					l.adversary("setsid-tool", "daemon", "await", gate, "exit", "3"))...)
			}()
			rec := l.ready(ctx) // both alive and visible before the harness may exit
			tool, daemon := one(rec, "setsid"), one(rec, "daemon")
			Expect(os.WriteFile(gate, nil, 0o644)).To(Succeed())
			var res procs.Result
			Eventually(ctx, done).WithTimeout(procs.CommandTimeout).Should(Receive(&res))
			Expect(res.Code).To(Equal(1), "return_code 3 is not 0: %s", res)
			r := l.receipt()
			expectOutcome(r, "exited", 3, nil, true)
			expectReached(r, tool)
			expectReached(r, daemon, "orphan")
			expectGone("process", harness(rec), tool, daemon)
		})

		framework.ConformanceIt("2 stop rules", "should reap the zombies it inherits", func(ctx SpecContext) {
			l := newLaunch()
			l.detach(ctx, []string{"--deadline", "60", "--grace", "0.5"}, "zombies")
			rec := l.ready(ctx)
			Expect(rec.Zombies).To(HaveLen(3), "positive control: the fixture saw its children as zombies")
			// Until the supervisor has collected them, the recorded pids are
			// its children; so is any other dead child it has not reaped.
			// Nothing else in the spec forks below the supervisor, so a
			// recorded pid reused since names no child of it.
			Eventually(ctx, func() ([]string, error) {
				table, err := witness.Proc.Table()
				var left []string
				for _, st := range table {
					if st.PPID == l.supervisor.PID && (st.Dead() || slices.Contains(rec.Zombies, st.PID)) {
						left = append(left, fmt.Sprintf("%d (state %c, %d threads)", st.PID, st.State, st.Threads))
					}
				}
				return left, err
			}).WithTimeout(10*time.Second).Should(BeEmpty(), "zombie children of the supervisor")
			expectOutcome(l.stopWait(ctx), "stopped", 143, "TERM", true)
		})
	})

	Context("with a deadline under 0.01 s", func() {
		framework.ConformanceIt("2 flags", "should launch nothing and still leave a deadline receipt", func(ctx SpecContext) {
			l := newLaunch()
			res := l.warden(ctx, l.superviseArgs([]string{"--deadline", "0.009"}, l.adversary("sleep"))...)
			Expect(res.Code).To(Equal(1), "%s", res)
			r := l.receipt()
			expectOutcome(r, "deadline", nil, nil, true)
			Expect(l.record).NotTo(BeAnExistingFile(), "the harness ran")
		})
	})

	Context("after a stop of the same state dir (fencing)", func() {
		framework.ConformanceIt("2 launch rules", "should refuse to launch, exit 2 and keep the fenced receipt", func(ctx SpecContext) {
			l := newLaunch()
			res := l.warden(ctx, "stop", "--state", l.state)
			Expect(res.Code).To(Equal(0), "%s", res)
			fi, err := os.Stat(l.state)
			Expect(err).NotTo(HaveOccurred(), "stop creates the state dir")
			Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o700)))
			r := l.receipt()
			expectOutcome(r, "fenced", nil, nil, true)
			before, err := os.ReadFile(filepath.Join(l.state, witness.ReceiptFile))
			Expect(err).NotTo(HaveOccurred())

			res = l.warden(ctx, l.superviseArgs([]string{"--deadline", "60"}, l.adversary("sleep"))...)
			Expect(res.Code).To(Equal(2), "%s", res)
			Expect(l.record).NotTo(BeAnExistingFile(), "the fenced harness ran")
			after, err := os.ReadFile(filepath.Join(l.state, witness.ReceiptFile))
			Expect(err).NotTo(HaveOccurred())
			Expect(after).To(Equal(before), "the fenced receipt changed")

			// Positive control: the same command on a fresh state dir runs.
			l2 := newLaunch()
			l2.detach(ctx, []string{"--deadline", "60"}, "sleep")
			l2.ready(ctx)
			expectOutcome(l2.stopWait(ctx), "stopped", 143, "TERM", true)
		})
	})

	Context("on a state dir another launch has claimed", func() {
		framework.ConformanceIt("2 launch rules", "should exit 2 and leave the first launch's files alone", func(ctx SpecContext) {
			l := newLaunch()
			l.detach(ctx, []string{"--deadline", "60", "--grace", "0.5"}, "sleep")
			rec := l.ready(ctx)
			before := snapshotDir(l.state)
			Expect(before).NotTo(BeEmpty())

			second := filepath.Join(l.dir, "second-record")
			res := l.warden(ctx, l.superviseArgs([]string{"--deadline", "60"},
				[]string{framework.Fixture("adversary"), "--record", second, "sleep"})...)
			Expect(res.Code).To(Equal(2), "%s", res)
			Expect(second).NotTo(BeAnExistingFile(), "the second harness ran")
			Expect(snapshotDir(l.state)).To(Equal(before), "the first launch's files changed")
			Expect(procs.Alive(harness(rec).ID())).To(BeTrue(), "the first harness still runs")
			expectOutcome(l.stopWait(ctx), "stopped", 143, "TERM", true)
		})
	})

	Context("with an unreadable proc root", func() {
		framework.ConformanceIt("2 launch rules", "should refuse to launch and say why in the receipt", func(ctx SpecContext) {
			l := newLaunch()
			empty := filepath.Join(l.dir, "empty-proc")
			Expect(os.Mkdir(empty, 0o755)).To(Succeed())
			res := l.warden(ctx, l.superviseArgs([]string{"--deadline", "60", "--proc-root", empty}, l.adversary("sleep"))...)
			Expect(res.Code).To(Equal(1), "%s", res)
			r := l.receipt()
			expectOutcome(r, "refused", nil, nil, true)
			Expect(r.Error).To(HaveValue(Not(BeEmpty())), "the receipt says why")
			Expect(l.record).NotTo(BeAnExistingFile(), "the harness ran")
		})
	})

	Context("when COMMAND cannot be started", func() {
		for _, c := range []struct {
			what string
			code int
		}{{"a missing CLI", 127}, {"a CLI found on PATH that does not exist", 127}, {"a CLI that is not executable", 126}} {
			framework.ConformanceIt("3 receipt", fmt.Sprintf("should report exec_failed and %d for %s", c.code, c.what), func(ctx SpecContext) {
				l := newLaunch()
				command := filepath.Join(l.dir, "no-such-cli")
				switch c.what {
				case "a CLI found on PATH that does not exist":
					command = "sandproof-no-such-cli-on-path"
				case "a CLI that is not executable":
					command = filepath.Join(l.dir, "not-executable")
					Expect(os.WriteFile(command, []byte("#!/bin/sh\nexit 0\n"), 0o644)).To(Succeed())
				}
				res := l.warden(ctx, l.superviseArgs([]string{"--deadline", "60"}, []string{command})...)
				Expect(res.Code).To(Equal(1), "%s", res)
				r := l.receipt()
				expectOutcome(r, "exec_failed", c.code, nil, true)
			})
		}
	})

	Context("given a bad number", func() {
		bad := []string{"0x10", "1e2", "Infinity", "nan", "-1", "1 2", "", "31536001"}
		for _, flag := range []string{"deadline", "grace", "lease"} {
			values := bad
			if flag != "grace" {
				values = append(values, "0") // must be > 0; --grace 0 is fine
			}
			framework.ConformanceIt("2 flags", fmt.Sprintf("should refuse --%s with exit 2, name the flag, quote the value and launch nothing", flag), func(ctx SpecContext) {
				l := newLaunch()
				for i, v := range values {
					state := filepath.Join(l.dir, fmt.Sprintf("state-%d", i))
					flags := []string{"--state", state, "--deadline", "60", "--" + flag, v}
					if flag == "deadline" {
						flags = []string{"--state", state, "--deadline", v}
					}
					res := l.warden(ctx, append(append([]string{"supervise"}, flags...), append([]string{"--"}, l.adversary("sleep")...)...)...)
					expectUsage(res, flag, v)
					Expect(l.record).NotTo(BeAnExistingFile(), "--%s %q launched the harness", flag, v)
					// A usable state dir gets a refused receipt.
					r, err := witness.ReadReceipt(state)
					Expect(err).NotTo(HaveOccurred(), "--%s %q: refused receipt", flag, v)
					expectOutcome(r, "refused", nil, nil, true)
				}
				// Positive control: the limits themselves are accepted.
				limit := []string{"--deadline", "31536000", "--grace", "0"}
				if flag == "lease" {
					limit = append(limit, "--lease", "31536000")
				}
				l.detach(ctx, limit, "sleep")
				l.ready(ctx)
				// With --grace 0 the stop KILLs at once.
				expectOutcome(l.stopWait(ctx), "stopped", 137, "KILL", true)
			})
		}

		framework.ConformanceIt("4 exit statuses", "should refuse a bad --wait of stop and --timeout of wait with exit 2", func(ctx SpecContext) {
			l := newLaunch()
			for _, v := range bad {
				expectUsage(l.warden(ctx, "stop", "--state", l.state, "--wait", v), "wait", v)
				expectUsage(l.warden(ctx, "wait", "--state", l.state, "--timeout", v), "timeout", v)
			}
			Expect(filepath.Join(l.state, witness.ReceiptFile)).NotTo(BeAnExistingFile(), "a refused stop fenced the state dir")
		})
	})

	Context("started by a provider", func() {
		framework.ConformanceIt("2 launch rules", "should survive a KILL of the exec's process group and still stop and write the receipt", func(ctx SpecContext) {
			l := newLaunch()
			// Like `docker exec`: the front runs in a process group of its
			// own, which the provider then KILLs as a whole.
			cmd := exec.Command(framework.Bin.Warden, l.superviseArgs([]string{"--deadline", "60", "--grace", "0.5"}, l.adversary("sleep"))...)
			cmd.Dir = l.cwd
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			Expect(cmd.Start()).To(Succeed())
			front := cmd.Process.Pid
			DeferCleanup(func() { syscall.Kill(-front, syscall.SIGKILL); cmd.Wait() })
			rec := l.ready(ctx)
			h := harness(rec)
			Expect(h.SID).NotTo(Equal(front), "positive control: the harness is not in the exec's session")

			Expect(syscall.Kill(-front, syscall.SIGKILL)).To(Succeed())
			err := cmd.Wait()
			Expect(err).To(HaveOccurred(), "the front was killed")
			Expect(procs.Alive(h.ID())).To(BeTrue(), "the harness outlived the exec's group")
			// Only a live supervisor can answer the stop with a receipt.
			r := l.stopWait(ctx)
			expectOutcome(r, "stopped", 143, "TERM", true)
			expectGone("process", h)
		})

		framework.ConformanceIt("2 launch rules", "should return from --detach and close the caller's output pipe while the harness runs", func(ctx SpecContext) {
			l := newLaunch()
			r, w, err := os.Pipe()
			Expect(err).NotTo(HaveOccurred())
			defer r.Close()
			cmd := exec.Command(framework.Bin.Warden, l.superviseArgs([]string{"--deadline", "60", "--grace", "0.5", "--detach"}, l.adversary("sleep"))...)
			cmd.Dir = l.cwd
			cmd.Stdout, cmd.Stderr = w, w
			Expect(cmd.Start()).To(Succeed())
			w.Close()
			output := make(chan []byte, 1)
			go func() { data, _ := io.ReadAll(r); output <- data }()
			var out []byte
			Eventually(ctx, output).WithTimeout(procs.CommandTimeout).Should(Receive(&out), "the pipe never reached EOF")
			Expect(cmd.Wait()).To(Succeed(), "supervise --detach: %s", out)
			d, err := witness.ParseDetached(string(out))
			Expect(err).NotTo(HaveOccurred())
			if st, err := witness.Proc.ReadStat(d.SupervisorPID); err == nil {
				l.supervisor = st.ID()
			}
			rec := l.ready(ctx)
			Expect(procs.Alive(harness(rec).ID())).To(BeTrue(), "the harness runs after the pipe closed")
			expectOutcome(l.stopWait(ctx), "stopped", 143, "TERM", true)
		})
	})

	Context("inside another launch", func() {
		framework.ConformanceIt("2 launch rules", "should carry outer:inner in WARDEN_LAUNCH and be stopped whole by the outer stop", func(ctx SpecContext) {
			l := newLaunch()
			outer, inner := uniqueID("outer"), uniqueID("inner")
			innerState := filepath.Join(l.dir, "inner-state")
			command := append([]string{framework.Bin.Warden, "supervise", "--state", innerState, "--launch-id", inner,
				"--deadline", "60", "--grace", "0.5", "--"}, l.adversary("setsid-tool", "daemon")...)
			res := l.warden(ctx, append([]string{"supervise", "--state", l.state, "--launch-id", outer,
				"--deadline", "60", "--grace", "0.5", "--detach", "--"}, command...)...)
			Expect(res.Code).To(Equal(0), "%s", res)
			d, err := witness.ParseDetached(res.Stdout)
			Expect(err).NotTo(HaveOccurred())
			st, err := witness.Proc.ReadStat(d.SupervisorPID)
			Expect(err).NotTo(HaveOccurred())
			l.supervisor = st.ID()
			rec := l.ready(ctx)
			h := harness(rec)
			Expect(h.Marker).To(Equal(outer+":"+inner), "WARDEN_LAUNCH of the inner harness")
			Expect(h.MarkerFirst).To(BeTrue(), "WARDEN_LAUNCH is first in the harness's environment")
			// Everything under the outer supervisor: the inner front, the
			// inner supervisor and the adversary's tree.
			below, err := witness.Proc.Descendants(l.supervisor.PID)
			Expect(err).NotTo(HaveOccurred())
			var tree []witness.ID
			for _, st := range below {
				tree = append(tree, st.ID())
			}
			procs.KillOnCleanup(func() []witness.ID { return tree })
			for _, p := range running(rec) {
				Expect(tree).To(ContainElement(p.ID()), "positive control: %s %v is in the outer launch's tree", p.Role, p.ID())
			}
			Expect(len(tree)).To(BeNumerically(">", len(running(rec))), "positive control: the inner front and supervisor are in the tree")

			r := l.stopWait(ctx)
			Expect(r.LaunchID).To(Equal(outer))
			Expect(r.CleanupConfirmed).To(BeTrue(), "survivors %+v", r.Survivors)
			for _, id := range tree {
				Expect(procs.Alive(id)).To(BeFalse(), "%v of the nested launch survived: %s", id, witness.Proc.State(id))
			}
			expectGone("process", running(rec)...)
		})
	})

	Context("with --user", framework.Root, func() {
		framework.ConformanceIt("2 flags", "should run the harness as that user and still stop its setsid'd tool", func(ctx SpecContext) {
			requireRoot("--user")
			l := newLaunch()
			// The fixture and the record must be reachable by uid 1000;
			// the suite's build dir is private.
			shared, bin := sharedAdversary("sandproof-user-")
			l.record = filepath.Join(shared, "record")

			res := l.warden(ctx, l.superviseArgs([]string{"--deadline", "60", "--grace", "0.5", "--user", "1000", "--detach"},
				[]string{bin, "--record", l.record, "setsid-tool"})...)
			Expect(res.Code).To(Equal(0), "%s", res)
			d, err := witness.ParseDetached(res.Stdout)
			Expect(err).NotTo(HaveOccurred())
			if st, err := witness.Proc.ReadStat(d.SupervisorPID); err == nil {
				l.supervisor = st.ID()
			}
			rec := l.ready(ctx)
			h, tool := harness(rec), one(rec, "setsid")
			for _, p := range []witness.Line{h, tool} {
				uid, err := witness.Proc.UID(p.PID)
				Expect(err).NotTo(HaveOccurred())
				Expect(uid).To(Equal(1000), "positive control: %s runs as uid 1000", p.Role)
			}
			supUID, err := witness.Proc.UID(l.supervisor.PID)
			Expect(err).NotTo(HaveOccurred())
			Expect(supUID).To(Equal(0), "the supervisor stays with the caller")
			fi, err := os.Stat(l.state)
			Expect(err).NotTo(HaveOccurred())
			Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o700)))
			Expect(fi.Sys().(*syscall.Stat_t).Uid).To(BeEquivalentTo(0), "the state dir stays with the caller")

			r := l.stopWait(ctx)
			expectOutcome(r, "stopped", 143, "TERM", true)
			expectReached(r, tool)
			expectGone("process", h, tool)
		})
	})

	Context("writing its receipt", func() {
		framework.ConformanceIt("3 receipt", "should publish it whole, with every field, and leave no temp file", func(ctx SpecContext) {
			l := newLaunch()
			l.detach(ctx, []string{"--deadline", "60", "--grace", "0.5"}, "setsid-tool", "daemon")
			l.ready(ctx)
			Expect(l.warden(ctx, "stop", "--state", l.state).Code).To(Equal(0))
			// A reader polling all the time must never see a partial file.
			path := filepath.Join(l.state, witness.ReceiptFile)
			Eventually(ctx, func() (bool, error) {
				data, err := os.ReadFile(path)
				if os.IsNotExist(err) {
					return false, nil
				}
				if err != nil {
					return false, StopTrying(err.Error())
				}
				if _, err := witness.ParseReceipt(data); err != nil {
					return false, StopTrying("a reader saw a receipt that does not parse: " + err.Error())
				}
				return true, nil
			}).WithTimeout(procs.CommandTimeout).WithPolling(time.Millisecond).Should(BeTrue())
			r := l.receipt()
			Expect(r.StartedAt).NotTo(Equal(""))
			Expect(r.Reached).NotTo(BeEmpty())
		})
	})
})

var _ = Describe("warden stop and wait", framework.Local, func() {
	framework.ConformanceIt("4 exit statuses", "should exit 3 when no receipt comes in time, then 0 once it does", func(ctx SpecContext) {
		l := newLaunch()
		l.detach(ctx, []string{"--deadline", "60", "--grace", "1"}, "ignore-term")
		l.ready(ctx)
		res := l.warden(ctx, "wait", "--state", l.state, "--timeout", "0.2")
		Expect(res.Code).To(Equal(3), "%s", res)
		// The harness ignores TERM, so the receipt waits for the grace.
		res = l.warden(ctx, "stop", "--state", l.state, "--wait", "0.1")
		Expect(res.Code).To(Equal(3), "%s", res)
		expectOutcome(l.waitReceipt(ctx), "stopped", 137, "KILL", true)
	})

	framework.ConformanceIt("4 exit statuses", "should exit 4 from wait, stop and renew when the supervisor was SIGKILLed", func(ctx SpecContext) {
		l := newLaunch()
		l.detach(ctx, []string{"--deadline", "60", "--grace", "0.5", "--lease", "60"}, "sleep")
		rec := l.ready(ctx)
		Expect(procs.Alive(l.supervisor)).To(BeTrue(), "positive control: the supervisor runs")
		Expect(witness.Kill(l.supervisor, syscall.SIGKILL)).To(Succeed())
		Eventually(ctx, func() bool { return procs.Alive(l.supervisor) }).WithTimeout(10 * time.Second).Should(BeFalse())

		for _, args := range [][]string{
			{"wait", "--state", l.state, "--timeout", "10"},
			{"stop", "--state", l.state, "--wait", "10"},
			{"renew", "--state", l.state},
		} {
			res := l.warden(ctx, args...)
			Expect(res.Code).To(Equal(4), "%s", res)
		}
		Expect(filepath.Join(l.state, witness.ReceiptFile)).NotTo(BeAnExistingFile())
		Expect(procs.Alive(harness(rec).ID())).To(BeTrue(), "the orphaned harness still runs (the cleanup kills it)")
	})

	framework.ConformanceIt("4 exit statuses", "should exit 1 when the receipt does not confirm cleanup", func(ctx SpecContext) {
		l := newLaunch()
		// A fake proc root holding one process that carries the launch's
		// marker: warden only records signals there, so it never dies.
		id := uniqueID("fake")
		fake := filepath.Join(l.dir, "fakeproc")
		pid := 4000123
		Expect(os.MkdirAll(filepath.Join(fake, strconv.Itoa(pid)), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(fake, "uptime"), []byte("1000.00 1900.00\n"), 0o644)).To(Succeed())
		stat := fmt.Sprintf("%d (stuck) S 1 %d %d 0 -1 4194304 97 0 0 0 1 2 0 0 20 0 1 0 9990000 8388608 234 18446744073709551615 1 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 1 1 1 1 1 1 1 0\n", pid, pid, pid)
		Expect(os.WriteFile(filepath.Join(fake, strconv.Itoa(pid), "stat"), []byte(stat), 0o444)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(fake, strconv.Itoa(pid), "environ"), []byte("WARDEN_LAUNCH="+id+"\x00PATH=/bin\x00"), 0o444)).To(Succeed())

		res := l.warden(ctx, l.superviseArgs([]string{"--deadline", "60", "--grace", "0", "--launch-id", id, "--proc-root", fake, "--detach"}, l.adversary("exit", "0"))...)
		Expect(res.Code).To(Equal(0), "%s", res)
		res = l.warden(ctx, "wait", "--state", l.state, "--timeout", "45")
		Expect(res.Code).To(Equal(1), "%s%s", res, l.diagnose())
		r := l.receiptPrinted(res)
		Expect(r.CleanupConfirmed).To(BeFalse())
		Expect(r.Survivors).To(ContainElement(HaveField("PID", pid)))
		res = l.warden(ctx, "stop", "--state", l.state, "--wait", "10")
		Expect(res.Code).To(Equal(1), "%s", res)
		signals, err := os.ReadFile(filepath.Join(fake, ".signals"))
		Expect(err).NotTo(HaveOccurred(), "warden records the signals it would send")
		// --grace 0: KILL at once.
		Expect(string(signals)).To(ContainSubstring(fmt.Sprintf("%d 9990000 KILL", pid)))
	})
})

var _ = Describe("warden renew", framework.Local, func() {
	framework.ConformanceIt("2 flags", "should let the supervisor stop the launch with cause lease when nobody renews", func(ctx SpecContext) {
		l := newLaunch()
		l.detach(ctx, []string{"--deadline", "60", "--grace", "0.5", "--lease", "3"}, "setsid-tool")
		rec := l.ready(ctx)
		r := l.waitReceipt(ctx)
		expectOutcome(r, "lease", 143, "TERM", true)
		expectGone("process", harness(rec), one(rec, "setsid"))
	})

	framework.ConformanceIt("2 flags", "should keep a launch alive while it is renewed, and let it lapse after", func(ctx SpecContext) {
		l := newLaunch()
		l.detach(ctx, []string{"--deadline", "60", "--grace", "0.5", "--lease", "1.5"}, "sleep")
		rec := l.ready(ctx)
		// Renew well inside the lease for more than twice its length.
		Consistently(ctx, func() (string, error) {
			if res := l.warden(ctx, "renew", "--state", l.state); res.Code != 0 {
				return "", StopTrying(res.String())
			}
			_, err := os.Stat(filepath.Join(l.state, witness.ReceiptFile))
			if err == nil {
				return "receipt written while renewed" + l.diagnose(), nil
			}
			return "", nil
		}).WithTimeout(3500 * time.Millisecond).WithPolling(250 * time.Millisecond).Should(BeEmpty())
		Expect(procs.Alive(harness(rec).ID())).To(BeTrue())
		r := l.waitReceipt(ctx)
		expectOutcome(r, "lease", 143, "TERM", true)
		expectGone("process", harness(rec))
	})

	framework.ConformanceIt("4 exit statuses", "should exit 1 for a launch without a lease", func(ctx SpecContext) {
		l := newLaunch()
		l.detach(ctx, []string{"--deadline", "60", "--grace", "0.5"}, "sleep")
		l.ready(ctx)
		res := l.warden(ctx, "renew", "--state", l.state)
		Expect(res.Code).To(Equal(1), "%s", res)
		expectOutcome(l.stopWait(ctx), "stopped", 143, "TERM", true)
	})
})

var _ = Describe("warden service", framework.Local, func() {
	framework.ConformanceIt("4 exit statuses", "should keep a declared service through the launch's stop, list it as preserved, and end it on stop --services", func(ctx SpecContext) {
		l := newLaunch()
		l.detach(ctx, []string{"--deadline", "60", "--grace", "0.5"}, "sleep")
		rec := l.ready(ctx)
		svcRecord := filepath.Join(l.dir, "service-record")
		procs.KillOnCleanup(func() []witness.ID { return witness.RecordedIDs(svcRecord) })
		res := l.warden(ctx, "service", "--state", l.state, "--name", "db", "--",
			framework.Fixture("adversary"), "--record", svcRecord, "setsid-tool")
		Expect(res.Code).To(Equal(0), "%s", res)
		svc := &launch{record: svcRecord}
		svcRec := svc.ready(ctx)
		svcMain, svcTool := harness(svcRec), one(svcRec, "setsid")

		r := l.stopWait(ctx)
		expectOutcome(r, "stopped", 143, "TERM", true)
		expectGone("process", harness(rec))
		for _, p := range []witness.Line{svcMain, svcTool} {
			_, reached := witness.Find(r.Reached, p.ID())
			Expect(reached).To(BeFalse(), "service %s %v is in reached", p.Role, p.ID())
			Expect(procs.Alive(p.ID())).To(BeTrue(), "service %s %v did not survive the launch's stop", p.Role, p.ID())
		}
		_, preserved := witness.Find(r.Preserved, svcMain.ID())
		Expect(preserved).To(BeTrue(), "the service is listed under preserved: %+v", r.Preserved)

		res = l.warden(ctx, "stop", "--state", l.state, "--services", "--wait", "45")
		Expect(res.Code).To(Equal(0), "%s%s", res, l.diagnose())
		expectGone("service process", svcMain, svcTool)
	})
})

// uniqueID returns a launch id no other spec (or parallel process) uses.
func uniqueID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, GinkgoParallelProcess(), time.Now().UnixNano())
}

// expectUsage checks a refused command line: exit 2, and one line on stderr
// that names the flag and quotes the value.
func expectUsage(res procs.Result, flag, value string) {
	GinkgoHelper()
	Expect(res.Code).To(Equal(2), "%s", res)
	msg := strings.TrimRight(res.Stderr, "\n")
	Expect(msg).NotTo(ContainSubstring("\n"), "one line: %s", res)
	Expect(msg).To(ContainSubstring("--"+flag), "names the flag: %s", res)
	Expect(msg).To(Or(ContainSubstring(`"`+value+`"`), ContainSubstring(`'`+value+`'`)), "quotes the value: %s", res)
}

// snapshotDir returns every file in dir with its mode, size, mtime and
// content, to tell whether anything touched them.
func snapshotDir(dir string) map[string]string {
	GinkgoHelper()
	entries, err := os.ReadDir(dir)
	Expect(err).NotTo(HaveOccurred())
	out := map[string]string{}
	for _, e := range entries {
		fi, err := e.Info()
		Expect(err).NotTo(HaveOccurred())
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		out[e.Name()] = fi.Mode().String() + " " + strconv.FormatInt(fi.Size(), 10) + " " + fi.ModTime().String() + " " + string(data)
	}
	return out
}

// startOutsider starts, as a child of this spec (not of the supervisor),
// an adversary that carries launchID's marker, waits until it is ready,
// and returns it (its marker and parent proved) and a channel closed once
// it has exited.
func startOutsider(ctx SpecContext, l *launch, launchID string) (witness.Line, <-chan struct{}) {
	GinkgoHelper()
	outRec := filepath.Join(l.dir, "outsider")
	procs.KillOnCleanup(func() []witness.ID { return witness.RecordedIDs(outRec) })
	cmd := exec.Command(framework.Fixture("adversary"), "--record", outRec, "sleep")
	cmd.Env = append(os.Environ(), "WARDEN_LAUNCH="+launchID)
	Expect(cmd.Start()).To(Succeed())
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()
	var orec *witness.Record
	Eventually(ctx, func() bool {
		var err error
		orec, err = witness.ReadRecord(outRec)
		return err == nil && orec.Ready
	}).WithTimeout(readyTimeout).Should(BeTrue(), "the outsider never said it was ready")
	outsider := harness(orec)
	Expect(outsider.Marker).To(Equal(launchID), "positive control: the outsider carries the marker")
	Expect(outsider.PPID).To(Equal(os.Getpid()), "positive control: the outsider's parent is this spec, not the supervisor")
	return outsider, waited
}
