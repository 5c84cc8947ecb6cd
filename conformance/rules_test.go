package conformance_test

// Specs for contract rules that a supervisor could break while every other
// spec still passed: the deadline's timing, descriptors under supervise, the
// foreground exit status of an unconfirmed cleanup, the launch claim under a
// race, wait's one lease renewal, warden run's PATH search and its marker,
// and JSON detection in events mode. Each rule is written in
// docs/contract.md under the clause the spec cites, and each has a mutant in
// runner/warden/mutant that `make mutants` shows the spec kills.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sandproof/sandproof/conformance/framework"
	"github.com/sandproof/sandproof/conformance/procs"
	"github.com/sandproof/sandproof/fakeproc"
	"github.com/sandproof/sandproof/runner/warden/proc"
	"github.com/sandproof/sandproof/runner/witness"
)

const (
	// rulesSlack is how late a timer may fire on a loaded 2-core host
	// (scheduling, process start, one /proc scan) and still count as on time.
	// docs/contract.md states it with the deadline rule.
	rulesSlack = 1 * time.Second
	// rulesKillWait is the contract's bound on the wait for KILLed processes
	// to vanish.
	rulesKillWait = 5 * time.Second
)

// rulesSigwait starts the sigwait fixture under a detached supervise with
// flags, records its stamps, and returns the state dir and the paths of
// its ready and record files. It proves the harness is alive before it
// returns: the positive control of every timing check on it.
func rulesSigwait(ctx context.Context, flags []string, onSignal string) (state, ready, record string, harness witness.ID) {
	GinkgoHelper()
	dir := GinkgoT().TempDir()
	state, ready, record = filepath.Join(dir, "state"), filepath.Join(dir, "ready"), filepath.Join(dir, "record")
	args := append([]string{"supervise", "--state", state, "--detach"}, flags...)
	args = append(args, "--", framework.Fixture("sigwait"), "-ready", ready, "-record", record,
		"-on-signal", onSignal, "-stamps", "-max", "120s")
	res := procs.Warden(ctx, framework.Bin.Warden, dir, args...)
	Expect(res.Code).To(Equal(0), "%s", res)
	d, err := witness.ParseDetached(res.Stdout)
	Expect(err).NotTo(HaveOccurred())
	sup, err := witness.Proc.ReadStat(d.SupervisorPID)
	Expect(err).NotTo(HaveOccurred(), "the supervisor does not run")
	var pid int
	Eventually(ctx, func() error {
		data, err := os.ReadFile(ready)
		if err != nil {
			return err
		}
		pid, err = strconv.Atoi(strings.Fields(string(data))[0])
		return err
	}).WithTimeout(readyTimeout).Should(Succeed(), "the harness never wrote its ready file")
	st, err := witness.Proc.ReadStat(pid)
	Expect(err).NotTo(HaveOccurred(), "positive control: the harness should be alive")
	Expect(st.Dead()).To(BeFalse(), "positive control: the harness is a zombie already")
	harness = st.ID()
	procs.KillOnCleanup(func() []witness.ID { return []witness.ID{harness, sup.ID()} })
	return state, ready, record, harness
}

// rulesStamp reads a "WORD NANOS" line of sigwait's files.
func rulesStamp(line string) time.Time {
	GinkgoHelper()
	f := strings.Fields(line)
	Expect(f).To(HaveLen(2), "stamp line %q", line)
	n, err := strconv.ParseInt(f[1], 10, 64)
	Expect(err).NotTo(HaveOccurred(), "stamp line %q", line)
	return time.Unix(0, n)
}

func rulesTime(s string) time.Time {
	GinkgoHelper()
	t, err := time.Parse(time.RFC3339Nano, s)
	Expect(err).NotTo(HaveOccurred())
	return t
}

