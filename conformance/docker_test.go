package conformance_test

// warden's conformance specs inside real containers of the three test
// images (docs/images.md): pid 1 is the image's plain `sleep` (no init, it
// reaps nothing), the network is "none", and warden and the adversary
// fixture are uploaded once per container. Each image runs every spec with
// the harness as root and as uid 1000 (`--user 1000:1000`, warden staying
// root). Every "is gone" check reads the container's own /proc by (pid,
// start time) after proving the same process alive and visible there.
//
// Every exec runs with a tripwire first on PATH: recording stand-ins for
// python3, pip, apt-get, apk, uv, curl and wget. After the specs of an
// image, none may have been called.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sandproof/sandproof/conformance/containers"
	"github.com/sandproof/sandproof/conformance/framework"
	"github.com/sandproof/sandproof/runner/host/images"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/witness"
)

// Paths inside every container.
const (
	ctrBin     = "/sandproof-conformance/bin"
	ctrRuns    = "/sandproof-conformance/run"
	ctrWarden  = ctrBin + "/warden"
	ctrAdv     = ctrBin + "/adversary"
	ctrExit    = ctrBin + "/exitwith"
	ctrNoExec  = ctrBin + "/not-executable" // mode 0644
	ctrMissing = "/sandproof-conformance/no-such-program"
)

// ctrSpecTimeout bounds one spec; ctrWait is what warden's own waits get.
const (
	ctrSpecTimeout = 3 * time.Minute
	ctrWait        = "45"
)

// ctrUser is who the harness runs as.
type ctrUser struct {
	name string
	// flags are supervise's (--user); warden itself always runs as root.
	flags []string
	uid   int
	// exec is "UID:GID" for execs that run as the harness would
	// (`warden run`, a process outside the launch).
	exec string
	// readsEnviron: warden (root, without CAP_SYS_PTRACE, which Docker
	// drops by default) can read the harness's /proc/PID/environ only when
	// the harness runs as root too.
	readsEnviron bool
}

var ctrUsers = []ctrUser{
	{name: "root", uid: 0, exec: "0:0", readsEnviron: true},
	{name: "uid 1000", flags: []string{"--user", "1000:1000"}, uid: 1000, exec: "1000:1000"},
}

// ctrBox is one container of an image with the binaries uploaded.
type ctrBox struct {
	*containers.Sandbox
	image string
}

var ctrSeq atomic.Int64

func ctrStart(ctx context.Context, name string) *ctrBox {
	GinkgoHelper()
	return ctrStartLimited(ctx, name, provider.DefaultLimits)
}

// ctrStartLimited is ctrStart with the container's limits given.
func ctrStartLimited(ctx context.Context, name string, limits provider.Limits) *ctrBox {
	GinkgoHelper()
	return ctrStartWith(ctx, name, containers.Options{Limits: limits})
}

// ctrStartWith is ctrStart with the container's limits and mounts given.
func ctrStartWith(ctx context.Context, name string, o containers.Options) *ctrBox {
	GinkgoHelper()
	all, err := images.Resolve(nil)
	Expect(err).NotTo(HaveOccurred())
	ref := ""
	for _, img := range all {
		if img.Name == name {
			ref = img.Ref
		}
	}
	Expect(ref).NotTo(BeEmpty(), "no image named %q", name)
	b := &ctrBox{Sandbox: containers.StartWith(ref, o), image: name}
	b.Upload(
		containers.File{Path: "/sandproof-conformance", Mode: 0o755, Dir: true},
		containers.File{Path: ctrBin, Mode: 0o755, Dir: true},
		containers.File{Path: ctrRuns, Mode: 0o755, Dir: true},
		containers.HostFile(framework.Bin.Warden, ctrWarden, 0o755),
		containers.HostFile(framework.Fixture("adversary"), ctrAdv, 0o755),
		containers.HostFile(framework.Fixture("exitwith"), ctrExit, 0o755),
		containers.File{Path: ctrNoExec, Mode: 0o644, Data: []byte("#!/bin/sh\nexit 0\n")},
	)
	b.PlantTripwire(ctx)
	// pid 1 is the image's plain sleep: orphans that die under it stay.
	st := b.Stats(ctx, 1)
	Expect(st).To(HaveKey(1))
	Expect(st[1].Comm).To(Equal("sleep"), "pid 1 of %s", name)
	return b
}

