package conformance_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/conformance/framework"
)

// Specs that guard properties no output comparison can see: how a receipt
// is published, and that a line full of CRs costs linear time.
var _ = Describe("warden supervise, publishing its receipt,", func() {
	framework.ConformanceIt("3 receipt", "should make receipt.json appear whole, never written in place", framework.Local, func(ctx SpecContext) {
		state := filepath.Join(GinkgoT().TempDir(), "state")
		Expect(os.Mkdir(state, 0o700)).To(Succeed())
		// Watch the state dir before the launch: an atomic publication
		// creates receipt.json (link or rename) and never modifies it; an
		// in-place write shows IN_MODIFY on the name.
		fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(unix.Close, fd)
		_, err = unix.InotifyAddWatch(fd, state, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_MODIFY|unix.IN_CLOSE_WRITE)
		Expect(err).NotTo(HaveOccurred())

		out, err := exec.Command(framework.Bin.Warden, "supervise", "--state", state, "--deadline", "30", "--", "true").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "supervise: %s", out)
		Expect(filepath.Join(state, "receipt.json")).To(BeARegularFile())

		var seen []string
		buf := make([]byte, 1<<16)
		for {
			n, err := unix.Read(fd, buf)
			if err != nil || n <= 0 {
				break
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(ptr(&buf[off]))
				name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
				off += unix.SizeofInotifyEvent + int(ev.Len)
				if name != "receipt.json" {
					continue
				}
				switch {
				case ev.Mask&unix.IN_MODIFY != 0:
					seen = append(seen, "modify")
				case ev.Mask&unix.IN_CLOSE_WRITE != 0:
					seen = append(seen, "close_write")
				default:
					seen = append(seen, "appear")
				}
			}
		}
		// Positive control: the watch saw the receipt appear at all.
		Expect(seen).To(ContainElement("appear"), "the watch saw no event for receipt.json")
		Expect(seen).To(HaveEach("appear"), "receipt.json was written in place")
	})
})

var _ = Describe("warden run, in events mode, given a long line full of CRs,", func() {
	framework.ConformanceIt("5 events mode", "should record it in time linear in its length", framework.Local, func(ctx SpecContext) {
		dir := GinkgoT().TempDir()
		events := filepath.Join(dir, "events.jsonl")
		// 16 MiB (and one byte) with a CR every 64 bytes: linear handling takes well under
		// a second; the field's quadratic CR stripping takes hours. The
		// runner's own bound (runnerTimeout) is the only clock here.
		p := runnerParams(dir, map[string]any{
			"argv": []string{framework.Fixture("linegen"), "-bytes", "16777217", "-cr-every", "64"},
			"mode": "events", "events": events,
		})
		r := runnerRun(p, runnerOpts{})
		Expect(r.status).To(Equal(0), "stderr: %s", r.stderr)
		got := runnerEvents(events)
		Expect(got).To(HaveLen(1))
		Expect(got[0].Raw).NotTo(BeNil())
		Expect(*got[0].Raw).To(HaveLen(16<<20 + 1)) // ends in "x", so no CR is a line end
		Expect(strings.Count(*got[0].Raw, "\r")).To(Equal(16 << 20 / 64))
	})
})

var _ = Describe("warden supervise, when the harness's status is unknown,", func() {
	framework.ConformanceIt("3 receipt", "should report return_code null, never a made-up 0", framework.Local, func(ctx SpecContext) {
		// Positive control: a status that is known is reported, 0 included.
		l := newLaunch()
		res := l.warden(ctx, l.superviseArgs([]string{"--deadline", "30"}, l.adversary("exit", "0"))...)
		Expect(res.Code).To(Equal(0), "%s", res)
		Expect(l.receipt().ReturnCode).To(HaveValue(Equal(0)))

		// The harness never ran: under a centisecond, and with a proc root
		// that cannot be read.
		short := newLaunch()
		short.warden(ctx, short.superviseArgs([]string{"--deadline", "0.001"}, short.adversary("exit", "0"))...)
		Expect(short.receipt().ReturnCode).To(BeNil(), "sub-centisecond deadline")

		refused := newLaunch()
		empty := filepath.Join(refused.dir, "empty-proc")
		Expect(os.Mkdir(empty, 0o755)).To(Succeed())
		refused.warden(ctx, refused.superviseArgs([]string{"--deadline", "30", "--proc-root", empty}, refused.adversary("exit", "0"))...)
		Expect(refused.receipt().ReturnCode).To(BeNil(), "unreadable proc root")
	})
})