var _ = Describe("warden supervise, on a deadline,", framework.Local, func() {
	framework.ConformanceIt("2 deadline", "should send the first TERM no earlier than the deadline and no later than the deadline plus the slack, and end within the grace and the kill wait", func(ctx SpecContext) {
		const deadline, grace = 1 * time.Second, 1500 * time.Millisecond
		// The grace is larger than the slack, so a timer armed late by the
		// grace is caught by the first bound.
		Expect(grace).To(BeNumerically(">", rulesSlack))
		state, ready, record, _ := rulesSigwait(ctx, []string{"--deadline", "1", "--grace", "1.5"}, "keep")

		w := procs.Warden(ctx, framework.Bin.Warden, "", "wait", "--state", state, "--timeout", "30")
		Expect(w.Code).To(Equal(0), "%s", w)
		r, err := witness.ReadReceipt(state)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Cause).To(Equal("deadline"))
		Expect(r.TimedOut).To(BeTrue())
		started, ended := rulesTime(r.StartedAt), rulesTime(r.EndedAt)

		data, err := os.ReadFile(ready)
		Expect(err).NotTo(HaveOccurred())
		Expect(rulesStamp(string(data))).To(BeTemporally(">=", started), "the harness started after the supervisor")
		data, err = os.ReadFile(record)
		Expect(err).NotTo(HaveOccurred(), "the harness never got a TERM")
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		Expect(lines[0]).To(HavePrefix("TERM "))
		term := rulesStamp(lines[0])
		AddReportEntry("deadline timing", fmt.Sprintf("first TERM at +%v, receipt ended at +%v (deadline %v, grace %v)",
			term.Sub(started), ended.Sub(started), deadline, grace))
		Expect(term.Sub(started)).To(BeNumerically(">=", deadline-10*time.Millisecond), "the TERM came before the deadline")
		Expect(term.Sub(started)).To(BeNumerically("<=", deadline+rulesSlack), "the stop started late")
		// The harness kept running after TERM, so only a KILL after the
		// grace ended it.
		Expect(r.Signal).To(HaveValue(Equal("KILL")))
		Expect(ended.Sub(term)).To(BeNumerically(">=", grace-10*time.Millisecond), "KILL came before the grace was over")
		Expect(ended.Sub(started)).To(BeNumerically("<=", deadline+grace+rulesKillWait+rulesSlack))
	})
})

var _ = Describe("warden renew --deadline, on a running launch,", framework.Local, func() {
	framework.ConformanceIt("2 deadline", "should bring the deadline forward to SECONDS from the renew: a deadline stop, its TERM on time, the receipt's deadline_seconds the new one", func(ctx SpecContext) {
		const forward = 1 * time.Second
		state, _, record, harness := rulesSigwait(ctx, []string{"--deadline", "120", "--grace", "0.2"}, "record")
		asked := time.Now()
		res := procs.Warden(ctx, framework.Bin.Warden, "", "renew", "--state", state, "--deadline", "1")
		Expect(res.Code).To(Equal(0), "%s", res)
		w := procs.Warden(ctx, framework.Bin.Warden, "", "wait", "--state", state, "--timeout", "30")
		Expect(w.Code).To(Equal(0), "no confirmed receipt within 30 s of a deadline brought to 1 s: %s", w)
		r, err := witness.ReadReceipt(state)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Cause).To(Equal("deadline"))
		Expect(r.TimedOut).To(BeTrue())
		Expect(procs.Alive(harness)).To(BeFalse())
		data, err := os.ReadFile(record)
		Expect(err).NotTo(HaveOccurred(), "the harness never got a TERM")
		term := rulesStamp(strings.Split(strings.TrimSpace(string(data)), "\n")[0])
		started := rulesTime(r.StartedAt)
		AddReportEntry("deadline brought forward", fmt.Sprintf("renew at +%v, first TERM at +%v, deadline_seconds %.3f", asked.Sub(started), term.Sub(started), r.DeadlineSeconds))
		Expect(term.Sub(asked)).To(BeNumerically(">=", forward-10*time.Millisecond), "the TERM came before the deadline the renew asked for")
		Expect(term.Sub(asked)).To(BeNumerically("<=", forward+rulesSlack), "the stop started late")
		want := asked.Add(forward).Sub(started).Seconds()
		Expect(r.DeadlineSeconds).To(BeNumerically("~", want, rulesSlack.Seconds()), "deadline_seconds is not the deadline the renew set")
	})

	framework.ConformanceIt("2 deadline", "should never move the deadline later: the launch's --deadline stays its ceiling", func(ctx SpecContext) {
		const deadline = 2 * time.Second
		state, _, record, _ := rulesSigwait(ctx, []string{"--deadline", "2", "--grace", "0.2"}, "record")
		res := procs.Warden(ctx, framework.Bin.Warden, "", "renew", "--state", state, "--deadline", "60")
		Expect(res.Code).To(Equal(0), "%s", res)
		w := procs.Warden(ctx, framework.Bin.Warden, "", "wait", "--state", state, "--timeout", "30")
		Expect(w.Code).To(Equal(0), "no confirmed receipt within 30 s of a 2 s deadline: a later renew --deadline extended it: %s", w)
		r, err := witness.ReadReceipt(state)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Cause).To(Equal("deadline"))
		data, err := os.ReadFile(record)
		Expect(err).NotTo(HaveOccurred(), "the harness never got a TERM")
		term := rulesStamp(strings.Split(strings.TrimSpace(string(data)), "\n")[0])
		started := rulesTime(r.StartedAt)
		Expect(term.Sub(started)).To(BeNumerically("<=", deadline+rulesSlack), "the stop came after the launch's own deadline")
		Expect(r.DeadlineSeconds).To(BeNumerically("~", deadline.Seconds(), 0.001))
	})

	framework.ConformanceIt("4 exit statuses", "should refuse a bad --deadline with exit 2 naming the flag, and a launch that has ended with 1", func(ctx SpecContext) {
		state, _, _, _ := rulesSigwait(ctx, []string{"--deadline", "120", "--grace", "0.2"}, "record")
		for _, bad := range []string{"0", "-1", "1e2", "soon"} {
			res := procs.Warden(ctx, framework.Bin.Warden, "", "renew", "--state", state, "--deadline", bad)
			Expect(res.Code).To(Equal(2), "renew --deadline %q: %s", bad, res)
			Expect(res.Stderr).To(ContainSubstring("--deadline"))
			Expect(res.Stderr).To(ContainSubstring(strconv.Quote(bad)))
		}
		Expect(procs.Warden(ctx, framework.Bin.Warden, "", "stop", "--state", state, "--wait", "30").Code).To(Equal(0))
		res := procs.Warden(ctx, framework.Bin.Warden, "", "renew", "--state", state, "--deadline", "1")
		Expect(res.Code).To(Equal(1), "%s", res)
		Expect(res.Stderr).To(ContainSubstring("has ended"))
	})
})

