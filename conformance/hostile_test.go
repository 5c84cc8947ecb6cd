package conformance_test

// Hostile specs: the adversary roles that try to outrun a stop or pass for
// a service, run against the real supervisor. Every check that a process
// is gone reads /proc through witness, after a positive control showing
// the process alive and visible under its name.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// hopsFile is where the hopper role writes one pid per incarnation.
func hopsFile(record string) string { return record + ".hops" }

// hops reads the hopper's heartbeat: every incarnation's pid, in order.
func hops(record string) []int {
	GinkgoHelper()
	data, err := os.ReadFile(hopsFile(record))
	if os.IsNotExist(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return heartbeatPIDs(data)
}

// heartbeatPIDs parses a hopper's heartbeat: one pid per line.
func heartbeatPIDs(data []byte) []int {
	var out []int
	for _, f := range bytes.Fields(data) {
		if n, err := strconv.Atoi(string(f)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// pidsRefused reads a pids cgroup's pids.events ("max N"): how many forks
// the limit refused.
func pidsRefused(file string) int {
	GinkgoHelper()
	data, err := os.ReadFile(file)
	Expect(err).NotTo(HaveOccurred(), "read %s", file)
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(data)), "max")))
	Expect(err).NotTo(HaveOccurred(), "parse %s: %q", file, data)
	return n
}

// living returns the live processes named comm in /proc now.
func living(comm string) []witness.Stat {
	GinkgoHelper()
	table, err := witness.Proc.Table()
	Expect(err).NotTo(HaveOccurred())
	var out []witness.Stat
	for _, st := range table {
		if st.Comm == comm && !st.Dead() {
			out = append(out, st)
		}
	}
	return out
}

// killNamed stops and kills every live process named comm that hangs
// below pid 1 (where an escaped hopper or bomb process is reparented; names
// are unique per spec), reading pid 1's children lists until 2,000
// readings in a row find none: the cleanup of a spec that failed.
func killNamed(comm string) {
	if n := witness.KillNamedChildren(comm, []int{1}, 2000, 20*time.Second); n > 0 {
		GinkgoWriter.Printf("cleanup: stopped and killed %d escaped %q processes\n", n, comm)
	}
}

// uniqueComm is a process name (at most 15 bytes) no other spec uses.
func uniqueComm(prefix string) string {
	return fmt.Sprintf("%s%d-%d", prefix, GinkgoParallelProcess(), time.Now().UnixNano()%1_000_000)
}

// hostTiers are the stop tiers the host-side hostile specs run in: cgroup
// (warden's default where its cgroup v2 is writable, as on a host) and the
// subreaper tier, forced with --tier subreaper (what containers get, whose
// cgroup tree is read-only).
var hostTiers = []string{"cgroup", "subreaper"}

// tierFlags returns supervise's flags for tier, once the host is known to
// offer it: the observer checks on its own (witness) that a cgroup v2 can
// be made below its cgroup, so warden cannot decide for the spec.
func tierFlags(tier string) []string {
	GinkgoHelper()
	if tier == "subreaper" {
		return []string{"--tier", "subreaper"}
	}
	if err := witness.WritableCgroup2(); err != nil {
		framework.Missing(fmt.Sprintf("a writable cgroup v2 for tier cgroup (%v)", err),
			"run the suite as root on a host with cgroup2 mounted (containers have a read-only tree)")
	}
	return nil
}

// tierLabel marks a spec with the tier it runs in ("tier:cgroup",
// "tier:subreaper"): the subreaper ones pass --tier, a sandproof extension
// another supervisor may lack (filter them out with '!tier:subreaper').
func tierLabel(tier string) Labels { return Label("tier:" + tier) }

// expectTier checks the receipt's tier against the tier the spec asked for.
func expectTier(r *witness.Receipt, tier string) {
	GinkgoHelper()
	if tier == "cgroup" {
		Expect(r.Tier).To(Equal("cgroup"), "tier: this host offers a writable cgroup v2")
		return
	}
	Expect(r.Tier).To(BeElementOf("subreaper+pidfd", "subreaper+kill"), "tier: --tier subreaper")
}