// ctrLaunch is one spec's launch: its own directory in the container,
// holding the state dir (created by warden, as root) and a directory the
// harness's user owns for the adversary's record and gates.
type ctrLaunch struct {
	b                       *ctrBox
	u                       ctrUser
	dir, state, recDir, rec string
}

func (b *ctrBox) newLaunch(u ctrUser) *ctrLaunch {
	GinkgoHelper()
	dir := path.Join(ctrRuns, fmt.Sprintf("%d-%d", GinkgoParallelProcess(), ctrSeq.Add(1)))
	l := &ctrLaunch{b: b, u: u, dir: dir, state: dir + "/state", recDir: dir + "/rec", rec: dir + "/rec/record"}
	b.Upload(
		containers.File{Path: dir, Mode: 0o755, Dir: true},
		containers.File{Path: l.recDir, Mode: 0o755, UID: u.uid, GID: u.uid, Dir: true},
	)
	return l
}

// warden runs warden as root, with the tripwire PATH.
func (l *ctrLaunch) warden(ctx context.Context, args ...string) containers.Result {
	GinkgoHelper()
	return l.b.Run(ctx, containers.Exec{Argv: append([]string{ctrWarden}, args...), Env: l.b.Env()})
}

// supervise builds a supervise command line for the adversary with roles.
func (l *ctrLaunch) supervise(flags []string, roles ...string) []string {
	args := append([]string{"supervise", "--state", l.state}, l.u.flags...)
	args = append(append(args, flags...), "--", ctrAdv, "--record", l.rec)
	return append(args, roles...)
}

// detach starts a detached launch and returns what it printed.
func (l *ctrLaunch) detach(ctx context.Context, flags []string, roles ...string) witness.Detached {
	GinkgoHelper()
	res := l.warden(ctx, l.supervise(append(flags, "--detach"), roles...)...)
	Expect(res.Code).To(Equal(0), "%s", res)
	d, err := witness.ParseDetached(res.Stdout)
	Expect(err).NotTo(HaveOccurred())
	return d
}

// record reads a record file from the container; nil while it is missing.
func (l *ctrLaunch) record(ctx context.Context, p string) (*witness.Record, error) {
	GinkgoHelper()
	data, ok := l.b.ReadFile(ctx, p)
	if !ok {
		return nil, nil
	}
	host := filepath.Join(GinkgoT().TempDir(), "record")
	Expect(os.WriteFile(host, data, 0o600)).To(Succeed())
	return witness.ReadRecord(host)
}

// ready waits for the adversary recording into p to say "ready", then proves
// that every process it planted and that should run is alive and visible,
// under its name, in the container's /proc: the positive control of every
// "is gone" check that follows.
func (l *ctrLaunch) ready(ctx context.Context, p string) *witness.Record {
	GinkgoHelper()
	var rec *witness.Record
	Eventually(ctx, func() (bool, error) {
		var err error
		rec, err = l.record(ctx, p)
		return rec != nil && rec.Ready, err
	}).WithTimeout(60*time.Second).WithPolling(100*time.Millisecond).Should(BeTrue(),
		"the harness never said it was ready; %s", lazy(func() string { return l.diagnose(ctx) }))
	live := ctrRunning(rec)
	Expect(live).NotTo(BeEmpty())
	ids := make([]witness.ID, len(live))
	for i, p := range live {
		ids[i] = p.ID()
	}
	stats := l.b.Stats(ctx, pidsOf(ids)...)
	for _, p := range live {
		st, ok := stats[p.PID]
		Expect(ok).To(BeTrue(), "positive control: %s %v should be in the container's /proc", p.Role, p.ID())
		Expect(st.StartTime).To(Equal(p.StartTime), "positive control: %s %v has its start time", p.Role, p.ID())
		Expect(st.Dead()).To(BeFalse(), "positive control: %s %v is a zombie already", p.Role, p.ID())
		Expect(st.Comm).To(Equal(p.Comm), "positive control: %s %v is visible under its name", p.Role, p.ID())
		Expect(p.UID).To(Equal(l.u.uid), "%s %v runs as the harness's user", p.Role, p.ID())
	}
	return rec
}