// rulesLeaked opens descriptors the way a careless caller leaks them: a
// pipe's two ends and a file, none close-on-exec in the child, which gets
// them as 3, 4 and 5.
func rulesLeaked() []*os.File {
	GinkgoHelper()
	r, w, err := os.Pipe()
	Expect(err).NotTo(HaveOccurred())
	f, err := os.Create(filepath.Join(GinkgoT().TempDir(), "leaked"))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { r.Close(); w.Close(); f.Close() })
	return []*os.File{r, w, f}
}

// rulesInherited decodes fdlist's line and returns the descriptors it got
// across its exec (those without close-on-exec), sorted.
func rulesInherited(line string) []int {
	GinkgoHelper()
	var got struct {
		FDs []struct {
			FD      int    `json:"fd"`
			Target  string `json:"target"`
			Cloexec bool   `json:"cloexec"`
		} `json:"fds"`
	}
	Expect(json.Unmarshal([]byte(strings.TrimSpace(line)), &got)).To(Succeed(), "fdlist printed %q", line)
	var fds []int
	for _, e := range got.FDs {
		if !e.Cloexec {
			fds = append(fds, e.FD)
		}
	}
	slices.Sort(fds)
	return fds
}

var _ = Describe("warden supervise, given descriptors its caller leaked,", framework.Local, func() {
	for _, mode := range []string{"foreground", "detached"} {
		framework.ConformanceIt("2 descriptors", fmt.Sprintf("should pass the harness only 0, 1 and 2 (%s)", mode), func(ctx SpecContext) {
			leaked := rulesLeaked()
			// Positive control: started directly, fdlist sees the leaked ones.
			direct := exec.CommandContext(ctx, framework.Fixture("fdlist"))
			direct.ExtraFiles = leaked
			out, err := direct.Output()
			Expect(err).NotTo(HaveOccurred())
			// (The suite's own process may hold more that it leaks too.)
			Expect(rulesInherited(string(out))).To(ContainElements(0, 1, 2, 3, 4, 5), "fdlist should see what it inherited")

			dir := GinkgoT().TempDir()
			state := filepath.Join(dir, "state")
			args := []string{"supervise", "--state", state, "--deadline", "30"}
			if mode == "detached" {
				args = append(args, "--detach")
			}
			cmd := exec.CommandContext(ctx, framework.Bin.Warden, append(args, "--", framework.Fixture("fdlist"))...)
			cmd.ExtraFiles = leaked
			cmd.Stdout, cmd.Stderr = io.Discard, GinkgoWriter
			// A leaked pipe end held by a process we did not wait for must
			// not keep us here.
			cmd.WaitDelay = 2 * time.Second
			Expect(cmd.Run()).To(Succeed())
			w := procs.Warden(ctx, framework.Bin.Warden, dir, "wait", "--state", state, "--timeout", "30")
			Expect(w.Code).To(Equal(0), "%s", w)
			data, err := os.ReadFile(filepath.Join(state, "stdout"))
			Expect(err).NotTo(HaveOccurred())
			Expect(rulesInherited(string(data))).To(Equal([]int{0, 1, 2}), "descriptors the harness inherited: %s", data)
		})
	}
})