var _ = Describe("warden supervise, facing processes that try to outrun the stop,", framework.Local, framework.Hostile, func() {
	for _, tier := range hostTiers {
		framework.ConformanceIt("2 kernel confirms", fmt.Sprintf("should stop a fork-and-exit hopper in tier %s and confirm only once it is dead, ten times in a row", tier), tierLabel(tier), func(ctx SpecContext) {
			flags := append([]string{"--deadline", "60", "--grace", "0.2"}, tierFlags(tier)...)
			// Ten attempts, hopping every 20 us: a supervisor without the
			// kernel's word (mutant nokernelwalk: no walk from itself, no
			// second reading before it confirms) still catches a slow
			// hopper by its marker now and then on a quiet host (at 200 us
			// and three attempts it survived 2 runs of 3 in a fresh CI); a
			// faster hopper and more attempts leave it no luck to live on.
			for attempt := 1; attempt <= 10; attempt++ {
				By(fmt.Sprintf("attempt %d", attempt))
				l := newLaunch()
				name := uniqueComm("hop")
				DeferCleanup(killNamed, name)
				GinkgoT().Setenv("ADVERSARY_HOP_NAME", name)
				GinkgoT().Setenv("ADVERSARY_HOP_NS", "20000")
				l.detach(ctx, flags, "hopper")
				l.ready(ctx)
				// Positive control: the hopper hops (its heartbeat grows by
				// many incarnations) and /proc shows one of them alive under
				// its name.
				start := len(hops(l.record))
				Eventually(ctx, func() int { return len(hops(l.record)) - start }).
					WithTimeout(20*time.Second).Should(BeNumerically(">=", 20), "the hopper never hopped")
				Eventually(ctx, func() []witness.Stat { return living(name) }).
					WithTimeout(20*time.Second).ShouldNot(BeEmpty(), "positive control: a hopper is alive and visible")

				r := l.stopWait(ctx)
				expectOutcome(r, "stopped", 143, "TERM", true)
				expectTier(r, tier)
				GinkgoWriter.Printf("hopper, tier %s, attempt %d: %d reached, stop %.3f s\n", r.Tier, attempt, len(r.Reached), r.StopSeconds)
				// Never a confirmed receipt while a tree process lives: the
				// heartbeat has stopped, and /proc shows no hopper, reading
				// after reading.
				after := hops(l.record)
				Expect(after).NotTo(BeEmpty())
				last := after[len(after)-1]
				st, err := witness.Proc.ReadStat(last)
				if err == nil && st.Comm == name {
					Expect(st.Dead()).To(BeTrue(), "the last hopper %d lives on after a confirmed receipt", last)
				}
				Consistently(ctx, func() int { return len(hops(l.record)) }).
					WithTimeout(300*time.Millisecond).WithPolling(10*time.Millisecond).
					Should(Equal(len(after)), "the hopper went on hopping after a confirmed receipt")
				Consistently(ctx, func() []witness.Stat { return living(name) }).
					WithTimeout(300*time.Millisecond).WithPolling(10*time.Millisecond).
					Should(BeEmpty(), "a hopper lives after a confirmed receipt")
			}
		})

		framework.ConformanceIt("2 hold", fmt.Sprintf("should stop a fork bomb bounded by RLIMIT_NPROC in tier %s and write a receipt that never confirms a living bomb, three times in a row", tier), tierLabel(tier),
			// RLIMIT_NPROC counts every uid-1000 process on the host: a
			// bomb another spec runs as uid 1000 at the same time (the
			// pids-limit one, the in-image ones) would eat the budget
			// measured below, and the harness could not even start.
			Serial, func(ctx SpecContext) {
				requireRoot("--user")
				prlimit, err := exec.LookPath("prlimit")
				if err != nil {
					framework.Missing("prlimit(1)", "apt-get install util-linux")
				}
				flags := append([]string{"--deadline", "60", "--grace", "0.2", "--user", "1000"}, tierFlags(tier)...)
				for attempt := 1; attempt <= 3; attempt++ {
					By(fmt.Sprintf("attempt %d", attempt))
					l := newLaunch()
					shared, bin := sharedAdversary("sandproof-bomb-")
					record := filepath.Join(shared, "record")
					l.record = record
					name := uniqueComm("bomb")
					DeferCleanup(killNamed, name)
					GinkgoT().Setenv("ADVERSARY_BOMB_NAME", name)
					// Root ignores RLIMIT_NPROC: the harness runs as uid 1000,
					// whose process count the limit bounds (a few more than uid
					// 1000 runs already, so the bomb can grow).
					base := 0
					if table, err := witness.Proc.Table(); err == nil {
						for _, st := range table {
							if uid, err := witness.Proc.UID(st.PID); err == nil && uid == 1000 {
								base++
							}
						}
					}
					limit := strconv.Itoa(base + 40)
					l.detachCommand(ctx, flags, []string{prlimit, "--nproc=" + limit, "--", bin, "--record", record, "fork-bomb"})
					rec := l.ready(ctx)
					Expect(harness(rec).UID).To(Equal(1000), "positive control: the harness runs as uid 1000")
					Eventually(ctx, func() int { return len(living(name)) }).
						WithTimeout(20*time.Second).Should(BeNumerically(">=", 5), "positive control: the bomb grew")

					res := l.warden(ctx, "stop", "--state", l.state, "--wait", "45")
					Expect(res.Code).To(BeElementOf(0, 1), "%s%s", res, l.diagnose())
					r := l.receiptPrinted(res)
					Expect(r.Cause).To(Equal("stopped"))
					expectTier(r, tier)
					GinkgoWriter.Printf("bomb, tier %s, attempt %d: confirmed %v, %d reached, %d survivors, stop %.3f s\n",
						r.Tier, attempt, r.CleanupConfirmed, len(r.Reached), len(r.Survivors), r.StopSeconds)
					if tier == "cgroup" {
						// The kernel freezes and kills the whole cgroup at once:
						// nothing can be left to hold.
						Expect(r.CleanupConfirmed).To(BeTrue(), "tier cgroup: %s%s", res, l.diagnose())
					}
					if r.CleanupConfirmed {
						Expect(r.Survivors).To(BeEmpty())
						Consistently(ctx, func() []witness.Stat { return living(name) }).
							WithTimeout(300*time.Millisecond).WithPolling(10*time.Millisecond).
							Should(BeEmpty(), "a bomb process lives after a confirmed receipt")
					} else {
						Expect(r.Survivors).NotTo(BeEmpty(), "an unconfirmed stop names its survivors")
					}
				}
			})
	}

	framework.ConformanceIt("2 kernel confirms", "should stop, in tier cgroup, a process that joined the harness's cgroup from outside its tree, and confirm only once the kernel says the cgroup is empty", tierLabel("cgroup"), func(ctx SpecContext) {
		flags := append([]string{"--deadline", "60", "--grace", "0.2"}, tierFlags("cgroup")...)
		l := newLaunch()
		l.detach(ctx, flags, "sleep")
		h := harness(l.ready(ctx))
		_, waited := joinCgroupOutsider(h.PID)

		r := l.stopWait(ctx)
		expectOutcome(r, "stopped", 143, "TERM", true)
		expectTier(r, "cgroup")
		var werr error
		Eventually(ctx, waited).WithTimeout(10*time.Second).Should(Receive(&werr), "the outsider lives after a confirmed receipt")
		Expect(werr).To(MatchError(ContainSubstring("killed")), "the outsider was ended by the cgroup's kill")
	})

	framework.ConformanceIt("2 stop rules", "should, in tier cgroup with a grace, TERM the harness and its daemon and let them act on it, and end a process that joined the harness's cgroup from outside its tree by the cgroup's kill, without a TERM and unlisted", tierLabel("cgroup"), func(ctx SpecContext) {
		// With a grace, tier cgroup sends its first TERM to the members of
		// the frozen cgroup that belong to the supervisor's tree, then
		// thaws it. A process of this spec's own that joined the cgroup is
		// no member of the tree: it must not be TERMed (mutant
		// cgrouptermall), and the harness must run again to act on its TERM
		// (mutant cgroupnothaw: the grace, three times the stop's
		// allowance, would be waited out).
		flags := append([]string{"--deadline", "600", "--grace", graceLong}, tierFlags("cgroup")...)
		l := newLaunch()
		l.detach(ctx, flags, "daemon")
		rec := l.ready(ctx)
		h, daemon := harness(rec), one(rec, "daemon")
		outsider, waited := joinCgroupOutsider(h.PID)
		// Positive control: the daemon, adopted by the supervisor, is in
		// the harness's cgroup too.
		cg, err := witness.CgroupOf(h.PID)
		Expect(err).NotTo(HaveOccurred())
		Expect(witness.CgroupOf(daemon.PID)).To(Equal(cg), "positive control: the daemon is in the harness's cgroup")

		res := l.warden(ctx, "stop", "--state", l.state, "--wait", graceWait)
		Expect(res.Code).To(Equal(0), "no confirmed receipt within %s s of a %s s grace: %s%s", graceWait, graceLong, res, l.diagnose())
		r := l.receiptPrinted(res)
		expectOutcome(r, "stopped", 143, "TERM", true)
		expectTier(r, "cgroup")
		expectReached(r, h, "group")
		expectReached(r, daemon, "orphan", "descendant")
		for _, m := range r.Reached {
			Expect(m.PID).NotTo(Equal(outsider.Process.Pid), "the outsider, of no rule's reach, is listed as reached: %+v", m)
		}
		var werr error
		Eventually(ctx, waited).WithTimeout(10*time.Second).Should(Receive(&werr), "the outsider lives after a confirmed receipt")
		Expect(werr).To(MatchError(ContainSubstring("killed")), "the outsider was ended by the cgroup's kill, not a TERM")
		expectGone("process", h, daemon)
	})
})

