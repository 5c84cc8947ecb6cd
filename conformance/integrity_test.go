package conformance_test

// Image integrity after a FULL session (contract §6 and §7.4), in
// containers of the three test images: the owner sets up /task and the four
// XDG markers and takes a probe snapshot; the session (runner/host/session, a
// borrowed container) seeds, runs one activation of a fixture harness that
// needs bash (bash-static comes from the session's private bin on
// alpine-class) and writes /task/deliverable.txt, closes and releases; the
// owner then takes a second snapshot and reads the container's filesystem
// diff from the engine. The after-state is recorded before any positive
// control touches the container; each spec proves first that its
// comparison would see a change made on purpose, then asserts that the
// session made none.
//
// A second container of each image puts recording stand-ins for python3,
// pip, apt-get, apk, uv, curl and wget first on the container's PATH (the
// PATH every exec of the session and the harness inherit): no stand-in may
// be called during seed, activation or close.

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sandproof/sandproof/conformance/containers"
	"github.com/sandproof/sandproof/conformance/framework"
	"github.com/sandproof/sandproof/conformance/sessions"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/session"
	"github.com/sandproof/sandproof/runner/probe"
	"github.com/sandproof/sandproof/runner/witness"
)

// integrityPhases are the session's phases the tripwire log is cut into.
var integrityPhases = []string{"seed", "activation", "close"}

// integrityRun is what one full session left, recorded before any control.
type integrityRun struct {
	box     *sessions.Box
	tools   sessions.Tools
	markers []string
	before  probe.Snapshot
	after   probe.Snapshot
	changes []sessions.Change
	// launch is the environment the session gave the adapter's launch.
	launch session.Env
	// harnessPath is the PATH the harness ran with.
	harnessPath string
	// calls are the tripwire's records per phase (tripwire variant only).
	calls map[string][]string
}

