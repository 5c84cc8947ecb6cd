package conformance_test

// The project's own Python worker (fixtures/python/worker.py) under warden
// in each test image, the way a session runs a Python harness: `warden
// supervise -- warden run --params P` in events mode, the interpreter the
// python preparer stages (runner/host/runtimes/python) mounted read-only
// where sessions mount runtimes, and nothing of the image's Python used
// (old-python's python3.9 is first on the image's PATH; the tripwire's
// stand-in is first on the execs'). The tree is staged once per suite run,
// on the host, from Debian's mirror through the .debs' cache; a mirror
// that does not answer is a missing prerequisite (framework.Missing).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"

	"github.com/sandproof/sandproof/conformance/containers"
	"github.com/sandproof/sandproof/conformance/framework"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/runtimes"
	"github.com/sandproof/sandproof/runner/host/runtimes/python"
	"github.com/sandproof/sandproof/runner/witness"
)

// Paths inside the container: the tree where sessions mount a runtime,
// its launcher, and the worker.
const (
	ctrPyTree     = "/sandproof-runtime/" + python.InterpDir
	ctrPyLauncher = ctrPyTree + "/usr/bin/python3"
	ctrPyWorker   = ctrBin + "/worker.py"
)

// pyStep is one line the worker prints (a JSON object per step).
type pyStep struct {
	Step       string `json:"step"`
	Version    string `json:"version"`
	Executable string `json:"executable"`
	Prefix     string `json:"prefix"`
	Isolated   int    `json:"isolated"`
	PID        int    `json:"pid"`
	SID        int    `json:"sid"`
	WorkerSID  int    `json:"worker_sid"`
	Mode       string `json:"mode"`
	// Tool and Child are what the worker read of their /proc/PID/stat
	// once the tool had written ("ready").
	Tool, Child pyStat
}

// pyStat is a process the worker saw in /proc.
type pyStat struct {
	State     string `json:"state"`
	StartTime uint64 `json:"start_time"`
}

var pyStaged struct {
	once sync.Once
	dir  string
	err  error
}

// pyTree returns the host dir of the interpreter tree, staged on first
// use: once per suite run, whichever parallel process asks first (a lock
// in the suite's binary dir, which the suite removes at its end).
func pyTree() string {
	GinkgoHelper()
	pyStaged.once.Do(func() { pyStaged.dir, pyStaged.err = pyStage() })
	if errors.Is(pyStaged.err, runtimes.ErrUnreachable) {
		cache, _ := python.DebCache()
		framework.Missing(fmt.Sprintf("Debian's mirror, to stage the python interpreter tree (%v)", pyStaged.err),
			fmt.Sprintf("give this host access to deb.debian.org, or a filled .deb cache in %s", cache))
	}
	Expect(pyStaged.err).NotTo(HaveOccurred(), "stage the python interpreter tree")
	return pyStaged.dir
}

