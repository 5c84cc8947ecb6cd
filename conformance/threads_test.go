package conformance_test

// Threads, not leaders (issue 25): a tool whose main thread called
// pthread_exit shows its leader as a zombie (stat state Z) while its second
// thread writes on. A stop that takes a Z leader for dead confirms a
// cleanup while the tool writes into the verifier's view. These specs start
// the fixtures/c/zombielead writer under setsid from a harness, prove it
// wrote before the stop and shows Z with two threads (the positive
// control), and require that not a byte is written after the receipt,
// which confirms only once the tool is gone: on this host in both tiers,
// and inside the three test images.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sandproof/sandproof/conformance/containers"
	"github.com/sandproof/sandproof/conformance/framework"
	"github.com/sandproof/sandproof/conformance/procs"
	"github.com/sandproof/sandproof/runner/witness"
)

// zombieLeadScript is the harness: it starts the writer in a session of
// its own (setsid) and stays, as sleep, until the stop TERMs it. $0 is the
// writer, $1 its heartbeat file; the writer gives up by itself after 60 s.
const zombieLeadScript = `setsid "$0" "$1" 60 </dev/null >/dev/null 2>&1 & exec sleep 120`

// heartbeatPID returns the writer's pid from its first heartbeat line
// ("PID SEQ"), or 0 while there is none.
func heartbeatPID(data []byte) int {
	line, _, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return 0
	}
	f := bytes.Fields(line)
	if len(f) != 2 {
		return 0
	}
	pid, err := strconv.Atoi(string(f[0]))
	if err != nil {
		return 0
	}
	return pid
}

// expectZombieLeader is the positive control of a writer: state Z (its
// main thread exited) with at least two threads, in a session of its own.
func expectZombieLeader(st witness.Stat) {
	GinkgoHelper()
	Expect(st.State).To(Equal(byte('Z')), "positive control: the writer's leader is a zombie (%+v)", st)
	Expect(st.Threads).To(BeNumerically(">=", 2), "positive control: the writer's second thread runs (%+v)", st)
	Expect(st.SID).To(Equal(st.PID), "positive control: the harness started the writer under setsid (%+v)", st)
	Expect(st.Dead()).To(BeFalse(), "positive control: witness counts a Z leader with a live thread as alive")
}

var _ = Describe("warden supervise, facing a tool whose main thread exited while another thread writes,", framework.Local, framework.Hostile, func() {
	for _, tier := range hostTiers {
		framework.ConformanceIt("2 kernel confirms", fmt.Sprintf("should stop it in tier %s: not a byte written after the receipt, which confirms only once it is gone", tier), tierLabel(tier), func(ctx SpecContext) {
			writer := framework.Fixture("zombielead")
			l := newLaunch()
			hb := filepath.Join(l.dir, "heartbeat")
			var tool witness.ID
			procs.KillOnCleanup(func() []witness.ID {
				if tool.PID == 0 {
					return nil
				}
				return []witness.ID{tool}
			})
			flags := append([]string{"--deadline", "60", "--grace", "0.5"}, tierFlags(tier)...)
			l.detachCommand(ctx, flags, []string{"/bin/sh", "-c", zombieLeadScript, writer, hb})
			size := func() int {
				data, err := os.ReadFile(hb)
				if errors.Is(err, os.ErrNotExist) {
					return 0
				}
				Expect(err).NotTo(HaveOccurred())
				return len(data)
			}

			// Positive control: it writes, its leader is a zombie with a
			// live second thread, and it keeps writing.
			Eventually(ctx, func() int {
				data, _ := os.ReadFile(hb)
				return heartbeatPID(data)
			}).WithTimeout(20*time.Second).ShouldNot(BeZero(), "the writer never wrote; %s", lazy(l.diagnose))
			data, err := os.ReadFile(hb)
			Expect(err).NotTo(HaveOccurred())
			pid := heartbeatPID(data)
			var st witness.Stat
			Eventually(ctx, func() (byte, error) {
				st, err = witness.Proc.ReadStat(pid)
				return st.State, err
			}).WithTimeout(5*time.Second).Should(Equal(byte('Z')), "positive control: the writer's main thread exits")
			tool = st.ID()
			expectZombieLeader(st)
			before := size()
			Eventually(ctx, size).WithTimeout(5*time.Second).Should(BeNumerically(">", before), "positive control: the writer writes while its leader is a zombie")

			r := l.stopWait(ctx)
			atReceipt := size()
			expectOutcome(r, "stopped", 143, "TERM", true)
			expectTier(r, tier)
			Consistently(ctx, size).WithTimeout(time.Second).WithPolling(20*time.Millisecond).
				Should(Equal(atReceipt), "the writer wrote after the receipt")
			// Confirmed only once it is gone: the receipt is already there.
			Expect(witness.Proc.State(tool)).To(Equal("gone"), "the writer outlives a confirmed receipt")
			_, reached := witness.Find(r.Reached, tool)
			Expect(reached).To(BeTrue(), "the writer %v is not in reached %+v", tool, r.Reached)
			GinkgoWriter.Printf("zombie leader, tier %s: %d reached, stop %.3f s, %d heartbeat bytes\n", r.Tier, len(r.Reached), r.StopSeconds, atReceipt)
		})
	}
})