// integritySession runs the owner's setup, one full session and the
// owner's after-state, asserting on the way that the session did its job
// (the positive control that there was a session to judge).
func integritySession(ctx context.Context, image string, tools sessions.Tools, tripwire bool) *integrityRun {
	GinkgoHelper()
	run := &integrityRun{tools: tools, calls: map[string][]string{}}
	b := sessions.Start(ctx, image, tools, tripwire)
	run.box = b
	run.markers = b.Setup(ctx)
	run.before = b.Snapshot(ctx, run.markers)

	fa := &sessions.FixtureAdapter{}
	capDir := GinkgoT().TempDir()
	s, err := session.New(b.SB, fa.Adapter(framework.Fixture("adversary")), session.Config{
		Binaries: tools.Binaries, User: sessions.TaskUser, CaptureDir: capDir,
		// The suite's own fixture, over the engine's archive (which
		// cannot confine a read: provider.ErrUnconfined).
		UnconfinedCaptures: true,
	})
	Expect(err).NotTo(HaveOccurred())
	seen := 0
	cut := func(phase string) {
		if b.Trip == nil {
			return
		}
		all := b.Trip.TripwireCalls(ctx)
		run.calls[phase] = all[seen:]
		seen = len(all)
	}

	Expect(s.Seed(ctx)).To(Succeed())
	cut("seed")
	token := "deliverable-" + sessions.Random()
	res, err := s.Activate(ctx, "a1", token, 60)
	Expect(err).NotTo(HaveOccurred())
	cut("activation")
	r := res.Receipt
	Expect(r.Cause).To(Equal("exited"), "receipt cause")
	Expect(r.ReturnCode).To(HaveValue(Equal(0)), "receipt return_code")
	Expect(r.CleanupConfirmed).To(BeTrue(), "cleanup_confirmed; survivors %+v", r.Survivors)
	cr, err := s.Close(ctx)
	Expect(err).NotTo(HaveOccurred())
	cut("close")
	Expect(cr.SessionDirRemoved).To(BeTrue())
	Expect(cr.Receipts).To(HaveKey("a1"))
	Expect(s.Release(ctx)).To(Succeed())
	info, err := b.SB.Inspect(ctx)
	Expect(err).NotTo(HaveOccurred())
	Expect(info.Running).To(BeTrue(), "a borrowed container is left to its owner by release")

	// The after-state, before anything else touches the container.
	run.after = b.Snapshot(ctx, run.markers)
	run.changes = b.Changes()
	GinkgoWriter.Printf("docker diff after the session: %v\n", run.changes)

	// The session did its job: the harness ran as the task user, wrote
	// the token, planted a daemon that warden stopped, and the session
	// dir is gone.
	tmp := GinkgoT().TempDir()
	Expect(b.SB.Download(ctx, sessions.Deliverable, filepath.Join(tmp, "deliverable"))).To(Succeed())
	Expect(os.ReadFile(filepath.Join(tmp, "deliverable"))).To(Equal([]byte(token)))
	err = b.SB.Download(ctx, s.Dir(), filepath.Join(tmp, "session"))
	Expect(errors.Is(err, provider.ErrPathNotFound)).To(BeTrue(), "session dir %s after close: %v", s.Dir(), err)
	rec, err := witness.ReadRecord(filepath.Join(capDir, "run", "a1", sessions.RecordName))
	Expect(err).NotTo(HaveOccurred(), "the adversary's record, captured at close")
	h, err := rec.Harness()
	Expect(err).NotTo(HaveOccurred())
	Expect(h.UID).To(Equal(sessions.TaskUID), "the harness runs as the task user")
	Expect(rec.Role("daemon")).To(HaveLen(1), "the harness planted a daemon")
	pr, err := witness.ParseReceipt(res.ReceiptJSON)
	Expect(err).NotTo(HaveOccurred())
	_, reached := witness.Find(pr.Reached, rec.Role("daemon")[0].ID())
	Expect(reached).To(BeTrue(), "warden's cleanup reached the daemon: %+v", pr.Reached)
	p, err := os.ReadFile(filepath.Join(capDir, "run", "a1", sessions.PathName))
	Expect(err).NotTo(HaveOccurred(), "the harness's PATH, captured at close")
	run.harnessPath = string(p)
	launches := fa.Launches()
	Expect(launches).To(HaveLen(1), "one activation, one launch")
	run.launch = launches[0]
	return run
}

var _ = Describe("a full session of a fixture harness that needs bash (seed, one activation, close, release),", framework.Docker, func() {
	DescribeTableSubtree("in image", func(image string) {
		// ContinueOnFailure: a failing spec must not hide the others of
		// the same session.
		Describe("", Ordered, ContinueOnFailure, func() {
			var tools sessions.Tools
			BeforeAll(func(_ SpecContext) {
				tools = sessions.BuildTools(moduleRoot(), GinkgoT().TempDir(), framework.Bin.Warden)
			}, NodeTimeout(3*time.Minute))

			Context("with the image's own PATH,", Ordered, func() {
				var run *integrityRun
				BeforeAll(func(ctx SpecContext) {
					run = integritySession(ctx, image, tools, false)
				}, NodeTimeout(4*time.Minute))
				integritySpecs(func() *integrityRun { return run }, nil)
			})

			Context("with recording stand-ins for python3, pip, apt-get, apk, uv, curl and wget first on the container's PATH,", Ordered, func() {
				var run *integrityRun
				BeforeAll(func(ctx SpecContext) {
					run = integritySession(ctx, image, tools, true)
				}, NodeTimeout(4*time.Minute))
				tripwireSpecs(func() *integrityRun { return run })
			})
		})
	},
		Entry("debian-12", Label("image:debian-12"), "debian-12"),
		Entry("alpine-class", Label("image:alpine-class"), "alpine-class"),
		Entry("old-python", Label("image:old-python"), "old-python"),
	)
})