// hostPidsCgroup makes a pids cgroup (v1's pids controller, as on these
// hosts) limited to max tasks, removed after the spec once empty; it
// returns its directory and a reader of its refused-fork count.
func hostPidsCgroup(max int) (string, func() int) {
	GinkgoHelper()
	requireRoot("a pids cgroup")
	root := "/sys/fs/cgroup/pids"
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		framework.Missing("a writable pids cgroup at "+root+" (cgroup v1's pids controller)", "run on a host with the pids controller mounted there, as Debian 12 hosts with a hybrid hierarchy have")
	}
	dir := filepath.Join(root, fmt.Sprintf("sandproof-bomb-%d-%d", os.Getpid(), time.Now().UnixNano()))
	Expect(os.Mkdir(dir, 0o755)).To(Succeed())
	DeferCleanup(func() {
		// Whatever a failed spec left in it: SIGKILL by pid (all ours, as
		// the cgroup is), then remove the emptied group.
		Eventually(func() error {
			data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return os.Remove(dir)
		}).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	})
	Expect(os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(max)), 0o644)).To(Succeed())
	events := func() int { return pidsRefused(filepath.Join(dir, "pids.events")) }
	Expect(events()).To(Equal(0), "a new cgroup has refused nothing yet")
	return dir, events
}