func pidsOf(ids []witness.ID) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = id.PID
	}
	return out
}

// ctrRunning returns the recorded processes that should run at "ready":
// not reaped by the harness, not the middles that exit by design.
func ctrRunning(rec *witness.Record) []witness.Line {
	var out []witness.Line
	for _, p := range rec.Procs {
		if _, reaped := rec.Exits[p.PID]; reaped {
			continue
		}
		switch p.Role {
		case "daemon-middle", "zombie-maker", "exit0", "hopper":
			continue
		}
		out = append(out, p)
	}
	return out
}

func ctrOne(rec *witness.Record, role string) witness.Line {
	GinkgoHelper()
	ps := rec.Role(role)
	Expect(ps).To(HaveLen(1), "recorded %q processes", role)
	return ps[0]
}

// diagnose returns what the state dir says, for failure messages.
func (l *ctrLaunch) diagnose(ctx context.Context) string {
	var b strings.Builder
	for _, name := range []string{"stderr", "supervisor.log", witness.ReceiptFile} {
		if data, ok := l.b.ReadFile(ctx, l.state+"/"+name); ok {
			fmt.Fprintf(&b, "\n%s: %s", name, data)
		}
	}
	return b.String()
}

// receipt reads and checks STATE/receipt.json against section 3.
func (l *ctrLaunch) receipt(ctx context.Context) *witness.Receipt {
	GinkgoHelper()
	data, ok := l.b.ReadFile(ctx, l.state+"/"+witness.ReceiptFile)
	Expect(ok).To(BeTrue(), "no receipt in %s%s", l.state, lazy(func() string { return l.diagnose(ctx) }))
	r, err := witness.ParseReceipt(data)
	Expect(err).NotTo(HaveOccurred())
	return r
}

// printed checks that a stop --wait or wait printed the receipt in the
// state dir, and returns it.
func (l *ctrLaunch) printed(ctx context.Context, res containers.Result) *witness.Receipt {
	GinkgoHelper()
	Expect(res.Code).To(Equal(0), "%s%s", res, lazy(func() string { return l.diagnose(ctx) }))
	p, err := witness.ParseReceipt([]byte(res.Stdout))
	Expect(err).NotTo(HaveOccurred(), "%s", res)
	r := l.receipt(ctx)
	Expect(p).To(Equal(r), "the printed receipt differs from %s", witness.ReceiptFile)
	return r
}

func (l *ctrLaunch) stopWait(ctx context.Context) *witness.Receipt {
	GinkgoHelper()
	return l.printed(ctx, l.warden(ctx, "stop", "--state", l.state, "--wait", ctrWait))
}

func (l *ctrLaunch) waitReceipt(ctx context.Context) *witness.Receipt {
	GinkgoHelper()
	return l.printed(ctx, l.warden(ctx, "wait", "--state", l.state, "--timeout", ctrWait))
}

// expectGone checks, right after a confirmed receipt, that each process is
// dead in the container's /proc: gone, or a zombie (dead, unreaped).
func (l *ctrLaunch) expectGone(ctx context.Context, what string, ps ...witness.Line) {
	GinkgoHelper()
	Expect(ps).NotTo(BeEmpty(), "no %s recorded: the spec would check nothing", what)
	ids := make([]witness.ID, len(ps))
	for i, p := range ps {
		ids[i] = p.ID()
	}
	states := l.b.ProcStates(ctx, ids...)
	for _, p := range ps {
		Expect(states[p.ID()]).NotTo(Equal("alive"), "%s %s %v survived a confirmed cleanup in %s", what, p.Role, p.ID(), l.b.image)
	}
}

func ctrExpectReached(r *witness.Receipt, p witness.Line, whys ...string) {
	GinkgoHelper()
	m, ok := witness.Find(r.Reached, p.ID())
	Expect(ok).To(BeTrue(), "%s %v is not in reached: %+v", p.Role, p.ID(), r.Reached)
	Expect(m.Comm).To(Equal(p.Comm))
	if len(whys) > 0 {
		Expect(m.Why).To(BeElementOf(whys), "why %s %v was reached", p.Role, p.ID())
	}
}

