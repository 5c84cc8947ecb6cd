package conformance_test

// Specs for the grace's owner (contract §2 stop rules): the grace is the
// harness's. A tool that ignores TERM is held and KILLed as soon as the
// harness has gone, not at the end of the grace; a harness that works on
// after its TERM still gets the whole grace.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sandproof/sandproof/conformance/framework"
	"github.com/sandproof/sandproof/runner/warden/proc"
	"github.com/sandproof/sandproof/runner/warden/stop"
	"github.com/sandproof/sandproof/runner/witness"
)

// graceLong is far longer than graceWait, the stop's whole allowance here:
// a stop that waits out the grace for a tool cannot pass.
const (
	graceLong = "60"
	graceWait = "20"
)

// ignoresTERM reads SigIgn from /proc/PID/status: the positive control that
// a tool really ignores TERM, so that only the KILL can end it.
func ignoresTERM(pid int) bool {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(data), "\n") {
		if hex, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			Expect(err).NotTo(HaveOccurred(), "SigIgn %q", hex)
			return mask&(1<<(15-1)) != 0 // SIGTERM is 15
		}
	}
	Fail("no SigIgn line in /proc/" + strconv.Itoa(pid) + "/status")
	return false
}

var _ = Describe("warden supervise, whose grace is the harness's,", framework.Local, func() {
	for _, tier := range hostTiers {
		framework.ConformanceIt("2 stop rules", fmt.Sprintf("should KILL a TERM-ignoring setsid tool once the harness has exited on its TERM, long before the grace, in tier %s", tier), tierLabel(tier), func(ctx SpecContext) {
			l := newLaunch()
			flags := append([]string{"--deadline", "600", "--grace", graceLong}, tierFlags(tier)...)
			l.detach(ctx, flags, "ignore-term-tool")
			rec := l.ready(ctx)
			h, tool := harness(rec), one(rec, "ignore-term")
			Expect(ignoresTERM(tool.PID)).To(BeTrue(), "positive control: the tool ignores TERM")
			st, err := witness.Proc.Lookup(tool.ID())
			Expect(err).NotTo(HaveOccurred())
			Expect(st.SID).To(Equal(tool.PID), "positive control: the tool leads a session of its own")

			// The stop's allowance is a third of the grace: a stop that
			// waits the grace out for the tool gets no receipt in time.
			res := l.warden(ctx, "stop", "--state", l.state, "--wait", graceWait)
			Expect(res.Code).To(Equal(0), "no confirmed receipt within %s s of a %s s grace: %s%s", graceWait, graceLong, res, l.diagnose())
			r := l.receiptPrinted(res)
			expectOutcome(r, "stopped", 143, "TERM", true)
			expectTier(r, tier)
			expectReached(r, h, "group")
			expectReached(r, tool)
			expectGone("process", h, tool)
			Expect(r.StopSeconds).To(BeNumerically("<", 20), "the receipt's own stop_seconds: the grace was waited out")
			GinkgoWriter.Printf("tier %s: TERM-ignoring tool stopped in %.3f s of a %s s grace\n", r.Tier, r.StopSeconds, graceLong)
		})

		framework.ConformanceIt("2 stop rules", fmt.Sprintf("should give a harness that checkpoints on TERM its whole grace, even beside a TERM-ignoring tool, in tier %s", tier), tierLabel(tier), func(ctx SpecContext) {
			l := newLaunch()
			checkpoint := filepath.Join(l.dir, "checkpoint")
			flags := append([]string{"--deadline", "600", "--grace", "10"}, tierFlags(tier)...)
			l.detach(ctx, flags, "--term-exit", "0", "ignore-term-tool", "checkpoint", checkpoint)
			rec := l.ready(ctx)
			h, tool := harness(rec), one(rec, "ignore-term")
			Expect(ignoresTERM(tool.PID)).To(BeTrue(), "positive control: the tool ignores TERM")
			Expect(checkpoint).NotTo(BeAnExistingFile(), "positive control: no checkpoint before the TERM")

			r := l.stopWait(ctx)
			// Exit status 0 and no signal: the harness finished its
			// checkpoint and left by itself; a KILL would say 137.
			expectOutcome(r, "stopped", 0, nil, true)
			expectTier(r, tier)
			Expect(checkpoint).To(BeAnExistingFile(), "the harness was cut off before its checkpoint")
			expectReached(r, tool)
			expectGone("process", h, tool)
		})
	}
})

var _ = Describe("the stop engine on the real /proc, arriving during the scan that pins the host's older processes,", framework.Local, func() {
	framework.ConformanceIt("2 stop rules", "should confirm without waiting for the pinning scan, reading what it had not pinned yet", func(ctx SpecContext) {
		if !stop.PidfdSupported() {
			framework.Missing("pidfd_open in this kernel (Linux 5.3 or later)", "run the suite on a newer kernel")
		}
		// A busy host: more processes than one chunk of the prime, so a
		// stop that arrives after the first chunk arrives mid-scan.
		for i := 0; i < 150; i++ {
			c := exec.Command("sleep", "1000")
			Expect(c.Start()).To(Succeed())
			DeferCleanup(func() { c.Process.Kill(); c.Wait() })
		}
		// The launch's supervisor stand-in: a process without children, so
		// the stop reaches nothing (no child, no marker) and confirms.
		self := exec.Command("sleep", "1000")
		Expect(self.Start()).To(Succeed())
		DeferCleanup(func() { self.Process.Kill(); self.Wait() })
		fs := proc.NewFS("")
		st, err := fs.Stat(self.Process.Pid)
		Expect(err).NotTo(HaveOccurred())
		pids, err := fs.PIDs()
		Expect(err).NotTo(HaveOccurred())
		Expect(len(pids)).To(BeNumerically(">", 150), "positive control: a busy host")

		set := stop.NewOldSet(st.StartTime+1, 1<<16)
		DeferCleanup(set.Close)
		mid, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		set.AfterChunk = func() {
			once.Do(func() { close(mid) })
			<-release
		}
		DeferCleanup(func() { close(release) })
		set.StartPriming(fs)
		Eventually(ctx, mid).WithTimeout(10*time.Second).Should(BeClosed(), "the prime never pinned its first chunk")
		pinned := len(set.Live())
		Expect(pinned).To(BeNumerically(">", 0), "positive control: the prime pinned its first chunk")
		Expect(pinned).To(BeNumerically("<", len(pids)/2), "positive control: the prime is held mid-scan")

		eng := &stop.Engine{
			Scanner:   &stop.Scanner{FS: fs, Old: set, Launch: stop.Launch{ID: fmt.Sprintf("grace-spec-%d", self.Process.Pid), Self: self.Process.Pid, Since: st.StartTime + 1}},
			Signaller: stop.NewSignaller(fs),
			Grace:     5 * time.Second,
		}
		done := make(chan stop.Result, 1)
		go func() { done <- eng.Run(context.Background()) }()
		var res stop.Result
		// The prime stays held until the spec ends: a stop that waits
		// for it never returns here.
		Eventually(ctx, done).WithTimeout(20*time.Second).Should(Receive(&res), "the stop waited for the pinning scan")
		Expect(res.Err).NotTo(HaveOccurred())
		Expect(res.Reached).To(BeEmpty())
		Expect(res.Confirmed).To(BeTrue())
		Expect(len(set.Live())).To(BeNumerically("<=", pinned), "the stop pinned what one scan confirmed (it costs two reads each)")
	})
})