var _ = Describe("warden supervise in the foreground, when cleanup is not confirmed,", framework.Fakeproc, func() {
	framework.ConformanceIt("4 exit statuses", "should exit 1 although the harness returned 0", func(ctx SpecContext) {
		// A fake tree whose leftover never dies: warden records its signals
		// in .signals, and nothing here carries them out.
		k := fakeproc.New(GinkgoT(), fakeproc.Options{})
		c := fpStartCanary()
		k.Advance(time.Second)
		left := k.Spawn(fakeproc.Proc{PID: c.pid, Comm: "node", Env: []string{proc.MarkerVar + "=" + fpLaunch, "PATH=/bin"}})
		Expect(k.Alive(left)).To(BeTrue())
		state := filepath.Join(GinkgoT().TempDir(), "state")
		cmd := exec.CommandContext(ctx, framework.Bin.Warden, "supervise", "--state", state, "--deadline", "30", "--grace", "0",
			"--launch-id", fpLaunch, "--proc-root", k.Root(), "--", framework.Fixture("exitwith"), "-code", "0")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil {
			Expect(err).To(BeAssignableToTypeOf(exit), "warden did not run: %v\n%s", err, out)
		}
		r, rerr := witness.ReadReceipt(state)
		Expect(rerr).NotTo(HaveOccurred(), "warden left no receipt; output:\n%s", out)
		// The premise: the harness returned 0 and the leftover survived.
		Expect(r.ReturnCode).To(HaveValue(Equal(0)))
		Expect(r.CleanupConfirmed).To(BeFalse())
		Expect(r.Survivors).To(ContainElement(HaveField("PID", left.PID)))
		Expect(cmd.ProcessState.ExitCode()).To(Equal(1), "foreground supervise with an unconfirmed receipt; output:\n%s", out)
		w := procs.Warden(ctx, framework.Bin.Warden, "", "wait", "--state", state, "--timeout", "5")
		Expect(w.Code).To(Equal(1), "wait on an unconfirmed receipt: %s", w)
		Expect(c.exited()).To(BeFalse(), "a real process got a real signal")
	})
})