// integritySpecs declares the integrity specs over a recorded run; extra
// goes on the diff's allow-list.
func integritySpecs(get func() *integrityRun, extra []string) {
	framework.ConformanceIt("7.4 verify", "should leave python3 and bash as the probe saw them before (path, resolved file, version, sha256)",
		func(ctx SpecContext) {
			run := get()
			b := run.box
			// Positive control: a python3 and a bash put in the first
			// directory of the image's PATH are seen changed.
			first := strings.Split(b.PATH, ":")[0]
			for _, t := range []string{"python3", "bash"} {
				Expect(provider.UploadBytes(ctx, b.SB, []byte("#!/bin/sh\necho control "+t+"\n"), first+"/"+t, 0o755, 0, 0)).To(Succeed())
			}
			ctl := probe.Diff(run.before, b.Snapshot(ctx, run.markers))
			Expect(kinds(changed(ctl, "python3", "bash"))).To(Equal([]string{"bash", "python3"}),
				"positive control: a python3 and a bash first on PATH are seen: %+v", ctl.Changes)

			Expect(changed(probe.Diff(run.before, run.after), "python3", "bash", "os")).To(BeEmpty())
			Expect(run.after.Python3).To(Equal(run.before.Python3), "python3: path, resolved, version, sha256")
			Expect(run.after.Bash).To(Equal(run.before.Bash), "bash: path, resolved, version, sha256")
			GinkgoWriter.Printf("python3 %s, bash %s\n", run.after.Python3, run.after.Bash)
		}, SpecTimeout(2*time.Minute))

	framework.ConformanceIt("7.4 verify", "should leave no filesystem change outside /task, the session dirs' parent and the owner's marker dirs, and the private bash in no system path",
		func(ctx SpecContext) {
			run := get()
			b := run.box
			allowed := sessions.Allowed(extra...)
			// Positive controls: the diff holds the harness's own write,
			// and a deliberate write to /usr/local/bin is outside the
			// allow-list.
			Expect(run.changes).To(ContainElement(sessions.Change{Kind: "A", Path: sessions.Deliverable}),
				"positive control: the diff holds what the harness wrote")
			ctlPath := "/usr/local/bin/sandproof-control-" + sessions.Random()
			Expect(provider.UploadBytes(ctx, b.SB, []byte("control\n"), ctlPath, 0o755, 0, 0)).To(Succeed())
			Expect(sessions.Outside(b.Changes(), allowed)).To(ContainElement("A "+ctlPath),
				"positive control: a write to /usr/local/bin is outside the allow-list")
			if run.before.Bash.Absent() {
				Expect(run.launch.BashProvided).To(BeTrue(), "positive control: the image has no bash, the session provided its own")
			} else {
				Expect(run.launch.BashProvided).To(BeFalse(), "the image's bash %s was used", run.before.Bash.Path)
			}

			Expect(sessions.Outside(run.changes, allowed)).To(BeEmpty(), "changes outside %v", allowed)
			for _, c := range run.changes {
				if path.Base(c.Path) == "bash" {
					Expect(c.Path).To(HavePrefix(sessions.BaseDir+"/"), "a bash left outside the session dirs: %s", c)
				}
			}
		}, SpecTimeout(2*time.Minute))

	framework.ConformanceIt("7.4 verify", "should keep the four XDG markers of the task user unchanged (sha256)",
		func(ctx SpecContext) {
			run := get()
			b := run.box
			Expect(run.markers).To(HaveLen(4))
			for i, m := range run.before.Markers {
				Expect(m.Missing).To(BeFalse(), "marker %s before", m.Path)
				Expect(m.SHA256).NotTo(BeEmpty(), "marker %s before: %s", m.Path, m.Error)
				Expect(m.Path).To(Equal(run.markers[i]))
			}
			// Positive control: a marker rewritten now is seen changed.
			mk := run.markers[0]
			Expect(provider.UploadBytes(ctx, b.SB, []byte("rewritten "+sessions.Random()+"\n"), mk, 0o644, sessions.TaskUID, sessions.TaskUID)).To(Succeed())
			ctl := probe.Diff(run.before, b.Snapshot(ctx, run.markers))
			cs := changed(ctl, "marker", "marker_set")
			Expect(cs).NotTo(BeEmpty(), "positive control: a rewritten marker is seen")
			Expect(cs).To(HaveEach(And(HaveField("What", "marker"), HaveField("Path", mk))), "positive control: only the rewritten marker is seen")

			Expect(changed(probe.Diff(run.before, run.after), "marker", "marker_set")).To(BeEmpty())
			Expect(run.after.Markers).To(Equal(run.before.Markers), "the four markers: present, same size and sha256")
		}, SpecTimeout(2*time.Minute))
}