// ctrOutcome checks the outcome fields of a receipt.
func ctrOutcome(r *witness.Receipt, cause string, rc any, sig any) {
	GinkgoHelper()
	expectOutcome(r, cause, rc, sig, true)
	Expect(r.Error).To(BeNil(), "error")
	Expect(r.Survivors).To(BeEmpty(), "survivors")
	Expect(r.Tier).To(BeElementOf("subreaper+pidfd", "subreaper+kill"), "tier")
}

// claimID reads the supervisor's (pid, start time) from STATE/claim.
func (l *ctrLaunch) claimID(ctx context.Context) witness.ID {
	GinkgoHelper()
	data, ok := l.b.ReadFile(ctx, l.state+"/claim")
	Expect(ok).To(BeTrue(), "no claim in %s", l.state)
	var c struct {
		PID       int    `json:"pid"`
		StartTime uint64 `json:"start_time"`
	}
	Expect(json.Unmarshal(data, &c)).To(Succeed(), "claim %q", data)
	Expect(c.PID).To(BeNumerically(">", 0))
	return witness.ID{PID: c.PID, StartTime: c.StartTime}
}

var _ = Describe("warden, inside containers of the test images,", framework.Docker, func() {
	DescribeTableSubtree("in image", func(image string) {
		// One container per image, shared by its specs (each has its own
		// launch dir); a failing spec must not hide the others.
		Describe("in one container,", Ordered, ContinueOnFailure, func() {
			ctrImageSpecs(image)
		})
	},
		Entry("debian-12", Label("image:debian-12"), "debian-12"),
		Entry("alpine-class", Label("image:alpine-class"), "alpine-class"),
		Entry("old-python", Label("image:old-python"), "old-python"),
	)
})