var _ = Describe("warden supervise, started twice at once on one state dir,", framework.Local, func() {
	framework.ConformanceIt("2 launch claim", "should let exactly one of them launch, every time in 40 races", func(ctx SpecContext) {
		const races = 40
		dir := GinkgoT().TempDir()
		won := 0
		for i := range races {
			state := filepath.Join(dir, fmt.Sprintf("state-%d", i))
			markers := []string{filepath.Join(dir, fmt.Sprintf("ran-%d-a", i)), filepath.Join(dir, fmt.Sprintf("ran-%d-b", i))}
			cmds := make([]*exec.Cmd, 2)
			outs := make([]strings.Builder, 2)
			for j := range cmds {
				cmds[j] = exec.CommandContext(ctx, framework.Bin.Warden, "supervise", "--state", state, "--deadline", "30", "--detach",
					"--", framework.Fixture("exitwith"), "-marker", markers[j])
				cmds[j].Stdout, cmds[j].Stderr = &outs[j], GinkgoWriter
			}
			// Started back to back, so both fronts reach the claim together.
			for _, c := range cmds {
				Expect(c.Start()).To(Succeed())
			}
			codes := make([]int, 2)
			for j, c := range cmds {
				c.Wait()
				codes[j] = c.ProcessState.ExitCode()
			}
			Expect(codes).To(ConsistOf(0, 2), "race %d: exit statuses of the two supervise", i)
			winner := slices.Index(codes, 0)
			d, err := witness.ParseDetached(outs[winner].String())
			Expect(err).NotTo(HaveOccurred())
			w := procs.Warden(ctx, framework.Bin.Warden, dir, "wait", "--state", state, "--timeout", "30")
			Expect(w.Code).To(Equal(0), "race %d: %s", i, w)
			r, err := witness.ReadReceipt(state)
			Expect(err).NotTo(HaveOccurred())
			Expect(r.LaunchID).To(Equal(d.LaunchID), "race %d: the receipt is the winner's", i)
			Expect(markers[winner]).To(BeAnExistingFile(), "race %d: the winner's harness ran", i)
			Expect(markers[1-winner]).NotTo(BeAnExistingFile(), "race %d: the loser's harness ran too", i)
			won++
		}
		Expect(won).To(Equal(races))
	})
})

var _ = Describe("warden wait, on a launch with a lease,", framework.Local, func() {
	framework.ConformanceIt("4 wait", "should renew the lease once each time it is called, and not while it blocks", func(ctx SpecContext) {
		const lease = 2 * time.Second
		state, _, _, harness := rulesSigwait(ctx, []string{"--deadline", "120", "--lease", "2"}, "record")
		// Renewed by wait alone, for three lease periods: no receipt comes.
		// The pause paces the renewals; it waits for nothing.
		until := time.Now().Add(3 * lease)
		calls := 0
		for time.Now().Before(until) {
			w := procs.Warden(ctx, framework.Bin.Warden, "", "wait", "--state", state, "--timeout", "0")
			Expect(w.Code).To(Equal(3), "after %d calls of wait, a receipt came although each call renews the lease: %s", calls, w)
			calls++
			time.Sleep(lease / 8)
		}
		Expect(procs.Alive(harness)).To(BeTrue(), "positive control: the harness still runs")
		// One wait that blocks for longer than the lease renews it once only,
		// so the lease lapses while it waits.
		w := procs.Warden(ctx, framework.Bin.Warden, "", "wait", "--state", state, "--timeout", strconv.Itoa(int(4*lease/time.Second)))
		Expect(w.Code).To(Equal(0), "a wait blocked for 4 leases saw no lapse: %s", w)
		r, err := witness.ParseReceipt([]byte(w.Stdout))
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Cause).To(Equal("lease"))
		Expect(procs.Alive(harness)).To(BeFalse(), "the lapse stopped the harness")
	})
})

var _ = Describe("warden run, looking argv[0] up in PATH,", framework.Local, func() {
	// rulesTask makes a task dir holding the program "tool" (a copy of the
	// exitwith fixture) both at its top and in bin/, and returns it.
	rulesTask := func() string {
		GinkgoHelper()
		task := filepath.Join(GinkgoT().TempDir(), "task")
		Expect(os.MkdirAll(filepath.Join(task, "bin"), 0o755)).To(Succeed())
		prog, err := os.ReadFile(framework.Fixture("exitwith"))
		Expect(err).NotTo(HaveOccurred())
		for _, p := range []string{filepath.Join(task, "tool"), filepath.Join(task, "bin", "tool")} {
			Expect(os.WriteFile(p, prog, 0o755)).To(Succeed())
		}
		return task
	}
	rulesRunTool := func(path string) (runnerResult, string) {
		GinkgoHelper()
		task := rulesTask()
		dir := filepath.Dir(task)
		marker := filepath.Join(dir, "ran")
		p := map[string]any{"argv": []string{"tool", "-marker", marker}, "cwd": task, "env": map[string]string{"PATH": path}}
		return runnerRun(runnerParams(dir, p), runnerOpts{}), marker
	}

	framework.ConformanceIt("5 path search", "should run a program found in an absolute PATH entry (the control)", func() {
		task := rulesTask()
		marker := filepath.Join(filepath.Dir(task), "ran")
		p := map[string]any{"argv": []string{"tool", "-marker", marker}, "cwd": task,
			"env": map[string]string{"PATH": "/nonexistent:" + filepath.Join(task, "bin")}}
		r := runnerRun(runnerParams(filepath.Dir(task), p), runnerOpts{})
		Expect(r.status).To(Equal(0), "stderr: %s", r.stderr)
		Expect(marker).To(BeAnExistingFile())
	})

	for _, path := range []string{"bin", "./bin", "/nonexistent::/usr/bin", ":/nonexistent", "."} {
		framework.ConformanceIt("5 path search", fmt.Sprintf("should not run ./tool or ./bin/tool through the relative or empty entry of PATH %q", path), func() {
			r, marker := rulesRunTool(path)
			Expect(marker).NotTo(BeAnExistingFile(), "a program in the task's directory ran")
			Expect(r.status).To(Equal(127), "stderr: %s", r.stderr)
		})
	}
})