// tripwireSpecs declares the tripwire specs over a recorded run: seed on
// one side, activation and close on the other, so a finding in one phase
// does not hide the others.
func tripwireSpecs(get func() *integrityRun) {
	// Finding (2026-11-29): seed's `probe snapshot` (to learn whether the
	// image has bash, then to hash warden) looks tools up on the
	// container's PATH and runs `python3 --version`, twice per seed: the
	// image's, or a task venv's, interpreter, as root.
	framework.ConformanceIt("6 sessions", "should call none of them during seed",
		func(ctx SpecContext) {
			run := get()
			tripwireControls(ctx, run)
			Expect(run.calls).To(HaveKey("seed"))
			Expect(run.calls["seed"]).To(BeEmpty(), "stand-ins called during seed in %s", run.box.Image)
		}, SpecTimeout(2*time.Minute))

	framework.ConformanceIt("6 sessions", "should call none of them during the activation and close",
		func(ctx SpecContext) {
			run := get()
			tripwireControls(ctx, run)
			for _, phase := range integrityPhases[1:] {
				Expect(run.calls).To(HaveKey(phase))
				Expect(run.calls[phase]).To(BeEmpty(), "stand-ins called during %s in %s", phase, run.box.Image)
			}
		}, SpecTimeout(2*time.Minute))

	// The tripwire container's own diff: the same integrity specs, with the
	// tripwire's dir allowed.
	integritySpecs(get, []string{containers.TripwireDir})
}

// tripwireControls are the tripwire's positive controls after the session:
// the harness ran with the tripwire first on its PATH (after the session's
// private bin, if any), and a stand-in called on purpose now, through the
// exec route the session uses (no environment of its own), is recorded.
func tripwireControls(ctx context.Context, run *integrityRun) {
	GinkgoHelper()
	b := run.box
	dirs := slices.DeleteFunc(strings.Split(run.harnessPath, ":"), func(d string) bool { return d == run.launch.Bin })
	Expect(dirs).NotTo(BeEmpty())
	Expect(dirs[0]).To(Equal(containers.TripwireBin), "positive control: the harness's PATH %q starts with the tripwire", run.harnessPath)
	n := len(b.Trip.TripwireCalls(ctx))
	r, err := b.SB.Exec(ctx, provider.ExecSpec{Argv: []string{"apt-get", "install", "control"}})
	Expect(err).NotTo(HaveOccurred())
	Expect(r.ExitCode).To(Equal(1), "the apt-get stand-in: %s", r.Stderr)
	Expect(b.Trip.TripwireCalls(ctx)[n:]).To(ConsistOf("tripwire: "+containers.TripwireBin+"/apt-get install control"),
		"positive control: a stand-in called on purpose after the session is recorded")
}

// kinds returns the sorted, distinct What of changes.
func kinds(cs []probe.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.What)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// changed returns the probe diff's changes of the given kinds.
func changed(r probe.Report, what ...string) []probe.Change {
	var out []probe.Change
	for _, c := range r.Changes {
		if slices.Contains(what, c.What) {
			out = append(out, c)
		}
	}
	return out
}
