package conformance_test

// Hostile specs inside containers of the three test images: the
// fork-and-exit hopper, and a fork bomb that fills the container's pids
// limit, each three times per image. The host's own /proc sees every
// process of a container (one kernel), so the positive controls and the
// "is gone" checks read it by the adversary's unique process name; the bomb
// spec reads the container's pids cgroup on the host too, because while the
// bomb sits at the limit no exec can start in the container.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sandproof/sandproof/conformance/containers"
	"github.com/sandproof/sandproof/conformance/framework"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/witness"
)

// bombPidsLimit is the pids limit of a bomb's container (tasks: threads
// count): small, so the bomb reaches it at once, and big enough for
// warden's reserved threads (about 20), the harness and a bomb of a dozen.
const bombPidsLimit = 48

var _ = Describe("warden, inside containers of the test images, facing processes that try to outrun the stop,", framework.Docker, framework.Hostile, func() {
	uid1000 := ctrUsers[1]
	DescribeTableSubtree("in image", func(image string) {
		Describe("in one container,", Ordered, func() {
			var b *ctrBox
			BeforeAll(func(ctx SpecContext) {
				b = ctrStart(ctx, image)
			}, NodeTimeout(3*time.Minute))

			framework.ConformanceIt("2 kernel confirms", "should stop a fork-and-exit hopper and confirm only once it is dead, three times in a row", func(ctx SpecContext) {
				for attempt := 1; attempt <= 3; attempt++ {
					By(fmt.Sprintf("attempt %d", attempt))
					l := b.newLaunch(uid1000)
					name := uniqueComm("hop")
					res := l.b.Run(ctx, containers.Exec{
						Argv: append([]string{ctrWarden}, l.supervise([]string{"--deadline", "60", "--grace", "0.2", "--detach"}, "hopper")...),
						Env:  append(l.b.Env(), "ADVERSARY_HOP_NAME="+name, "ADVERSARY_HOP_NS=200000"),
					})
					Expect(res.Code).To(Equal(0), "%s", res)
					l.ready(ctx, l.rec)
					// Positive control: the hopper hops (its heartbeat grows
					// by many incarnations) and the host's /proc shows one
					// of them alive under its name.
					hopped := func() int { return len(ctrHops(ctx, l)) }
					start := hopped()
					Eventually(ctx, func() int { return hopped() - start }).
						WithTimeout(20*time.Second).Should(BeNumerically(">=", 20), "the hopper never hopped")
					Eventually(ctx, func() []witness.Stat { return living(name) }).
						WithTimeout(20*time.Second).ShouldNot(BeEmpty(), "positive control: a hopper is alive and visible")

					r := l.stopWait(ctx)
					ctrOutcome(r, "stopped", 143, "TERM")
					// Never a confirmed receipt while a tree process lives.
					after := hopped()
					Consistently(ctx, func() []witness.Stat { return living(name) }).
						WithTimeout(300*time.Millisecond).WithPolling(10*time.Millisecond).
						Should(BeEmpty(), "a hopper lives after a confirmed receipt in %s", image)
					Expect(hopped()).To(Equal(after), "the hopper went on hopping after a confirmed receipt in %s", image)
				}
			}, SpecTimeout(ctrSpecTimeout))
		})

		framework.ConformanceIt("2 kernel confirms", "should leave a process started outside its tree to the owner's probe, which fails the case although the receipt is confirmed", func(ctx SpecContext) {
			b := ctrStart(ctx, image)
			probeBin := buildProbe()
			const ctrProbe = ctrBin + "/probe"
			b.Upload(containers.HostFile(probeBin, ctrProbe, 0o755))
			// An image daemon that starts a process when asked over a FIFO
			// (a language server, an sshd): started by its own exec, so it
			// is no descendant of any supervisor, and without the marker.
			dir := path.Join(ctrRuns, fmt.Sprintf("outside-%d", GinkgoParallelProcess()))
			fifo, outRec := dir+"/spawn.fifo", dir+"/outside"
			b.Upload(containers.File{Path: dir, Mode: 0o777, Dir: true})
			b.Detach(ctx, containers.Exec{
				Argv: []string{"/bin/sh", "-c", `mkfifo -m 0666 "$0" && while :; do if read req < "$0"; then "$1" --record "$2" sleep & fi; done`, fifo, ctrAdv, outRec},
				Env:  b.Env(), User: uid1000.exec,
			})
			Eventually(ctx, func() bool {
				return b.Run(ctx, containers.Exec{Argv: []string{"/bin/sh", "-c", `test -p "$0"`, fifo}}).Code == 0
			}).WithTimeout(20*time.Second).WithPolling(100*time.Millisecond).Should(BeTrue(), "the daemon made its FIFO")
			// The owner's probe, as certify runs it: a snapshot of the
			// container before and after, and its diff. certify's
			// verify.no_new_processes fails a case on new_processes.
			snapshot := func(name string) string {
				res := b.Run(ctx, containers.Exec{Argv: []string{ctrProbe, "snapshot"}})
				Expect(res.Code).To(Equal(0), "probe snapshot: %s", res)
				out := dir + "/" + name + ".json"
				b.Upload(containers.File{Path: out, Mode: 0o644, Data: []byte(res.Stdout)})
				return out
			}
			type probeProcess struct {
				PID  int    `json:"pid"`
				Comm string `json:"comm"`
			}
			newProcesses := func(before, after string) []probeProcess {
				res := b.Run(ctx, containers.Exec{Argv: []string{ctrProbe, "diff", before, after}})
				Expect(res.Code).To(BeElementOf(0, 1), "probe diff: %s", res)
				var d struct {
					NewProcesses []probeProcess `json:"new_processes"`
				}
				Expect(json.Unmarshal([]byte(res.Stdout), &d)).To(Succeed(), "probe diff: %s", res)
				return d.NewProcesses
			}
			launch := func(ask bool) *witness.Receipt {
				l := b.newLaunch(uid1000)
				script := "exec sleep 1000"
				if ask {
					script = `echo start > "$0" && exec sleep 1000`
				}
				res := l.warden(ctx, append([]string{"supervise", "--state", l.state, "--deadline", "60", "--grace", "0.5", "--detach"},
					append(l.u.flags, "--", "/bin/sh", "-c", script, fifo)...)...)
				Expect(res.Code).To(Equal(0), "%s", res)
				if ask {
					// Positive control: the daemon's process runs, outside
					// the supervisor's tree and without the marker.
					rec := l.ready(ctx, outRec)
					outsider := ctrOne(rec, "harness")
					Expect(outsider.HasMarker).To(BeFalse(), "the outsider carries no marker")
					Expect(l.b.ProcState(ctx, outsider.ID())).To(Equal("alive"))
					r := l.stopWait(ctx)
					ctrOutcome(r, "stopped", 143, "TERM")
					_, reached := witness.Find(r.Reached, outsider.ID())
					Expect(reached).To(BeFalse(), "the outsider was reached: the documented gap is closed, update the threat model")
					Expect(l.b.ProcState(ctx, outsider.ID())).To(Equal("alive"), "the outsider outlives the confirmed receipt (the documented gap)")
					return r
				}
				Eventually(ctx, func() bool {
					data, ok := l.b.ReadFile(ctx, l.state+"/claim")
					return ok && len(data) > 0
				}).WithTimeout(20 * time.Second).Should(BeTrue())
				r := l.stopWait(ctx)
				ctrOutcome(r, "stopped", 143, "TERM")
				return r
			}

			By("control: a launch that asks nothing of the daemon leaves no new process for the probe")
			before := snapshot("control-before")
			launch(false)
			Expect(newProcesses(before, snapshot("control-after"))).To(BeEmpty(), "the probe saw a new process in a clean case")

			By("a launch that has the daemon start a process: confirmed receipt, and the probe fails the case")
			before = snapshot("before")
			launch(true)
			rec, err := (&ctrLaunch{b: b}).record(ctx, outRec)
			Expect(err).NotTo(HaveOccurred())
			outsider := ctrOne(rec, "harness")
			Expect(newProcesses(before, snapshot("after"))).To(ContainElement(And(HaveField("PID", outsider.PID), HaveField("Comm", "adversary"))),
				"the owner's probe missed the process started outside the tree")
		}, SpecTimeout(ctrSpecTimeout))

		framework.ConformanceIt("2 hold", "should stop a fork bomb sitting at the container's pids limit and confirm, three times in a row", func(ctx SpecContext) {
			b := ctrStartLimited(ctx, image, provider.Limits{PidsLimit: bombPidsLimit})
			events := hostPidsEvents(b)
			for attempt := 1; attempt <= 3; attempt++ {
				By(fmt.Sprintf("attempt %d", attempt))
				l := b.newLaunch(uid1000)
				name := uniqueComm("bomb")
				before := events()
				// The supervisor's own deadline ends the launch: while the
				// bomb holds every pid, `warden stop` could not even start.
				res := l.b.Run(ctx, containers.Exec{
					Argv: append([]string{ctrWarden}, l.supervise([]string{"--deadline", "4", "--grace", "0.2", "--detach"}, "fork-bomb")...),
					Env:  append(l.b.Env(), "ADVERSARY_BOMB_NAME="+name),
				})
				Expect(res.Code).To(Equal(0), "%s", res)
				// Positive controls, from the host: the bomb grew, and the
				// kernel refused it pids (it reached the limit).
				Eventually(ctx, func() int { return len(living(name)) }).
					WithTimeout(20*time.Second).Should(BeNumerically(">=", 5), "positive control: the bomb grew; %s", lazy(func() string { return l.diagnose(ctx) }))
				Eventually(ctx, func() int { return events() - before }).
					WithTimeout(20*time.Second).Should(BeNumerically(">", 0), "positive control: the bomb hit the pids limit")

				r := l.bombReceipt(ctx)
				Expect(r.Cause).To(Equal("deadline"), "the harness ended before the deadline (return code %s, signal %s)%s",
					lazy(func() string { return derefText(r.ReturnCode) }), lazy(func() string { return derefText(r.Signal) }),
					lazy(func() string { return l.diagnose(ctx) }))
				Expect(r.CleanupConfirmed).To(BeTrue(), "the bomb was not held and killed: survivors %+v, error %v", r.Survivors, r.Error)
				Expect(r.Survivors).To(BeEmpty())
				Expect(len(r.Reached)).To(BeNumerically(">=", 5), "the stop reached the bomb")
				Consistently(ctx, func() []witness.Stat { return living(name) }).
					WithTimeout(300*time.Millisecond).WithPolling(10*time.Millisecond).
					Should(BeEmpty(), "a bomb process lives after a confirmed receipt in %s", image)
			}
		}, SpecTimeout(ctrSpecTimeout))

		framework.ConformanceIt("2 hold", "should read other users' environments through a bomb at the pids limit and confirm, three times in a row", func(ctx SpecContext) {
			// Forty processes of uid 1000 outside the tree, started after
			// the harness: the marker rule has the stop read each one's
			// environ every round, which root without CAP_SYS_PTRACE does
			// with the owner's filesystem ids on a thread of their own.
			// The bomb then holds every other pid, so the supervisor can
			// make no thread: reads that each cost one (a thread per read)
			// abort it past its reserve, and no receipt is written.
			const outsiders = 40
			b := ctrStartLimited(ctx, image, provider.Limits{PidsLimit: bombPidsLimit + outsiders + 1})
			events := hostPidsEvents(b)
			for attempt := 1; attempt <= 3; attempt++ {
				By(fmt.Sprintf("attempt %d", attempt))
				l := b.newLaunch(uid1000)
				name := uniqueComm("bomb")
				gate := l.dir + "/gate"
				before := events()
				res := l.b.Run(ctx, containers.Exec{
					Argv: append([]string{ctrWarden}, l.supervise([]string{"--deadline", "10", "--grace", "0.2", "--detach"}, "gate", gate, "fork-bomb")...),
					Env:  append(l.b.Env(), "ADVERSARY_BOMB_NAME="+name),
				})
				Expect(res.Code).To(Equal(0), "%s", res)
				Eventually(ctx, func() (bool, error) {
					rec, err := l.record(ctx, l.rec)
					return rec != nil && len(rec.Procs) > 0, err
				}).WithTimeout(30*time.Second).WithPolling(50*time.Millisecond).Should(BeTrue(),
					"the harness never started; %s", lazy(func() string { return l.diagnose(ctx) }))

				// The outsiders: a shell of uid 1000 (its parent the
				// engine's shim) and its forty sleeps.
				sh := l.b.Go(ctx, containers.Exec{
					Argv: []string{"/bin/sh", "-c", fmt.Sprintf(`i=0; while [ $i -lt %d ]; do sleep 600 & i=$((i+1)); done; wait`, outsiders)},
					User: uid1000.exec,
				})
				sleeps := func() int {
					table, err := witness.Proc.Table()
					Expect(err).NotTo(HaveOccurred())
					n := 0
					for _, st := range table {
						if st.PPID == sh.HostPID && st.Comm == "sleep" && !st.Dead() {
							n++
						}
					}
					return n
				}
				Eventually(ctx, sleeps).WithTimeout(30*time.Second).Should(Equal(outsiders), "positive control: the outsiders run (shell %d: %s)",
					sh.HostPID, lazy(func() string { return fmt.Sprint(hostProcsOf(sh.HostPID)) }))

				l.b.Upload(containers.File{Path: gate, Mode: 0o644})
				Eventually(ctx, func() int { return len(living(name)) }).
					WithTimeout(20*time.Second).Should(BeNumerically(">=", 5), "positive control: the bomb grew; %s", lazy(func() string { return l.diagnose(ctx) }))
				Eventually(ctx, func() int { return events() - before }).
					WithTimeout(20*time.Second).Should(BeNumerically(">", 0), "positive control: the bomb hit the pids limit")

				r := l.bombReceipt(ctx)
				Expect(r.Cause).To(Equal("deadline"), "the harness ended before the deadline%s", lazy(func() string { return l.diagnose(ctx) }))
				Expect(r.CleanupConfirmed).To(BeTrue(), "the bomb was not held and killed: survivors %+v, error %v", r.Survivors, r.Error)
				Expect(r.Survivors).To(BeEmpty())
				Expect(len(r.Reached)).To(BeNumerically(">=", 5), "the stop reached the bomb")
				// The outsiders' environments (uid 1000, unreadable with
				// root's own ids) were read: none is listed unverified. (An
				// exec the spec runs meanwhile may be: runc's init is not
				// dumpable while it sets the exec up.)
				for _, m := range r.Unverified {
					Expect(m.Comm).NotTo(BeElementOf("sleep", "sh"), "the stop could not read an outsider's environment: %+v", r.Unverified)
				}
				Expect(sleeps()).To(Equal(outsiders), "the outsiders are not the launch's: every one still runs")
				Consistently(ctx, func() []witness.Stat { return living(name) }).
					WithTimeout(300*time.Millisecond).WithPolling(10*time.Millisecond).
					Should(BeEmpty(), "a bomb process lives after a confirmed receipt in %s", image)

				// The sleeps are KILLed from the host (their shell, still
				// their parent, holds their pids until it reaps them), so
				// the shell reaps them and ends: orphans would stay as
				// zombies under the container's pid 1 and hold the pids the
				// next attempt needs.
				for _, st := range hostProcsOf(sh.HostPID) {
					if st.PPID == sh.HostPID && st.Comm == "sleep" {
						Expect(syscall.Kill(st.PID, syscall.SIGKILL)).To(Succeed())
					}
				}
				Eventually(ctx, sh.Done()).WithTimeout(30*time.Second).Should(BeClosed(), "the outsiders' shell did not end")
			}
		}, SpecTimeout(ctrSpecTimeout))
	},
		Entry("debian-12", Label("image:debian-12"), "debian-12"),
		Entry("alpine-class", Label("image:alpine-class"), "alpine-class"),
		Entry("old-python", Label("image:old-python"), "old-python"),
	)
})