var _ = Describe("warden supervise, sharing a pids limit with a fork bomb,", framework.Local, framework.Hostile, func() {
	for _, tier := range hostTiers {
		framework.ConformanceIt("2 hold", fmt.Sprintf("should survive its harness filling the pids limit, stop the bomb and confirm, in tier %s, three times in a row", tier), tierLabel(tier), func(ctx SpecContext) {
			flags := append([]string{"--deadline", "4", "--grace", "0.2", "--user", "1000", "--detach"}, tierFlags(tier)...)
			for attempt := 1; attempt <= 3; attempt++ {
				By(fmt.Sprintf("attempt %d", attempt))
				// warden, its reserved threads, the harness and more bombs
				// than the stop engine signals one by one (64): the table is
				// large enough for the supervisor's parallel paths, one
				// goroutine, so one OS thread, per P.
				cg, events := hostPidsCgroup(128)
				l := newLaunch()
				shared, bin := sharedAdversary("sandproof-bomb-")
				l.record = filepath.Join(shared, "record")
				name := uniqueComm("bomb")
				DeferCleanup(killNamed, name)
				GinkgoT().Setenv("ADVERSARY_BOMB_NAME", name)
				// The front joins the cgroup before it execs warden, so the
				// supervisor and everything it starts count against the limit.
				// GOMAXPROCS=32 is a host with 32 CPUs and no CPU limit, as
				// a Go supervisor sees it: the threads its parallel paths
				// need there must exist before the bomb takes the rest.
				// The harness (a Go program too) gets the host's own: with 32
				// Ps it would need threads the bomb leaves it none of, and
				// exit before the deadline.
				args := append([]string{"-c", `echo $$ > "$0/cgroup.procs" && GOMAXPROCS=32 exec "$@"`, cg, framework.Bin.Warden},
					l.superviseArgs(flags, []string{"/usr/bin/env", "-u", "GOMAXPROCS", bin, "--record", l.record, "fork-bomb"})...)
				res := procs.Warden(ctx, "/bin/sh", l.cwd, args...)
				Expect(res.Code).To(Equal(0), "%s", res)
				d, err := witness.ParseDetached(res.Stdout)
				Expect(err).NotTo(HaveOccurred())
				sup, err := witness.Proc.ReadStat(d.SupervisorPID)
				Expect(err).NotTo(HaveOccurred(), "the supervisor runs")
				l.supervisor = sup.ID()
				member, err := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
				Expect(err).NotTo(HaveOccurred())
				Expect(strings.Fields(string(member))).To(ContainElement(strconv.Itoa(d.SupervisorPID)), "positive control: the supervisor is in the limited cgroup")
				// Positive controls: the bomb grew, and the kernel refused it.
				Eventually(ctx, func() int { return len(living(name)) }).
					WithTimeout(20*time.Second).Should(BeNumerically(">=", 64), "positive control: the bomb grew past the parallel threshold; %s", lazy(l.diagnose))
				Eventually(ctx, events).WithTimeout(20*time.Second).Should(BeNumerically(">", 0), "positive control: the bomb hit the pids limit")

				var r *witness.Receipt
				Eventually(ctx, func() error {
					var err error
					if r, err = witness.ReadReceipt(l.state); err == nil {
						return nil
					}
					if procs.Alive(l.supervisor) {
						return err
					}
					// Gone: it wrote the receipt just before it exited, or
					// it died without one (no need to wait out the minute).
					if r, err = witness.ReadReceipt(l.state); err != nil {
						return StopTrying("the supervisor exited: " + err.Error())
					}
					return nil
				}).WithTimeout(60*time.Second).WithPolling(50*time.Millisecond).Should(Succeed(),
					"no receipt: the supervisor did not survive the bomb; %s", lazy(l.diagnose))
				Expect(r.Cause).To(Equal("deadline"))
				expectTier(r, tier)
				Expect(r.CleanupConfirmed).To(BeTrue(), "survivors %+v, error %v", r.Survivors, r.Error)
				Expect(r.Survivors).To(BeEmpty())
				Expect(len(r.Reached)).To(BeNumerically(">=", 64), "the stop reached the bomb")
				Consistently(ctx, func() []witness.Stat { return living(name) }).
					WithTimeout(300*time.Millisecond).WithPolling(10*time.Millisecond).
					Should(BeEmpty(), "a bomb process lives after a confirmed receipt")
			}
		})
	}
})