var _ = Describe("warden, inside containers of the test images, facing a tool whose main thread exited while another thread writes,", framework.Docker, framework.Hostile, func() {
	uid1000 := ctrUsers[1]
	DescribeTableSubtree("in image", func(image string) {
		framework.ConformanceIt("2 kernel confirms", "should stop it: not a byte written after the receipt, which confirms only once it is gone", func(ctx SpecContext) {
			writer := framework.Fixture("zombielead")
			b := ctrStart(ctx, image)
			const ctrWriter = ctrBin + "/zombielead"
			b.Upload(containers.HostFile(writer, ctrWriter, 0o755))
			l := b.newLaunch(uid1000)
			hb := l.recDir + "/heartbeat"
			read := func() []byte {
				data, _ := l.b.ReadFile(ctx, hb) // missing reads empty
				return data
			}
			size := func() int { return len(read()) }
			res := l.warden(ctx, append(append([]string{"supervise", "--state", l.state, "--deadline", "60", "--grace", "0.5", "--detach"}, l.u.flags...),
				"--", "/bin/sh", "-c", zombieLeadScript, ctrWriter, hb)...)
			Expect(res.Code).To(Equal(0), "%s", res)

			// Positive control, read in the container's own /proc.
			Eventually(ctx, func() int { return heartbeatPID(read()) }).
				WithTimeout(20*time.Second).WithPolling(100*time.Millisecond).ShouldNot(BeZero(), "the writer never wrote; %s", lazy(func() string { return l.diagnose(ctx) }))
			pid := heartbeatPID(read())
			var st witness.Stat
			Eventually(ctx, func() byte {
				st = b.Stats(ctx, pid)[pid]
				return st.State
			}).WithTimeout(5*time.Second).WithPolling(100*time.Millisecond).Should(Equal(byte('Z')), "positive control: the writer's main thread exits")
			tool := st.ID()
			expectZombieLeader(st)
			before := size()
			Eventually(ctx, size).WithTimeout(5*time.Second).WithPolling(100*time.Millisecond).
				Should(BeNumerically(">", before), "positive control: the writer writes while its leader is a zombie")

			r := l.stopWait(ctx)
			atReceipt := size()
			ctrOutcome(r, "stopped", 143, "TERM")
			Consistently(ctx, size).WithTimeout(1500*time.Millisecond).WithPolling(100*time.Millisecond).
				Should(Equal(atReceipt), "the writer wrote after the receipt in %s", image)
			Expect(l.b.ProcState(ctx, tool)).To(Equal("gone"), "the writer outlives a confirmed receipt in %s", image)
			_, reached := witness.Find(r.Reached, tool)
			Expect(reached).To(BeTrue(), "the writer %v is not in reached %+v", tool, r.Reached)
		}, SpecTimeout(ctrSpecTimeout))
	},
		Entry("debian-12", Label("image:debian-12"), "debian-12"),
		Entry("alpine-class", Label("image:alpine-class"), "alpine-class"),
		Entry("old-python", Label("image:old-python"), "old-python"),
	)
})