// ctrImageSpecs declares the specs of one image, in an Ordered container.
func ctrImageSpecs(image string) {
	var b *ctrBox
	BeforeAll(func(ctx SpecContext) {
		b = ctrStart(ctx, image)
	}, NodeTimeout(3*time.Minute))
	AfterAll(func(ctx SpecContext) {
		if b == nil {
			return // the container never started; BeforeAll failed
		}
		// Tripwire: over every run in this container, warden never
		// called an interpreter, a package manager or a downloader.
		Expect(b.TripwireCalls(ctx)).To(BeEmpty(), "stand-ins called in %s", image)
	}, NodeTimeout(time.Minute))

	for _, u := range ctrUsers {
		Context("with the harness as "+u.name+",", func() {
			framework.ConformanceIt("3 receipt", "should launch the harness as its user with the marker first and write a receipt with every field of section 3",
				func(ctx SpecContext) {
					l := b.newLaunch(u)
					id := fmt.Sprintf("docker-receipt-%d", ctrSeq.Add(1))
					res := l.warden(ctx, l.supervise([]string{"--deadline", "30", "--launch-id", id}, "exit", "0")...)
					Expect(res.Code).To(Equal(0), "foreground supervise, harness exited 0: %s%s", res, lazy(func() string { return l.diagnose(ctx) }))
					Expect(res.Stdout).To(ContainSubstring("adversary stdout "), "the harness's stdout is relayed")
					rec, err := l.record(ctx, l.rec)
					Expect(err).NotTo(HaveOccurred())
					Expect(rec).NotTo(BeNil(), "the harness never ran")
					h := ctrOne(rec, "harness")
					Expect(h.UID).To(Equal(u.uid), "the harness's uid")
					Expect(h.HasMarker).To(BeTrue(), "the harness carries WARDEN_LAUNCH")
					Expect(h.MarkerFirst).To(BeTrue(), "WARDEN_LAUNCH is first in the harness's environment")
					Expect(h.Marker).To(Equal(id))
					r := l.receipt(ctx)
					Expect(r.Schema).To(Equal("warden.receipt/v1"))
					Expect(r.LaunchID).To(Equal(id))
					ctrOutcome(r, "exited", 0, nil)
					Expect(r.Unverified).To(BeEmpty())
					Expect(r.Preserved).To(BeEmpty())
				}, SpecTimeout(ctrSpecTimeout))

			for _, tc := range []struct {
				roles []string
				rc    int
				sig   string
			}{
				{[]string{"sleep"}, 143, "TERM"},
				{[]string{"ignore-term", "sleep"}, 137, "KILL"},
			} {
				framework.ConformanceIt("3 receipt", fmt.Sprintf("should end a harness (%s) at its deadline with cause deadline, timed_out and return_code %d", strings.Join(tc.roles, " "), tc.rc),
					func(ctx SpecContext) {
						l := b.newLaunch(u)
						l.detach(ctx, []string{"--deadline", "5", "--grace", "0.5"}, tc.roles...)
						rec := l.ready(ctx, l.rec)
						r := l.waitReceipt(ctx)
						ctrOutcome(r, "deadline", tc.rc, tc.sig)
						h := ctrOne(rec, "harness")
						ctrExpectReached(r, h)
						l.expectGone(ctx, "harness", h)
					}, SpecTimeout(ctrSpecTimeout))
			}

			framework.ConformanceIt("2 stop rules", "should stop a tool that called setsid and a double-forked daemon",
				func(ctx SpecContext) {
					l := b.newLaunch(u)
					l.detach(ctx, []string{"--deadline", "120", "--grace", "1"}, "setsid-tool", "daemon", "sleep")
					rec := l.ready(ctx, l.rec)
					tool, daemon := ctrOne(rec, "setsid"), ctrOne(rec, "daemon")
					Expect(tool.SID).To(Equal(tool.PID), "positive control: the tool leads a session of its own")
					Expect(daemon.SID).NotTo(Equal(ctrOne(rec, "harness").SID), "positive control: the daemon left the harness's session")
					r := l.stopWait(ctx)
					ctrOutcome(r, "stopped", 143, "TERM")
					l.expectGone(ctx, "tool and daemon", ctrOne(rec, "harness"), tool, daemon)
					ctrExpectReached(r, tool)
					ctrExpectReached(r, daemon)
				}, SpecTimeout(ctrSpecTimeout))

			framework.ConformanceIt("2 stop rules", "should stop what a TERM handler re-spawns with setsid before it exits",
				func(ctx SpecContext) {
					l := b.newLaunch(u)
					// --term-exit 7: a return code of 7 proves the
					// handler ran (TERM's default would give 143).
					l.detach(ctx, []string{"--deadline", "120", "--grace", "1"}, "--term-exit", "7", "term-respawn", "sleep")
					rec := l.ready(ctx, l.rec)
					Expect(rec.Role("respawned")).To(BeEmpty(), "nothing respawned before the stop")
					h := ctrOne(rec, "harness")
					r := l.stopWait(ctx)
					ctrOutcome(r, "stopped", 7, nil)
					rec, err := l.record(ctx, l.rec)
					Expect(err).NotTo(HaveOccurred())
					// Positive control: the respawned process recorded
					// itself from its own /proc/self/stat, or (when the
					// stop's TERM beat it to its record) the receipt saw
					// it: either way it was alive and visible.
					var ids []witness.ID
					for _, p := range rec.Role("respawned") {
						ids = append(ids, p.ID())
						ctrExpectReached(r, p)
					}
					if len(ids) == 0 {
						for _, m := range r.Reached {
							if m.ID() != h.ID() {
								ids = append(ids, m.ID())
							}
						}
					}
					Expect(ids).NotTo(BeEmpty(), "positive control: the respawned process was neither recorded nor reached")
					states := l.b.ProcStates(ctx, append(ids, h.ID())...)
					for id, st := range states {
						Expect(st).NotTo(Equal("alive"), "%v survived a confirmed cleanup in %s", id, l.b.image)
					}
				}, SpecTimeout(ctrSpecTimeout))

			framework.ConformanceIt("2 stop rules", "should stop a daemon that dropped the marker before it double-forked (reached only as the subreaper's orphan)",
				func(ctx SpecContext) {
					l := b.newLaunch(u)
					l.detach(ctx, []string{"--deadline", "120", "--grace", "1"}, "drop-marker", "sleep")
					rec := l.ready(ctx, l.rec)
					daemon := ctrOne(rec, "daemon")
					Expect(daemon.HasMarker).To(BeFalse(), "positive control: the daemon carries no marker")
					r := l.stopWait(ctx)
					ctrOutcome(r, "stopped", 143, "TERM")
					l.expectGone(ctx, "marker-less daemon", daemon, ctrOne(rec, "drop-marker"))
					ctrExpectReached(r, daemon, "orphan")
				}, SpecTimeout(ctrSpecTimeout))

			framework.ConformanceIt("2 stop rules", "should stop a process outside the supervisor's tree that carries the launch's marker",
				func(ctx SpecContext) {
					l := b.newLaunch(u)
					d := l.detach(ctx, []string{"--deadline", "120", "--grace", "1"}, "sleep")
					l.ready(ctx, l.rec)
					// Another exec, as a tool server's client would be:
					// its parent is the engine's shim, not the supervisor.
					outRec := l.recDir + "/outsider"
					l.b.Detach(ctx, containers.Exec{
						Argv: []string{ctrAdv, "--record", outRec, "sleep"},
						User: u.exec, Env: append(l.b.Env(), "WARDEN_LAUNCH="+d.LaunchID),
					})
					orec := l.ready(ctx, outRec)
					outsider := ctrOne(orec, "harness")
					Expect(outsider.Marker).To(Equal(d.LaunchID), "positive control: the outsider carries the marker")
					Expect(outsider.PPID).To(Equal(0), "positive control: the outsider's parent is outside the container")
					r := l.stopWait(ctx)
					ctrOutcome(r, "stopped", 143, "TERM")
					if u.readsEnviron {
						l.expectGone(ctx, "outsider with the marker", outsider)
						ctrExpectReached(r, outsider, "marker")
						return
					}
					// warden is root without CAP_SYS_PTRACE: another
					// user's environ is unreadable, so contract §2 wants it
					// listed as unverified (and cleanup still confirmed).
					if _, ok := witness.Find(r.Reached, outsider.ID()); ok {
						GinkgoWriter.Printf("outsider %v: reached\n", outsider.ID())
						l.expectGone(ctx, "outsider with the marker", outsider)
						return
					}
					_, ok := witness.Find(r.Unverified, outsider.ID())
					GinkgoWriter.Printf("outsider %v: unverified %v (%s)\n", outsider.ID(), ok, l.b.ProcState(ctx, outsider.ID()))
					Expect(ok).To(BeTrue(), "the outsider %v is neither reached nor unverified: %+v", outsider.ID(), r.Unverified)
				}, SpecTimeout(ctrSpecTimeout))

			framework.ConformanceIt("2 launch rules", "should survive a KILL of the docker exec's process group and still write the receipt",
				func(ctx SpecContext) {
					l := b.newLaunch(u)
					gate := l.recDir + "/gate"
					front := l.b.Go(ctx, containers.Exec{
						Argv: append([]string{ctrWarden}, l.supervise([]string{"--deadline", "120", "--grace", "1"}, "setsid-tool", "await", gate, "exit", "0")...),
						Env:  l.b.Env(),
					})
					rec := l.ready(ctx, l.rec)
					sup := l.claimID(ctx)
					Expect(l.b.ProcState(ctx, sup)).To(Equal("alive"), "positive control: the supervisor runs")
					// Positive control: the exec's process leads its own
					// group on the host, and it still runs.
					hst, err := witness.Proc.ReadStat(front.HostPID)
					Expect(err).NotTo(HaveOccurred())
					Expect(hst.PGID).To(Equal(front.HostPID), "the exec's process leads its group")
					running, _, err := front.Inspect()
					Expect(err).NotTo(HaveOccurred())
					Expect(running).To(BeTrue(), "positive control: the foreground supervise still runs")
					// What a provider does on a timeout: KILL the group.
					Expect(syscall.Kill(-front.HostPID, syscall.SIGKILL)).To(Succeed())
					Eventually(ctx, func() (bool, error) {
						running, _, err := front.Inspect()
						return running, err
					}).WithTimeout(30 * time.Second).Should(BeFalse())
					_, code, _ := front.Inspect()
					Expect(code).To(Equal(137), "the front died of KILL")
					Expect(l.b.ProcState(ctx, sup)).To(Equal("alive"), "the supervisor survived the group KILL")
					l.b.Upload(containers.File{Path: gate, Mode: 0o644, UID: u.uid, GID: u.uid})
					r := l.waitReceipt(ctx)
					ctrOutcome(r, "exited", 0, nil)
					tool := ctrOne(rec, "setsid")
					l.expectGone(ctx, "harness and its tool", ctrOne(rec, "harness"), tool)
					ctrExpectReached(r, tool)
				}, SpecTimeout(ctrSpecTimeout))

			framework.ConformanceIt("2 stop rules", "should stop the launch with cause lease when the host that renews it is SIGKILLed with its docker exec clients",
				func(ctx SpecContext) {
					l := b.newLaunch(u)
					ctrLease(ctx, l)
				}, SpecTimeout(ctrSpecTimeout))

			framework.ConformanceIt("3 receipt", "should give exec_failed with return_code 127 for a missing COMMAND and 126 for one that is not executable",
				func(ctx SpecContext) {
					for _, tc := range []struct {
						prog string
						rc   int
					}{{ctrMissing, 127}, {ctrNoExec, 126}} {
						l := b.newLaunch(u)
						args := append([]string{"supervise", "--state", l.state, "--deadline", "30"}, u.flags...)
						res := l.warden(ctx, append(args, "--", tc.prog)...)
						Expect(res.Code).To(Equal(1), "foreground supervise of %s: %s", tc.prog, res)
						r := l.receipt(ctx)
						Expect(r.Cause).To(Equal("exec_failed"), "%s", tc.prog)
						Expect(r.ReturnCode).To(HaveValue(Equal(tc.rc)), "%s", tc.prog)
						Expect(r.CleanupConfirmed).To(BeTrue())
						Expect(r.TimedOut).To(BeFalse())
						Expect(r.Stopped).To(BeFalse())
					}
				}, SpecTimeout(ctrSpecTimeout))

			framework.ConformanceIt("5 exit statuses", "should exit 125 for its own failure, 126 and 127 when the CLI cannot be started, and the CLI's status otherwise",
				func(ctx SpecContext) {
					l := b.newLaunch(u)
					for i, tc := range []struct {
						argv []string
						cwd  string
						code int
					}{
						{[]string{ctrExit, "-code", "7"}, "/", 7}, // positive control
						{[]string{ctrExit, "-code", "0"}, "/sandproof-conformance/no-such-dir", 125},
						{[]string{ctrNoExec}, "/", 126},
						{[]string{ctrMissing}, "/", 127},
					} {
						params, err := json.Marshal(map[string]any{"argv": tc.argv, "cwd": tc.cwd, "inherit_env": []string{"PATH"}})
						Expect(err).NotTo(HaveOccurred())
						p := fmt.Sprintf("%s/params-%d.json", l.recDir, i)
						l.b.Upload(containers.File{Path: p, Mode: 0o644, Data: params})
						res := l.b.Run(ctx, containers.Exec{Argv: []string{ctrWarden, "run", "--params", p}, User: u.exec, Env: l.b.Env()})
						Expect(res.Code).To(Equal(tc.code), "warden run %s: %s", params, res)
					}
				}, SpecTimeout(ctrSpecTimeout))
		})
	}
}