// bombReceipt waits (90 s) for the receipt of a detached launch that a
// bomb shares the pids limit with: the supervisor's deadline ends it, since
// no `warden stop` could start while the bomb holds every pid.
func (l *ctrLaunch) bombReceipt(ctx context.Context) *witness.Receipt {
	GinkgoHelper()
	var r *witness.Receipt
	Eventually(ctx, func() bool {
		data, ok := l.b.ReadFile(ctx, l.state+"/"+witness.ReceiptFile)
		if !ok {
			return false
		}
		host := GinkgoT().TempDir()
		Expect(os.WriteFile(filepath.Join(host, witness.ReceiptFile), data, 0o600)).To(Succeed())
		var err error
		r, err = witness.ReadReceipt(host)
		Expect(err).NotTo(HaveOccurred(), "receipt %s", data)
		return true
	}).WithTimeout(90*time.Second).WithPolling(250*time.Millisecond).Should(BeTrue(),
		"no receipt: the supervisor did not survive the bomb; %s", lazy(func() string { return l.diagnose(ctx) }))
	return r
}

// hostProcsOf lists the host's processes that are pid or its children.
func hostProcsOf(pid int) []witness.Stat {
	table, _ := witness.Proc.Table()
	var out []witness.Stat
	for _, st := range table {
		if st.PID == pid || st.PPID == pid {
			out = append(out, st)
		}
	}
	return out
}