func pyStage() (string, error) {
	base := filepath.Dir(framework.Bin.FixtureDir)
	dir := filepath.Join(base, "python")
	lock, err := os.OpenFile(filepath.Join(base, "python.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "usr/bin/python3")); err == nil {
		return dir, nil // the other process staged it
	}
	cache, err := python.DebCache()
	if err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.%d", dir, os.Getpid())
	start := time.Now()
	info, err := python.StageInterpreter(context.Background(), python.InterpOptions{Dir: tmp, Arch: runtime.GOARCH, Cache: cache})
	if err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	GinkgoWriter.Printf("staged %s in %s (.debs cached in %s)\n", info.Source, time.Since(start).Round(time.Millisecond), cache)
	return dir, os.Rename(tmp, dir)
}

// pyLaunch is a ctrLaunch running the worker.
type pyLaunch struct {
	*ctrLaunch
	events string
}

// supervise is supervise's command line for the worker in mode: warden
// run in events mode, as a session launches a harness.
func (l *pyLaunch) supervise(flags []string, mode string) []string {
	GinkgoHelper()
	params, err := json.Marshal(map[string]any{
		"argv": []string{ctrPyLauncher, ctrPyWorker, mode, l.recDir}, "cwd": l.recDir,
		"inherit_env": []string{"PATH"}, "mode": "events", "events": l.events,
	})
	Expect(err).NotTo(HaveOccurred())
	p := l.dir + "/params.json"
	l.b.Upload(containers.File{Path: p, Mode: 0o644, Data: params})
	args := append([]string{"supervise", "--state", l.state}, l.u.flags...)
	return append(append(args, flags...), "--", ctrWarden, "run", "--params", p)
}

// steps reads the worker's steps from the events file; a line that is not
// an event (a traceback) fails the spec.
func (l *pyLaunch) steps(ctx context.Context) map[string]pyStep {
	GinkgoHelper()
	data, ok := l.b.ReadFile(ctx, l.events)
	if !ok {
		return nil
	}
	host := filepath.Join(GinkgoT().TempDir(), "events.jsonl")
	Expect(os.WriteFile(host, data, 0o600)).To(Succeed())
	out := map[string]pyStep{}
	for _, e := range runnerEvents(host) {
		Expect(e.Event).NotTo(BeNil(), "the worker printed %q%s", e.content(), lazy(func() string { return l.diagnose(ctx) }))
		var s pyStep
		Expect(json.Unmarshal(e.Event, &s)).To(Succeed())
		if len(out) == 0 {
			Expect(s.Step).To(Equal("interpreter"), "the worker's first step")
		}
		out[s.Step] = s
	}
	return out
}

// ready waits for the worker's "ready" step and checks its first: it ran
// under the tree's CPython, through the tree's launcher, isolated.
func (l *pyLaunch) ready(ctx context.Context) map[string]pyStep {
	GinkgoHelper()
	var steps map[string]pyStep
	Eventually(ctx, func() (map[string]pyStep, error) {
		steps = l.steps(ctx)
		if _, ok := steps["ready"]; !ok {
			if _, ended := l.b.ReadFile(ctx, l.state+"/"+witness.ReceiptFile); ended {
				return steps, StopTrying("the launch ended")
			}
		}
		return steps, nil
	}).WithTimeout(60*time.Second).WithPolling(100*time.Millisecond).Should(HaveKey("ready"),
		"the worker never said it was ready%s", lazy(func() string { return l.diagnose(ctx) }))
	in := steps["interpreter"]
	Expect(in.Version).To(HavePrefix("3.13."), "the worker's interpreter is the tree's CPython 3.13, not the image's python3")
	Expect(in.Executable).To(Equal(ctrPyLauncher), "sys.executable")
	Expect(in.Prefix).To(Equal(ctrPyTree+"/usr"), "sys.prefix")
	Expect(in.Isolated).To(Equal(1), "sys.flags.isolated (-I)")
	Expect(steps["tool"].SID).To(Equal(steps["tool"].PID), "positive control: the tool leads a session of its own")
	Expect(steps["tool"].SID).NotTo(Equal(steps["tool"].WorkerSID), "positive control: the tool left the worker's session")
	return steps
}

// toolLines counts the lines the detached tool appended.
func (l *pyLaunch) toolLines(ctx context.Context) int {
	GinkgoHelper()
	data, _ := l.b.ReadFile(ctx, l.recDir+"/tool.out")
	return strings.Count(string(data), "tick\n")
}

// alive proves each named process alive and visible in the container's
// /proc under its name (comms), and returns their identities.
func (l *pyLaunch) alive(ctx context.Context, procs map[string]pyStep, comms map[string]types.GomegaMatcher) map[string]witness.ID {
	GinkgoHelper()
	var pids []int
	for _, p := range procs {
		pids = append(pids, p.PID)
	}
	stats := l.b.Stats(ctx, pids...)
	ids := map[string]witness.ID{}
	for name, p := range procs {
		st, ok := stats[p.PID]
		Expect(ok).To(BeTrue(), "positive control: the %s (pid %d) should be in the container's /proc", name, p.PID)
		Expect(st.Dead()).To(BeFalse(), "positive control: the %s is a zombie already", name)
		Expect(st.Comm).To(comms[name], "positive control: the %s is visible under its name", name)
		ids[name] = st.ID()
	}
	return ids
}

var _ = Describe("a Python worker, run by warden in events mode with the staged CPython tree mounted read-only,", framework.Docker, func() {
	DescribeTableSubtree("in image", func(image string) {
		Describe("in one container,", Ordered, ContinueOnFailure, func() {
			pyImageSpecs(image)
		})
	},
		Entry("debian-12", Label("image:debian-12"), "debian-12"),
		Entry("alpine-class", Label("image:alpine-class"), "alpine-class"),
		Entry("old-python", Label("image:old-python"), "old-python"),
	)
})

// pyImageSpecs declares the specs of one image. To keep the suite's time
// small, the deadline runs the worker as uid 1000 and the exit as root
// (the two users of the other container specs).
func pyImageSpecs(image string) {
	var b *ctrBox
	BeforeAll(func(ctx SpecContext) {
		tree := pyTree()
		b = ctrStartWith(ctx, image, containers.Options{Limits: provider.DefaultLimits, Binds: []string{tree + ":" + ctrPyTree + ":ro"}})
		b.Upload(containers.HostFile(filepath.Join(moduleRoot(), "fixtures", "python", "worker.py"), ctrPyWorker, 0o644))
		if image == "old-python" {
			// Positive control: this image has a python3 of its own the
			// worker could have run under, and it is no 3.13.
			r := b.Run(ctx, containers.Exec{Argv: []string{"/usr/bin/python3", "-c", "import sys; print(sys.version)"}})
			Expect(r.Code).To(Equal(0), "%s", r)
			Expect(r.Stdout).To(HavePrefix("3.9."), "old-python's own python3")
		}
	}, NodeTimeout(5*time.Minute))
	AfterAll(func(ctx SpecContext) {
		if b == nil {
			return
		}
		// Neither warden nor the worker called the image's python3 (or
		// pip, uv, ...) by name.
		Expect(b.TripwireCalls(ctx)).To(BeEmpty(), "stand-ins called in %s", image)
	}, NodeTimeout(time.Minute))
	newPy := func(u ctrUser) *pyLaunch {
		l := b.newLaunch(u)
		return &pyLaunch{ctrLaunch: l, events: l.recDir + "/events.jsonl"}
	}

	framework.ConformanceIt("2 stop rules", "should, at the deadline, stop the worker, its child and the tool it started with start_new_session=True",
		func(ctx SpecContext) {
			l := newPy(ctrUsers[1])
			res := l.warden(ctx, l.supervise([]string{"--deadline", "5", "--grace", "0.5", "--detach"}, "hang")...)
			Expect(res.Code).To(Equal(0), "%s", res)
			steps := l.ready(ctx)
			// Positive control: the tool runs and appends, and the worker,
			// its child and the tool are alive and visible.
			n := l.toolLines(ctx)
			Eventually(ctx, func() int { return l.toolLines(ctx) }).WithTimeout(10*time.Second).WithPolling(50*time.Millisecond).
				Should(BeNumerically(">", n), "positive control: the tool's file grows")
			ids := l.alive(ctx, map[string]pyStep{"worker": steps["interpreter"], "child": steps["child"], "tool": steps["tool"]},
				// The worker runs as the tree's loader ran it.
				map[string]types.GomegaMatcher{"worker": HavePrefix("ld-linux-"), "child": Equal("sleep"), "tool": Equal("sh")})
			_, ok := l.b.ReadFile(ctx, l.state+"/"+witness.ReceiptFile)
			Expect(ok).To(BeFalse(), "positive control: the deadline had not come when the tool was seen")
			r := l.waitReceipt(ctx)
			for name, id := range ids {
				Expect(l.b.ProcState(ctx, id)).NotTo(Equal("alive"), "the %s %v survived a confirmed cleanup in %s", name, id, image)
			}
			// warden run forwards the TERM and exits 143 itself.
			ctrOutcome(r, "deadline", 143, nil)
			_, reached := witness.Find(r.Reached, ids["tool"])
			Expect(reached).To(BeTrue(), "the tool %v is in reached: %+v", ids["tool"], r.Reached)
		}, SpecTimeout(ctrSpecTimeout))

	framework.ConformanceIt("3 receipt", "should, when the worker exits 0 after its tool's first write, give return_code 0 and stop the tool it left behind",
		func(ctx SpecContext) {
			l := newPy(ctrUsers[0])
			res := l.warden(ctx, l.supervise([]string{"--deadline", "60", "--grace", "0.5"}, "exit")...)
			Expect(res.Code).To(Equal(0), "foreground supervise, worker exited 0: %s%s", res, lazy(func() string { return l.diagnose(ctx) }))
			steps := l.ready(ctx)
			Expect(steps["ready"].Mode).To(Equal("exit"))
			r := l.receipt(ctx)
			ctrOutcome(r, "exited", 0, nil)
			// Positive control: the tool wrote, and the worker saw it and
			// the child alive in the container's /proc once it had (the
			// worker exits at once: no exec of the spec's could).
			Expect(l.toolLines(ctx)).To(BeNumerically(">=", 1), "positive control: the tool wrote")
			ready := steps["ready"]
			for name, st := range map[string]pyStat{"tool": ready.Tool, "child": ready.Child} {
				Expect(st.State).NotTo(Equal("Z"), "positive control: the worker saw the %s alive", name)
				Expect(st.StartTime).NotTo(BeZero(), "positive control: the worker read the %s's start time", name)
				id := witness.ID{PID: steps[name].PID, StartTime: st.StartTime}
				Expect(l.b.ProcState(ctx, id)).NotTo(Equal("alive"), "the %s %v survived a confirmed cleanup in %s", name, id, image)
				_, reached := witness.Find(r.Reached, id)
				Expect(reached).To(BeTrue(), "the %s %v is in reached: %+v", name, id, r.Reached)
			}
		}, SpecTimeout(ctrSpecTimeout))
}