var _ = Describe("warden service, facing a process that claims to be a service,", framework.Local, framework.Hostile, func() {
	framework.ConformanceIt("2 services by identity", "should stop an env-spoofed service and keep the declared one", func(ctx SpecContext) {
		l := newLaunch()
		l.detach(ctx, []string{"--deadline", "60", "--grace", "0.5"}, "env-spoofer")
		rec := l.ready(ctx)
		spoof := one(rec, "env-spoofer")
		env, err := witness.Proc.Environ(spoof.PID)
		Expect(err).NotTo(HaveOccurred())
		Expect(env).To(ContainElement(HavePrefix("WARDEN_SERVICE=")), "positive control: the spoofer claims the service marker")
		Expect(env).NotTo(ContainElement(HavePrefix("WARDEN_LAUNCH=")), "positive control: the spoofer dropped the launch marker")

		svcRecord := filepath.Join(l.dir, "service-record")
		procs.KillOnCleanup(func() []witness.ID { return witness.RecordedIDs(svcRecord) })
		res := l.warden(ctx, "service", "--state", l.state, "--name", "db", "--",
			framework.Fixture("adversary"), "--record", svcRecord, "sleep")
		Expect(res.Code).To(Equal(0), "%s", res)
		svc := &launch{record: svcRecord}
		svcMain := harness(svc.ready(ctx))

		r := l.stopWait(ctx)
		expectOutcome(r, "stopped", 143, "TERM", true)
		expectReached(r, spoof)
		expectGone("spoofer", spoof)
		_, kept := witness.Find(r.Preserved, svcMain.ID())
		Expect(kept).To(BeTrue(), "the declared service is preserved: %+v", r.Preserved)
		Expect(procs.Alive(svcMain.ID())).To(BeTrue(), "the declared service survives the launch's stop")

		res = l.warden(ctx, "stop", "--state", l.state, "--services", "--wait", "45")
		Expect(res.Code).To(Equal(0), "%s%s", res, l.diagnose())
		expectGone("service", svcMain)
	})

	framework.ConformanceIt("2 services by identity", "should keep a declared service that daemonizes, and its daemon, through the launch's stop", func(ctx SpecContext) {
		l := newLaunch()
		l.detach(ctx, []string{"--deadline", "60", "--grace", "0.5"}, "setsid-tool")
		rec := l.ready(ctx)

		svcRecord := filepath.Join(l.dir, "service-record")
		procs.KillOnCleanup(func() []witness.ID { return witness.RecordedIDs(svcRecord) })
		res := l.warden(ctx, "service", "--state", l.state, "--name", "db", "--",
			framework.Fixture("adversary"), "--record", svcRecord, "daemon", "drop-marker")
		Expect(res.Code).To(Equal(0), "%s", res)
		svc := &launch{record: svcRecord}
		svcRec := svc.ready(ctx)
		daemons := svcRec.Role("daemon")
		Expect(daemons).To(HaveLen(2), "the service double-forked two daemons")
		for _, d := range daemons {
			st, err := witness.Proc.Lookup(d.ID())
			Expect(err).NotTo(HaveOccurred())
			Expect(st.PPID).NotTo(Equal(d.PPID), "positive control: daemon %v was orphaned (its middle exited)", d.ID())
		}

		r := l.stopWait(ctx)
		expectOutcome(r, "stopped", 143, "TERM", true)
		expectGone("tool", harness(rec), one(rec, "setsid"))
		for _, d := range daemons {
			_, reached := witness.Find(r.Reached, d.ID())
			Expect(reached).To(BeFalse(), "the service's daemon %v was reached", d.ID())
			_, kept := witness.Find(r.Preserved, d.ID())
			Expect(kept).To(BeTrue(), "the service's daemon %v is listed as preserved: %+v", d.ID(), r.Preserved)
			Expect(procs.Alive(d.ID())).To(BeTrue(), "the service's daemon %v still runs", d.ID())
		}

		res = l.warden(ctx, "stop", "--state", l.state, "--services", "--wait", "45")
		Expect(res.Code).To(Equal(0), "%s%s", res, l.diagnose())
		expectGone("service daemon", daemons...)
	})

	framework.ConformanceIt("2 services by identity", "should keep, in tier cgroup, a declared service out of the harness's cgroup when the stop kills that cgroup, and stop the services' own cgroup on stop --services", tierLabel("cgroup"), func(ctx SpecContext) {
		flags := append([]string{"--deadline", "60", "--grace", "0.2"}, tierFlags("cgroup")...)
		l := newLaunch()
		l.detach(ctx, flags, "ignore-term")
		h := harness(l.ready(ctx))

		svcRecord := filepath.Join(l.dir, "service-record")
		procs.KillOnCleanup(func() []witness.ID { return witness.RecordedIDs(svcRecord) })
		res := l.warden(ctx, "service", "--state", l.state, "--name", "db", "--",
			framework.Fixture("adversary"), "--record", svcRecord, "daemon")
		Expect(res.Code).To(Equal(0), "%s", res)
		daemons := (&launch{record: svcRecord}).ready(ctx).Role("daemon")
		Expect(daemons).To(HaveLen(1), "the service double-forked a daemon")
		daemon := daemons[0]

		// Positive control: the harness and the service's daemon live in
		// two sibling cgroups, the launch's own.
		mount, err := witness.Cgroup2Mount()
		Expect(err).NotTo(HaveOccurred())
		harnessCg, err := witness.CgroupOf(h.PID)
		Expect(err).NotTo(HaveOccurred())
		svcCg, err := witness.CgroupOf(daemon.PID)
		Expect(err).NotTo(HaveOccurred())
		Expect(svcCg).NotTo(Equal(harnessCg), "the service runs outside the harness's cgroup")
		Expect(filepath.Dir(svcCg)).To(Equal(filepath.Dir(harnessCg)), "the services' cgroup is the harness's sibling")
		Expect(filepath.Base(filepath.Dir(harnessCg))).To(HavePrefix("warden-"), "the harness's cgroup is the launch's own")

		r := l.stopWait(ctx)
		// The harness ignores TERM: only the kill after the grace ends it.
		expectOutcome(r, "stopped", 137, "KILL", true)
		expectTier(r, "cgroup")
		expectGone("harness", h)
		_, kept := witness.Find(r.Preserved, daemon.ID())
		Expect(kept).To(BeTrue(), "the service's daemon is preserved: %+v", r.Preserved)
		Expect(procs.Alive(daemon.ID())).To(BeTrue(), "the service's daemon survives the kill of the harness's cgroup")
		Expect(filepath.Join(mount, harnessCg)).NotTo(BeADirectory(), "the harness's cgroup is removed after the stop")

		res = l.warden(ctx, "stop", "--state", l.state, "--services", "--wait", "45")
		Expect(res.Code).To(Equal(0), "%s%s", res, l.diagnose())
		expectGone("service daemon", daemon)
		data, err := os.ReadFile(filepath.Join(l.state, "services-receipt.json"))
		Expect(err).NotTo(HaveOccurred())
		// Read loosely: the services' receipt names its members' why
		// "service", which witness.ParseReceipt (section 3) refuses.
		var sr witness.Receipt
		Expect(json.Unmarshal(data, &sr)).To(Succeed())
		Expect(sr.CleanupConfirmed).To(BeTrue(), "services receipt: %s", data)
		expectTier(&sr, "cgroup")
		Eventually(ctx, func() string { return filepath.Join(mount, filepath.Dir(svcCg)) }).
			WithTimeout(10*time.Second).ShouldNot(BeADirectory(), "the launch's cgroups are removed once the services are stopped")
	})
})