// buildProbe builds the owner's probe (static) once per process.
func buildProbe() string {
	GinkgoHelper()
	probeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sandproof-probe-")
		Expect(err).NotTo(HaveOccurred())
		probePath = filepath.Join(dir, "probe")
		cmd := exec.Command("go", "build", "-trimpath", "-o", probePath, "./cmd/probe")
		cmd.Dir = moduleRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "go build ./cmd/probe:\n%s", out)
	})
	return probePath
}

var (
	probeOnce sync.Once
	probePath string
)

// derefText is *p as text, "none" for nil.
func derefText[T any](p *T) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(*p)
}

// lazy is a failure message part computed only when it is printed.
type lazy func() string

func (f lazy) String() string { return f() }

// ctrHops reads the hopper's heartbeat file in the container: one pid per
// incarnation.
func ctrHops(ctx context.Context, l *ctrLaunch) []int {
	GinkgoHelper()
	data, ok := l.b.ReadFile(ctx, l.rec+".hops")
	if !ok {
		return nil
	}
	return heartbeatPIDs(data)
}

// hostPidsEvents returns a reader of the container's pids cgroup "max"
// count (how many forks the limit refused), from the host: the container's
// pid 1 names its cgroup in the host's /proc.
func hostPidsEvents(b *ctrBox) func() int {
	GinkgoHelper()
	pid1 := b.Res.Container.State.Pid
	Expect(pid1).To(BeNumerically(">", 0), "the container's pid 1 on the host")
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid1))
	Expect(err).NotTo(HaveOccurred())
	file := ""
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		switch {
		case len(parts) == 3 && parts[1] == "pids":
			file = filepath.Join("/sys/fs/cgroup/pids", parts[2], "pids.events")
		case len(parts) == 3 && parts[0] == "0" && parts[1] == "" && file == "":
			file = filepath.Join("/sys/fs/cgroup", parts[2], "pids.events")
		}
	}
	Expect(file).NotTo(BeEmpty(), "no pids cgroup in %s", data)
	read := func() int { return pidsRefused(file) }
	read() // it must be readable before the spec relies on it
	return read
}
