package conformance_test

// Fault specs: what warden promises when the host around it misbehaves (a
// disk that fills after the claim, a state dir it cannot write) and when the
// harness attacks the state dir (same uid, and --user). The supervisor being
// SIGKILLed is covered in supervise_test.go ("should exit 4 from wait, stop
// and renew when the supervisor was SIGKILLed"). docs/threat-model.md cites
// these specs.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/conformance/framework"
	"github.com/sandproof/sandproof/conformance/procs"
	"github.com/sandproof/sandproof/runner/witness"
)

// mountTmpfs mounts a tmpfs of size at dir for the spec, and lazily
// unmounts it at cleanup (the supervisor may still hold files in it when a
// failed spec's cleanup runs).
func mountTmpfs(dir, size string) {
	GinkgoHelper()
	requireRoot("mounting a tmpfs")
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	Expect(unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=0755")).To(Succeed())
	DeferCleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
}

// requireRoot ends the spec unless it runs as root, which what needs.
func requireRoot(what string) {
	GinkgoHelper()
	if euid := os.Geteuid(); euid != 0 {
		framework.Missing(fmt.Sprintf("root for %s (euid is %d)", what, euid), "run the suite as root, e.g. `sudo make test`")
	}
}

// fillDisk writes a file under dir until the filesystem is full, and proves
// it is: a one-byte write into probeDir then fails with ENOSPC.
func fillDisk(dir, probeDir string) {
	GinkgoHelper()
	f, err := os.Create(filepath.Join(dir, "fill"))
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for i := 0; ; i++ {
		if _, err = f.Write(chunk); err != nil {
			break
		}
		Expect(i).To(BeNumerically("<", 1<<14), "the filesystem under %s never filled", dir)
	}
	Expect(err).To(MatchError(syscall.ENOSPC), "filling %s", dir)
	// Small writes may still fit in a partly used page: fill those too.
	for _, err = f.Write([]byte{0}); err == nil; _, err = f.Write([]byte{0}) {
	}
	probe := filepath.Join(probeDir, "enospc-probe")
	err = os.WriteFile(probe, []byte("x"), 0o600)
	os.Remove(probe)
	Expect(err).To(MatchError(syscall.ENOSPC), "positive control: the state dir's filesystem is full")
	var st unix.Statfs_t
	Expect(unix.Statfs(dir, &st)).To(Succeed())
	Expect(st.Bavail).To(BeZero(), "positive control: no free blocks")
}

var _ = Describe("warden, with the state dir's disk full after the claim,", framework.Local, framework.Root, func() {
	framework.ConformanceIt("3 receipt", "should still write the receipt reserved at the claim, with the harness's status and what was stopped", func(ctx SpecContext) {
		l := newLaunch()
		small := filepath.Join(l.dir, "small")
		mountTmpfs(small, "1m")
		l.state = filepath.Join(small, "state")
		gate := filepath.Join(l.dir, "gate")
		done := make(chan procs.Result, 1)
		go func() {
			defer GinkgoRecover()
			done <- l.warden(ctx, l.superviseArgs([]string{"--deadline", "60", "--grace", "0.5"},
				l.adversary("setsid-tool", "daemon", "await", gate, "exit", "3"))...)
		}()
		rec := l.ready(ctx)
		tool, daemon := one(rec, "setsid"), one(rec, "daemon")
		Expect(filepath.Join(l.state, "claim")).To(BeAnExistingFile(), "positive control: the claim was taken before the disk filled")
		Expect(filepath.Join(l.state, witness.ReceiptFile)).NotTo(BeAnExistingFile())

		fillDisk(small, l.state)
		Expect(os.WriteFile(gate, nil, 0o644)).To(Succeed())
		var res procs.Result
		Eventually(ctx, done).WithTimeout(procs.CommandTimeout).Should(Receive(&res))
		Expect(res.Code).To(Equal(1), "return_code 3 is not 0: %s%s", res, l.diagnose())
		r := l.receipt()
		expectOutcome(r, "exited", 3, nil, true)
		expectReached(r, tool)
		expectReached(r, daemon, "orphan")
		expectGone("process", harness(rec), tool, daemon)
	})

	framework.ConformanceIt("3 receipt", "should still take a stop request and write the stopped receipt", func(ctx SpecContext) {
		l := newLaunch()
		small := filepath.Join(l.dir, "small")
		mountTmpfs(small, "1m")
		l.state = filepath.Join(small, "state")
		l.detach(ctx, []string{"--deadline", "60", "--grace", "0.5"}, "setsid-tool")
		rec := l.ready(ctx)
		fillDisk(small, l.state)

		r := l.stopWait(ctx)
		expectOutcome(r, "stopped", 143, "TERM", true)
		expectReached(r, one(rec, "setsid"))
		expectGone("process", harness(rec), one(rec, "setsid"))
	})
})

var _ = Describe("warden supervise, given a state dir it cannot write,", framework.Local, framework.Root, func() {
	for _, exists := range []bool{true, false} {
		what := "an existing state dir on a read-only filesystem"
		if !exists {
			what = "a missing state dir under a read-only parent"
		}
		framework.ConformanceIt("4 exit statuses", "should exit 2 for "+what+", in one line naming the dir and the reason, and launch nothing", func(ctx SpecContext) {
			l := newLaunch()
			ro := filepath.Join(l.dir, "ro")
			mountTmpfs(ro, "1m")
			state := filepath.Join(ro, "state")
			if !exists {
				state = filepath.Join(ro, "missing", "state")
			} else {
				Expect(os.Mkdir(state, 0o700)).To(Succeed())
			}
			Expect(unix.Mount("", ro, "", unix.MS_REMOUNT|unix.MS_RDONLY, "")).To(Succeed())
			err := os.WriteFile(filepath.Join(ro, "probe"), nil, 0o600)
			Expect(err).To(MatchError(syscall.EROFS), "positive control: root cannot write there")

			l.state = state
			for _, detach := range []bool{false, true} {
				flags := []string{"--deadline", "60", "--grace", "0.5"}
				if detach {
					flags = append(flags, "--detach")
				}
				res := l.warden(ctx, l.superviseArgs(flags, l.adversary("sleep"))...)
				Expect(res.Code).To(Equal(2), "detach %v: %s", detach, res)
				lines := strings.Split(strings.TrimSpace(res.Stderr), "\n")
				Expect(lines).To(HaveLen(1), "one line of error: %q", res.Stderr)
				Expect(lines[0]).To(And(ContainSubstring(state), ContainSubstring("read-only")), "the error names the dir and the reason")
				Expect(res.Stdout).To(BeEmpty(), "nothing reported as launched")
				Expect(l.record).NotTo(BeAnExistingFile(), "the harness ran")
				Expect(filepath.Join(state, witness.ReceiptFile)).NotTo(BeAnExistingFile())
			}

			// Positive control: the same launch runs on a writable dir.
			l.state = filepath.Join(l.dir, "state")
			l.detach(ctx, []string{"--deadline", "60", "--grace", "0.5"}, "sleep")
			l.ready(ctx)
			expectOutcome(l.stopWait(ctx), "stopped", 143, "TERM", true)
		})
	}
})

// forgedReceipt is a well-formed receipt a hostile harness plants: it says
// everything is clean, under a launch id warden never used.
const forgedReceipt = `{"schema":"warden.receipt/v1","warden_version":"0.1.0","launch_id":"forged-by-harness",` +
	`"cleanup_confirmed":true,"return_code":0,"signal":null,"timed_out":false,"stopped":false,"error":null,` +
	`"cause":"exited","started_at":"2026-01-01T00:00:00Z","ended_at":"2026-01-01T00:00:01Z","stop_seconds":0,` +
	`"tier":"subreaper+pidfd","reached":[],"survivors":[],"unverified":[],"preserved":[]}` + "\n"

// tamper is the hostile harness: a shell that tries to write a forged
// receipt into the state dir and remove the claim (as selected), writes what
// happened to OUT, and then execs the adversary with a setsid'd tool.
//
//	sh -c SCRIPT sh FORGED STATE OUT ADVERSARY RECORD SCRATCH
const tamper = `
if [ -n "$FORGE" ]; then
  cp "$1" "$6/copy" 2>>"$3" && echo "copy elsewhere: ok" >>"$3"
  if cp "$1" "$2/receipt.json" 2>>"$3"; then echo "receipt: forged" >>"$3"; else echo "receipt: refused" >>"$3"; fi
fi
if [ -n "$UNCLAIM" ]; then
  if rm "$2/claim" 2>>"$3"; then echo "claim: removed" >>"$3"; else echo "claim: refused" >>"$3"; fi
fi
exec "$4" --record "$5" setsid-tool
`

func tamperCommand(forge, unclaim bool, forged, state, out, adversary, record, scratch string) []string {
	script := tamper
	if forge {
		script = "FORGE=1\n" + script
	}
	if unclaim {
		script = "UNCLAIM=1\n" + script
	}
	return []string{"/bin/sh", "-c", script, "sh", forged, state, out, adversary, record, scratch}
}

// detachCommand is l.detach for any command line.
func (l *launch) detachCommand(ctx SpecContext, flags, command []string) witness.Detached {
	GinkgoHelper()
	res := l.warden(ctx, l.superviseArgs(append(flags, "--detach"), command)...)
	Expect(res.Code).To(Equal(0), "%s", res)
	d, err := witness.ParseDetached(res.Stdout)
	Expect(err).NotTo(HaveOccurred())
	st, err := witness.Proc.ReadStat(d.SupervisorPID)
	Expect(err).NotTo(HaveOccurred(), "the supervisor_pid supervise printed does not run")
	l.supervisor = st.ID()
	return d
}

// tamperLog reads what the hostile harness wrote about its attempts.
func tamperLog(out string) string {
	GinkgoHelper()
	data, err := os.ReadFile(out)
	Expect(err).NotTo(HaveOccurred(), "positive control: the hostile harness ran its attempts")
	return string(data)
}

var _ = Describe("a harness running as warden's own user (no --user),", framework.Local, func() {
	framework.ConformanceIt("3 receipt", "can forge its receipt: wait and stop report the forgery while its tool runs, the genuine receipt is lost, and the stop still ends every process", func(ctx SpecContext) {
		l := newLaunch()
		forged, out, scratch := filepath.Join(l.dir, "forged.json"), filepath.Join(l.dir, "out"), filepath.Join(l.dir, "scratch")
		Expect(os.Mkdir(scratch, 0o755)).To(Succeed())
		Expect(os.WriteFile(forged, []byte(forgedReceipt), 0o644)).To(Succeed())
		d := l.detachCommand(ctx, []string{"--deadline", "60", "--grace", "0.5"},
			tamperCommand(true, false, forged, l.state, out, framework.Fixture("adversary"), l.record, scratch))
		rec := l.ready(ctx)
		tool := one(rec, "setsid")
		Expect(tamperLog(out)).To(ContainSubstring("receipt: forged"), "the same-uid harness could write into the state dir")
		Expect(os.ReadFile(filepath.Join(l.state, witness.ReceiptFile))).To(BeEquivalentTo(forgedReceipt))

		// The host asks: it is told "cleanup confirmed" by the forgery
		// while the harness's tool is alive.
		res := l.warden(ctx, "wait", "--state", l.state, "--timeout", "10")
		Expect(res.Code).To(Equal(0), "%s", res)
		r, err := witness.ParseReceipt([]byte(res.Stdout))
		Expect(err).NotTo(HaveOccurred())
		Expect(r.LaunchID).To(Equal("forged-by-harness"), "wait reports the planted receipt (launch %s)", d.LaunchID)
		Expect(procs.Alive(tool.ID())).To(BeTrue(), "the tool runs while the host reads 'confirmed'")

		res = l.warden(ctx, "stop", "--state", l.state, "--wait", "10")
		Expect(res.Code).To(Equal(0), "%s", res)
		Expect(res.Stdout).To(ContainSubstring("forged-by-harness"))
		// The supervisor still stops the launch, then cannot publish its
		// receipt (one is there) and exits.
		Eventually(ctx, func() []string {
			var alive []string
			for _, p := range running(rec) {
				if procs.Alive(p.ID()) {
					alive = append(alive, p.Role)
				}
			}
			if procs.Alive(l.supervisor) {
				alive = append(alive, "supervisor")
			}
			return alive
		}).WithTimeout(15*time.Second).Should(BeEmpty(), "the stop still ended the launch")
		Expect(os.ReadFile(filepath.Join(l.state, witness.ReceiptFile))).To(BeEquivalentTo(forgedReceipt), "the genuine receipt was lost")
	})

	framework.ConformanceIt("2 launch rules", "can remove its claim: the host can no longer tell a live supervisor (wait says 3, not 4) and a second launch takes the same state dir", func(ctx SpecContext) {
		l := newLaunch()
		out, scratch := filepath.Join(l.dir, "out"), filepath.Join(l.dir, "scratch")
		Expect(os.Mkdir(scratch, 0o755)).To(Succeed())
		l.detachCommand(ctx, []string{"--deadline", "60", "--grace", "0.5"},
			tamperCommand(false, true, "/nonexistent", l.state, out, framework.Fixture("adversary"), l.record, scratch))
		rec := l.ready(ctx)
		Expect(tamperLog(out)).To(ContainSubstring("claim: removed"))
		Expect(filepath.Join(l.state, "claim")).NotTo(BeAnExistingFile())
		Expect(procs.Alive(l.supervisor)).To(BeTrue(), "positive control: the supervisor runs")

		res := l.warden(ctx, "wait", "--state", l.state, "--timeout", "0.5")
		Expect(res.Code).To(Equal(3), "%s", res)

		second := filepath.Join(l.dir, "second-record")
		procs.KillOnCleanup(func() []witness.ID { return witness.RecordedIDs(second) })
		res = l.warden(ctx, l.superviseArgs([]string{"--deadline", "60", "--grace", "0.5", "--detach"},
			[]string{framework.Fixture("adversary"), "--record", second, "sleep"})...)
		Expect(res.Code).To(Equal(0), "the second launch was accepted: %s", res)
		d2, err := witness.ParseDetached(res.Stdout)
		Expect(err).NotTo(HaveOccurred())
		if st, err := witness.Proc.ReadStat(d2.SupervisorPID); err == nil {
			sup2 := st.ID()
			procs.KillOnCleanup(func() []witness.ID { return []witness.ID{sup2} })
		}
		Eventually(ctx, func() bool { r, err := witness.ReadRecord(second); return err == nil && r.Ready }).
			WithTimeout(readyTimeout).Should(BeTrue())

		// One stop request reaches both supervisors; one receipt wins.
		res = l.warden(ctx, "stop", "--state", l.state, "--wait", "30")
		Expect(res.Code).To(Equal(0), "%s%s", res, l.diagnose())
		rec2, err := witness.ReadRecord(second)
		Expect(err).NotTo(HaveOccurred())
		Eventually(ctx, func() []witness.ID {
			var alive []witness.ID
			for _, p := range append(running(rec), running(rec2)...) {
				if procs.Alive(p.ID()) {
					alive = append(alive, p.ID())
				}
			}
			return alive
		}).WithTimeout(15*time.Second).Should(BeEmpty(), "both launches were stopped")
	})
})

var _ = Describe("a harness run with --user 1000,", framework.Local, framework.Root, func() {
	framework.ConformanceIt("2 flags", "should fail to forge its receipt or remove its claim, and the host should get the genuine receipt", func(ctx SpecContext) {
		requireRoot("--user")
		l := newLaunch()
		// Everything uid 1000 must reach lives in a shared dir; the
		// suite's build dir is private.
		shared, bin := sharedAdversary("sandproof-tamper-")
		forged, out := filepath.Join(shared, "forged.json"), filepath.Join(shared, "out")
		Expect(os.WriteFile(forged, []byte(forgedReceipt), 0o644)).To(Succeed())
		l.record = filepath.Join(shared, "record")

		d := l.detachCommand(ctx, []string{"--deadline", "60", "--grace", "0.5", "--user", "1000"},
			tamperCommand(true, true, forged, l.state, out, bin, l.record, shared))
		rec := l.ready(ctx)
		h, tool := harness(rec), one(rec, "setsid")
		Expect(h.UID).To(Equal(1000), "positive control: the harness runs as uid 1000")
		claim, err := os.ReadFile(filepath.Join(l.state, "claim"))
		Expect(err).NotTo(HaveOccurred())

		log := tamperLog(out)
		// Positive controls: the harness ran both attempts, and its cp
		// works where uid 1000 may write.
		Expect(log).To(ContainSubstring("copy elsewhere: ok"))
		Expect(log).To(ContainSubstring("receipt: refused"))
		Expect(log).To(ContainSubstring("claim: refused"))
		Expect(strings.Count(log, "Permission denied")).To(Equal(2), "both attempts failed on permissions: %s", log)
		Expect(filepath.Join(l.state, witness.ReceiptFile)).NotTo(BeAnExistingFile(), "no forged receipt")
		Expect(os.ReadFile(filepath.Join(l.state, "claim"))).To(Equal(claim), "the claim is intact")

		r := l.stopWait(ctx)
		Expect(r.LaunchID).To(Equal(d.LaunchID), "the genuine receipt")
		expectOutcome(r, "stopped", 143, "TERM", true)
		expectReached(r, tool)
		expectGone("process", h, tool)
	})
})