// joinCgroupOutsider starts a process of the spec's own, outside the
// supervisor's tree and without the marker, and moves it into the cgroup
// of the harness pid: nothing but the cgroup links it to the launch. It
// returns the process and the channel its Wait's error arrives on, after
// the positive controls: the kernel lists it in that cgroup, and it runs.
func joinCgroupOutsider(harnessPID int) (*exec.Cmd, chan error) {
	cg, err := witness.CgroupOf(harnessPID)
	Expect(err).NotTo(HaveOccurred())
	mount, err := witness.Cgroup2Mount()
	Expect(err).NotTo(HaveOccurred())
	outsider := exec.Command("sleep", "1000")
	outsider.Env = []string{}
	Expect(outsider.Start()).To(Succeed())
	DeferCleanup(func() { outsider.Process.Kill() })
	waited := make(chan error, 1)
	go func() { waited <- outsider.Wait() }()
	Expect(os.WriteFile(filepath.Join(mount, cg, "cgroup.procs"), []byte(strconv.Itoa(outsider.Process.Pid)), 0)).To(Succeed())
	Expect(witness.CgroupOf(outsider.Process.Pid)).To(Equal(cg), "positive control: the outsider joined the harness's cgroup")
	st, err := witness.Proc.ReadStat(outsider.Process.Pid)
	Expect(err).NotTo(HaveOccurred())
	Expect(st.Dead()).To(BeFalse(), "positive control: the outsider runs")
	return outsider, waited
}