var _ = Describe("warden run, given params that set WARDEN_LAUNCH,", framework.Local, func() {
	framework.ConformanceIt("5 params", "should refuse them with 125, naming the variable, and run nothing", func() {
		dir := GinkgoT().TempDir()
		marker := filepath.Join(dir, "ran")
		p := map[string]any{"argv": []string{framework.Fixture("exitwith"), "-marker", marker},
			"env": map[string]string{"WARDEN_LAUNCH": "forged"}}
		path := runnerParams(dir, p)
		r := runnerRun(path, runnerOpts{env: []string{"WARDEN_LAUNCH=real"}})
		Expect(marker).NotTo(BeAnExistingFile(), "the CLI ran")
		Expect(r.status).To(Equal(125), "stderr: %s", r.stderr)
		Expect(r.stderr).To(ContainSubstring("WARDEN_LAUNCH"))
		// Positive control: the same params without the variable run.
		delete(p["env"].(map[string]string), "WARDEN_LAUNCH")
		r = runnerRun(runnerParams(dir, p), runnerOpts{env: []string{"WARDEN_LAUNCH=real"}})
		Expect(r.status).To(Equal(0), "stderr: %s", r.stderr)
		Expect(marker).To(BeAnExistingFile())
	})
})

var _ = Describe("warden run in events mode, given a line in braces that is not JSON,", framework.Local, func() {
	framework.ConformanceIt("5 events mode", "should keep it raw, and record the valid JSON line beside it as an event", func() {
		dir := GinkgoT().TempDir()
		bad := []string{`{not json}`, `{"a":1,}`, `{"a":1}{"b":2}`, "{\"tab\":\"a\tb\"}", `{"a":01}`, `{}}`}
		input := strings.Join(append(bad, `{"ok":true}`), "\n") + "\n"
		p, events := runnerEmit(dir, []byte(input), nil)
		Expect(runnerRun(runnerParams(dir, p), runnerOpts{}).status).To(Equal(0))
		var want []string
		for _, b := range bad {
			Expect(json.Valid([]byte(b))).To(BeFalse(), "the input %q must really be invalid JSON", b)
			want = append(want, "raw:"+b)
		}
		Expect(runnerContents(runnerEvents(events))).To(Equal(append(want, `event:{"ok":true}`)))
	})
})

var _ = Describe("warden supervise, starting the harness,", framework.Local, func() {
	framework.ConformanceIt("2 launch rules", "should give the harness the highest oom_score_adj, above its supervisor's", func(ctx SpecContext) {
		state, _, _, harness := rulesSigwait(ctx, []string{"--deadline", "60"}, "record")
		adj := func(pid int) int {
			GinkgoHelper()
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid))
			Expect(err).NotTo(HaveOccurred())
			n, err := strconv.Atoi(strings.TrimSpace(string(data)))
			Expect(err).NotTo(HaveOccurred())
			return n
		}
		// The supervisor (the harness's parent) stays below the top, so the
		// OOM killer picks the harness first.
		st, err := witness.Proc.ReadStat(harness.PID)
		Expect(err).NotTo(HaveOccurred())
		Expect(adj(st.PPID)).To(BeNumerically("<", 1000), "the supervisor's oom_score_adj")
		Expect(adj(harness.PID)).To(Equal(1000), "the harness's oom_score_adj")
		Expect(procs.Warden(ctx, framework.Bin.Warden, "", "stop", "--state", state, "--wait", "30").Code).To(Equal(0))
	})
})