// ctrLease: a host-side process starts the launch with --lease 3 through
// `docker exec` (foreground) and renews it through `docker exec` in a loop,
// logging each renewal warden accepted (exit 0). Once it has renewed past
// the lease (so renewals demonstrably kept the launch alive), the process
// and its docker exec clients are SIGKILLed as one group; the supervisor
// must then stop the tree with cause lease.
func ctrLease(ctx context.Context, l *ctrLaunch) {
	GinkgoHelper()
	docker, err := exec.LookPath("docker")
	Expect(err).NotTo(HaveOccurred(), "the docker CLI plays the host's docker exec clients")
	renewals := filepath.Join(GinkgoT().TempDir(), "renewals")
	q := func(args []string) string {
		out := make([]string, len(args))
		for i, a := range args {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		return strings.Join(out, " ")
	}
	env := l.b.Env()[0]
	superviseArgv := append([]string{docker, "exec", "-e", env, l.b.ID, ctrWarden}, l.supervise([]string{"--deadline", "120", "--grace", "1", "--lease", "3"}, "setsid-tool", "daemon", "sleep")...)
	renewArgv := []string{docker, "exec", "-e", env, l.b.ID, ctrWarden, "renew", "--state", l.state}
	// Renewals are started every 0.2 s without waiting for the previous
	// one, so a slow docker exec under load delays one renewal, not all.
	script := q(superviseArgv) + " >/dev/null 2>&1 &\n" +
		"while :; do { if " + q(renewArgv) + " >/dev/null 2>&1; then echo renewed >> " + q([]string{renewals}) + "; fi; } & sleep 0.2; done\n"
	host := exec.Command("/bin/sh", "-c", script)
	host.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	Expect(host.Start()).To(Succeed())
	pgid := host.Process.Pid
	DeferCleanup(func() {
		// The group is ours: we started its leader with Setpgid.
		syscall.Kill(-pgid, syscall.SIGKILL)
		host.Wait()
	})
	rec := l.ready(ctx, l.rec)
	countRenewals := func() int {
		data, _ := os.ReadFile(renewals)
		return strings.Count(string(data), "\n")
	}
	// Positive control: warden accepted renewals over more than one lease
	// period (20 renewals, started at least 0.2 s apart: 4 s > 3 s), so
	// the launch lived on renewals. The lease is 3 s, not 1 s: under load a
	// docker exec can take over a second, and a 1 s lease lapsed before
	// the first renewal landed (seen twice with certify runs beside the
	// suite).
	Eventually(ctx, countRenewals).WithTimeout(60*time.Second).Should(BeNumerically(">=", 20), "renewals warden accepted%s", lazy(func() string { return l.diagnose(ctx) }))
	_, ok := l.b.ReadFile(ctx, l.state+"/"+witness.ReceiptFile)
	Expect(ok).To(BeFalse(), "the launch ended while the host renewed it%s", lazy(func() string { return l.diagnose(ctx) }))
	group := func() ([]witness.Stat, error) {
		table, err := witness.Proc.Table()
		var in []witness.Stat
		for _, st := range table {
			if st.PGID == pgid && !st.Dead() {
				in = append(in, st)
			}
		}
		return in, err
	}
	// Positive control: the shell and its foreground docker exec client
	// (at least) are alive in the group.
	in, err := group()
	Expect(err).NotTo(HaveOccurred())
	Expect(len(in)).To(BeNumerically(">=", 2), "the host's group: %+v", in)
	Expect(syscall.Kill(-pgid, syscall.SIGKILL)).To(Succeed())
	err = host.Wait()
	var ee *exec.ExitError
	Expect(err).To(BeAssignableToTypeOf(ee), "the host process was killed")
	Expect(host.ProcessState.Sys().(syscall.WaitStatus).Signal()).To(Equal(syscall.SIGKILL))
	Eventually(ctx, group).WithTimeout(30*time.Second).Should(BeEmpty(), "the host's docker exec clients died with it")
	// warden wait renews once when called: it runs only after the receipt.
	Eventually(ctx, func() bool {
		_, ok := l.b.ReadFile(ctx, l.state+"/"+witness.ReceiptFile)
		return ok
	}).WithTimeout(30*time.Second).WithPolling(250*time.Millisecond).Should(BeTrue(), "no receipt after the host vanished%s", lazy(func() string { return l.diagnose(ctx) }))
	r := l.waitReceipt(ctx)
	ctrOutcome(r, "lease", 143, "TERM")
	var ps []witness.Line
	for _, role := range []string{"harness", "setsid", "daemon"} {
		ps = append(ps, ctrOne(rec, role))
	}
	l.expectGone(ctx, "launch whose lease lapsed", ps...)
}
