package fakeproc_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandproof/sandproof/fakeproc"
	"github.com/sandproof/sandproof/runner/warden/proc"
	"github.com/sandproof/sandproof/runner/warden/stop"
)

const marker = proc.MarkerVar + "=L1"

// tree is a supervisor (pid 100, subreaper) and a harness (pid 200, own
// group) carrying the marker.
func tree(t *testing.T) (*fakeproc.Kernel, proc.Identity, proc.Identity) {
	t.Helper()
	k := fakeproc.New(t, fakeproc.Options{Subreaper: 100})
	sup := k.Spawn(fakeproc.Proc{PID: 100, Comm: "warden", Setsid: true})
	h := k.Fork(100, fakeproc.Proc{PID: 200, Comm: "pi", Setpgid: true, Env: []string{marker, "HOME=/root"}})
	return k, sup, h
}

func TestStatLineHasTheKernelsFieldsAndParses(t *testing.T) {
	k, _, h := tree(t)
	data, err := os.ReadFile(filepath.Join(k.Root(), "200", "stat"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(data, []byte("\n")) {
		t.Errorf("stat line %q does not end in a newline", data)
	}
	afterName := bytes.Fields(data[bytes.LastIndexByte(data, ')')+1:])
	if got := 2 + len(afterName); got != 52 {
		t.Errorf("stat has %d fields, want 52: %q", got, data)
	}
	st, err := k.FS().Stat(200)
	if err != nil {
		t.Fatal(err)
	}
	want := proc.Stat{PID: 200, Comm: "pi", State: 'S', PPID: 100, PGID: 200, SID: 100, Threads: 1, StartTime: h.StartTime}
	if st != want {
		t.Errorf("ParseStat = %+v, want %+v", st, want)
	}
	if h.StartTime != k.Ticks() || h.StartTime != 100000 {
		t.Errorf("start time %d, want the uptime in ticks %d (1000 s)", h.StartTime, k.Ticks())
	}
}

func TestCraftedNameIsKeptVerbatimAndCut(t *testing.T) {
	k, _, _ := tree(t)
	crafted := k.Fork(200, fakeproc.Proc{Comm: ") Z 1 $(reboot)"})
	long := k.Fork(200, fakeproc.Proc{Comm: "a-name-longer-than-fifteen"})
	st, err := k.FS().Stat(crafted.PID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Comm != ") Z 1 $(reboot)" || st.State != 'S' || st.PPID != 200 {
		t.Errorf("crafted entry parsed as %+v", st)
	}
	st, err = k.FS().Stat(long.PID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Comm != "a-name-longer-t" {
		t.Errorf("long name kept as %q, want the kernel's 15 bytes", st.Comm)
	}
	status, err := os.ReadFile(filepath.Join(k.Root(), "200", "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"Name:\tpi\n", "State:\tS (sleeping)\n", "PPid:\t100\n", "Uid:\t0\t0\t0\t0\n", "NSpgid:\t200\n"} {
		if !strings.Contains(string(status), line) {
			t.Errorf("status lacks %q:\n%s", line, status)
		}
	}
}

func TestEnvironAndCmdlineAreNULTerminated(t *testing.T) {
	k, _, h := tree(t)
	env, err := k.FS().Environ(h.PID, proc.EnvironLimit, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if string(env) != marker+"\x00HOME=/root\x00" {
		t.Errorf("environ = %q", env)
	}
	if !proc.CarriesLaunch(env, "L1") {
		t.Errorf("environ %q does not carry L1", env)
	}
	child := k.Fork(h.PID, fakeproc.Proc{Comm: "bash", Args: []string{"bash", "-c", "sleep 9"}})
	env, _ = k.FS().Environ(child.PID, proc.EnvironLimit, time.Second)
	if !proc.CarriesLaunch(env, "L1") {
		t.Errorf("a forked child did not inherit the marker: %q", env)
	}
	args, err := os.ReadFile(filepath.Join(k.Root(), itoa(child.PID), "cmdline"))
	if err != nil || string(args) != "bash\x00-c\x00sleep 9\x00" {
		t.Errorf("cmdline = %q, %v", args, err)
	}
	k.DropMarker(child.PID)
	env, _ = k.FS().Environ(child.PID, proc.EnvironLimit, time.Second)
	if proc.CarriesLaunch(env, "L1") || string(env) != "HOME=/root\x00" {
		t.Errorf("environ after DropMarker = %q", env)
	}
}

func TestUnreadableEnvironFailsWithoutLookingGone(t *testing.T) {
	k, _, _ := tree(t)
	other := k.Spawn(fakeproc.Proc{Comm: "postgres", UID: 70, EnvironUnreadable: true})
	_, err := k.FS().Environ(other.PID, proc.EnvironLimit, time.Second)
	if err == nil || errors.Is(err, proc.ErrGone) {
		t.Errorf("environ of an unreadable process: err = %v, want a read error that is not ErrGone", err)
	}
	if _, err := k.FS().Stat(other.PID); err != nil {
		t.Errorf("stat of the same process: %v", err)
	}
}

func TestListingSkipsNonNumericAndVanishedEntries(t *testing.T) {
	k, _, _ := tree(t)
	k.RawEntry("12a", map[string]string{"stat": "12 (x) S 1 1 1"})
	k.RawEntry("0", map[string]string{})
	gone := k.Spawn(fakeproc.Proc{Comm: "racer"})
	k.Husk(gone.PID)
	empty := k.Spawn(fakeproc.Proc{Comm: "empty"})
	k.RawEntry(itoa(empty.PID), map[string]string{"stat": ""})
	for _, name := range []string{"self", "thread-self", "sys", "uptime", "12a", itoa(gone.PID)} {
		if _, err := os.Lstat(filepath.Join(k.Root(), name)); err != nil {
			t.Errorf("entry %q missing from the tree: %v", name, err)
		}
	}
	pids, err := k.FS().PIDs()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pids)
	if want := []int{1, 100, 200, gone.PID, empty.PID}; !slices.Equal(pids, want) {
		t.Errorf("PIDs = %v, want %v", pids, want)
	}
	stats, err := k.FS().Scan()
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, st := range stats {
		got = append(got, st.PID)
	}
	slices.Sort(got)
	if want := []int{1, 100, 200}; !slices.Equal(got, want) {
		t.Errorf("Scan found %v, want %v (husk and empty stat skipped)", got, want)
	}
	up, err := k.FS().Uptime()
	if err != nil || up != 1000 {
		t.Errorf("Uptime = %v, %v; want 1000", up, err)
	}
}

func TestSignalsActAtThePauseAsTheProcessReacts(t *testing.T) {
	k, _, h := tree(t)
	dies := k.Fork(h.PID, fakeproc.Proc{Comm: "dies"})
	ignores := k.Fork(h.PID, fakeproc.Proc{Comm: "ignores", OnTERM: fakeproc.IgnoreTERM})
	stopped := k.Fork(h.PID, fakeproc.Proc{Comm: "stopped", State: 'T'})
	zombie := k.Fork(h.PID, fakeproc.Proc{Comm: "zombie", Zombie: true})
	for _, id := range []proc.Identity{dies, ignores, stopped, zombie} {
		send(t, k, id, syscall.SIGTERM)
	}
	if !k.Alive(dies) {
		t.Fatal("TERM acted before the pause")
	}
	before := k.Now()
	k.Pause(context.Background(), 0, nil)
	if got := k.Now().Sub(before); got != 20*time.Millisecond {
		t.Errorf("pause advanced the clock by %v, want one round (20ms)", got)
	}
	if k.State(dies) != 0 {
		t.Errorf("a process that dies on TERM is still there (%c)", k.State(dies))
	}
	if !k.Alive(ignores) {
		t.Error("a process that ignores TERM died")
	}
	if k.State(stopped) != 'T' {
		t.Errorf("a stopped process acted on TERM without CONT: state %c", k.State(stopped))
	}
	if k.State(zombie) != 'Z' {
		t.Errorf("zombie state %c, want Z until reaped", k.State(zombie))
	}
	if st, err := k.FS().Stat(zombie.PID); err != nil || !st.Dead() {
		t.Errorf("zombie stat = %+v, %v", st, err)
	}
	send(t, k, stopped, syscall.SIGCONT)
	send(t, k, ignores, syscall.SIGKILL)
	k.ApplyPending()
	if k.State(stopped) != 0 {
		t.Errorf("the pending TERM did not act after CONT: state %c", k.State(stopped))
	}
	if k.State(ignores) != 0 {
		t.Error("KILL did not end a process that ignores TERM")
	}
	k.Reap(zombie.PID)
	if k.State(zombie) != 0 {
		t.Error("reaped zombie still listed")
	}
	want := []string{"TERM", "CONT"}
	if got := k.SignalsTo(stopped); !slices.Equal(got, want) {
		t.Errorf("signals to the stopped process %v, want %v", got, want)
	}
}

func TestOrphansGoToTheSubreaperOrInit(t *testing.T) {
	k, _, h := tree(t)
	tool := k.Fork(h.PID, fakeproc.Proc{Comm: "tool"})
	grandchild := k.Fork(tool.PID, fakeproc.Proc{Comm: "grandchild"})
	k.Exit(tool.PID)
	if got := k.Parent(grandchild); got != 100 {
		t.Errorf("orphan under the supervisor reparented to %d, want the subreaper 100", got)
	}
	outside := k.Spawn(fakeproc.Proc{Comm: "cron"})
	job := k.Fork(outside.PID, fakeproc.Proc{Comm: "job"})
	k.Exit(outside.PID)
	if got := k.Parent(job); got != 1 {
		t.Errorf("orphan outside the supervisor reparented to %d, want 1", got)
	}
	d := k.DoubleFork(h.PID, fakeproc.Proc{Comm: "daemon"})
	if got := k.Parent(d); got != 100 {
		t.Errorf("double-forked daemon's parent %d, want 100", got)
	}
	st, _ := k.FS().Stat(d.PID)
	if st.SID == 100 || st.SID == st.PID || st.PGID == 200 {
		t.Errorf("daemon should sit in its intermediate's new session: %+v", st)
	}
	k.Exit(h.PID)
	spawner := k.Spawn(fakeproc.Proc{PID: 400, PPID: 100, Comm: "handler", OnTERM: fakeproc.SetsidChildOnTERM(fakeproc.Proc{Comm: "cleanup"})})
	send(t, k, spawner, syscall.SIGTERM)
	k.ApplyPending()
	if k.State(spawner) != 0 {
		t.Error("the TERM handler did not exit")
	}
	var cleanup proc.Stat
	stats, _ := k.FS().Scan()
	for _, s := range stats {
		if s.Comm == "cleanup" {
			cleanup = s
		}
	}
	if cleanup.PID == 0 || cleanup.PPID != 100 || cleanup.SID != cleanup.PID {
		t.Errorf("the handler's setsid child: %+v, want a session leader under 100", cleanup)
	}
}

func TestAReusedPidIsNeverReachedThroughAnOldHandle(t *testing.T) {
	k, _, h := tree(t)
	old := k.Fork(h.PID, fakeproc.Proc{PID: 500, Comm: "tool"})
	hd, err := k.Open(old)
	if err != nil {
		t.Fatal(err)
	}
	k.Advance(time.Second)
	fresh := k.Reuse(500, fakeproc.Proc{Comm: "unrelated"})
	if fresh.StartTime <= old.StartTime {
		t.Fatalf("reused pid start time %d not after %d", fresh.StartTime, old.StartTime)
	}
	if err := hd.Signal(syscall.SIGKILL); !errors.Is(err, proc.ErrGone) {
		t.Errorf("signal through the old handle: %v, want ErrGone", err)
	}
	k.ApplyPending()
	if !k.Alive(fresh) || len(k.SignalsTo(fresh)) != 0 {
		t.Errorf("the new holder of pid 500 was signalled: %v", k.SignalsTo(fresh))
	}
	if lost := k.Lost(); len(lost) != 1 || lost[0].To != old {
		t.Errorf("lost = %v, want the KILL to %s", lost, old)
	}
	hd2, err := k.Open(proc.Identity{PID: 500, StartTime: old.StartTime})
	if err != nil {
		t.Fatal(err)
	}
	// Open pins whoever holds the pid: the start-time check is the caller's.
	if err := hd2.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := k.SignalsTo(fresh); !slices.Equal(got, []string{"TERM"}) {
		t.Errorf("a handle opened after the reuse should pin the new process, got %v", got)
	}
	// A pid freed and taken again within one clock tick still gets a new
	// identity.
	k.Exit(fresh.PID)
	again := k.Reuse(500, fakeproc.Proc{Comm: "again"})
	if again.StartTime <= fresh.StartTime {
		t.Errorf("pid 500 reused within a tick: start time %d, previous holder %d", again.StartTime, fresh.StartTime)
	}
}

func TestRecordedSignalsApply(t *testing.T) {
	k, _, h := tree(t)
	tool := k.Fork(h.PID, fakeproc.Proc{Comm: "tool", OnTERM: fakeproc.IgnoreTERM})
	rec := stop.NewRecorder(k.SignalsFile())
	for _, s := range []syscall.Signal{syscall.SIGTERM, syscall.SIGTERM} {
		sendWith(t, rec, tool, s)
	}
	sendWith(t, rec, proc.Identity{PID: h.PID, StartTime: 7}, syscall.SIGKILL)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Follow(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := k.SignalsTo(tool); !slices.Equal(got, []string{"TERM", "TERM"}) || !k.Alive(tool) {
		t.Errorf("signals to tool %v alive %v", got, k.Alive(tool))
	}
	if !k.Alive(h) || len(k.Lost()) != 1 {
		t.Errorf("a line with the wrong start time reached the harness: lost %v", k.Lost())
	}
	// A line still being written is left for later; a finished one applies.
	f, err := os.OpenFile(k.SignalsFile(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString(itoa(tool.PID) + " " + itoa(int(tool.StartTime)) + " KI")
	if got, err := k.ApplySignals(); err != nil || len(got) != 0 {
		t.Errorf("half a line applied: %v, %v", got, err)
	}
	f.WriteString("LL\n0x1 1 TERM\n")
	got, err := k.ApplySignals()
	if len(got) != 1 || got[0].Signal != syscall.SIGKILL || k.State(tool) != 0 {
		t.Errorf("completed line: applied %v, tool state %c", got, k.State(tool))
	}
	if err == nil || !strings.Contains(err.Error(), `"0x1 1 TERM"`) {
		t.Errorf("malformed line: err = %v, want it quoted", err)
	}
}

func TestBeforeRoundRunsBetweenScans(t *testing.T) {
	k, _, h := tree(t)
	var ran []int
	k.BeforeRound(2, func(k *fakeproc.Kernel) { ran = append(ran, k.Round()); k.Fork(h.PID, fakeproc.Proc{Comm: "late"}) })
	k.Pause(context.Background(), 0, nil)
	if len(ran) != 0 {
		t.Fatalf("script for round 2 ran before round 1")
	}
	k.Pause(context.Background(), 1, nil)
	if !slices.Equal(ran, []int{2}) {
		t.Errorf("script ran at %v, want before round 2", ran)
	}
}

func send(t *testing.T, k *fakeproc.Kernel, id proc.Identity, sig syscall.Signal) {
	t.Helper()
	sendWith(t, k, id, sig)
}

func sendWith(t *testing.T, s stop.Signaller, id proc.Identity, sig syscall.Signal) {
	t.Helper()
	h, err := s.Open(id)
	if err != nil {
		t.Fatalf("open %s: %v", id, err)
	}
	defer h.Close()
	if err := h.Signal(sig); err != nil {
		t.Fatalf("signal %s: %v", id, err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A leader that called pthread_exit: Z in its own stat, 2 threads, a task
// entry per thread; the harness's children go to the live thread's list;
// STOP and CONT reach the threads; KILL ends them all, and only then is the
// zombie reapable.
func TestZombieLeaderWithALiveThread(t *testing.T) {
	k, _, h := tree(t)
	tool := k.Fork(h.PID, fakeproc.Proc{Comm: "beat", Threads: 1, Zombie: true, OnTERM: fakeproc.IgnoreTERM})
	child := k.Fork(tool.PID, fakeproc.Proc{Comm: "child"})
	k.ExitLeader(tool.PID)
	tids := k.TIDs(tool.PID)
	if len(tids) != 1 {
		t.Fatalf("threads besides the leader: %v, want 1", tids)
	}
	fs := k.FS()
	st, err := fs.Stat(tool.PID)
	if err != nil || st.State != 'Z' || st.Threads != 2 || !k.Alive(tool) {
		t.Fatalf("zombie leader: %+v, %v, alive %v; want Z with 2 threads, alive", st, err, k.Alive(tool))
	}
	status, _ := os.ReadFile(filepath.Join(k.Root(), itoa(tool.PID), "status"))
	if !bytes.Contains(status, []byte("Threads:\t2\n")) {
		t.Errorf("status without Threads: 2:\n%s", status)
	}
	task, err := os.ReadFile(filepath.Join(k.Root(), itoa(tool.PID), "task", itoa(tids[0]), "stat"))
	if ts, perr := proc.ParseStat(task); err != nil || perr != nil || ts.PID != tids[0] || ts.State != 'S' {
		t.Errorf("task/%d/stat = %q (%v, %v), want the thread's own line in state S", tids[0], task, err, perr)
	}
	kids, err := fs.Children(tool.PID)
	if err != nil || !slices.Equal(kids, []int{child.PID}) {
		t.Errorf("children of the zombie leader = %v, %v; want [%d] (from its live thread's list)", kids, err, child.PID)
	}

	send(t, k, tool, syscall.SIGSTOP)
	k.ApplyPending()
	if st, _ = fs.Stat(tool.PID); st.State != 'Z' || !fs.Held(st) {
		t.Errorf("after STOP: %+v, held %v; want the leader's Z kept and its thread stopped", st, fs.Held(st))
	}
	send(t, k, tool, syscall.SIGCONT)
	send(t, k, tool, syscall.SIGTERM)
	k.ApplyPending()
	if st, _ = fs.Stat(tool.PID); fs.Held(st) || !k.Alive(tool) {
		t.Errorf("after CONT and an ignored TERM: %+v, held %v, alive %v; want running", st, fs.Held(st), k.Alive(tool))
	}
	send(t, k, tool, syscall.SIGKILL)
	k.ApplyPending()
	if st, err = fs.Stat(tool.PID); err != nil || st.State != 'Z' || st.Threads != 1 || k.Alive(tool) {
		t.Errorf("after KILL: %+v, %v; want a plain zombie (1 thread), dead", st, err)
	}
	if _, err := os.Lstat(filepath.Join(k.Root(), itoa(tool.PID), "task", itoa(tids[0]))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed thread's task entry is still listed (%v)", err)
	}
	k.Reap(tool.PID)
	if k.State(tool) != 0 {
		t.Error("reaped zombie still listed")
	}
}

// StaleChildren keeps a parent's list naming a child that was reaped and
// whose pid was reused, until the next pause brings it up to date.
func TestStaleChildrenLastsUntilThePause(t *testing.T) {
	k := fakeproc.New(t, fakeproc.Options{Subreaper: 100})
	k.Spawn(fakeproc.Proc{PID: 100, Comm: "warden"})
	h := k.Fork(100, fakeproc.Proc{Comm: "harness"})
	tool := k.Fork(h.PID, fakeproc.Proc{Comm: "tool"})
	k.StaleChildren(h.PID)
	newcomer := k.Reuse(tool.PID, fakeproc.Proc{Comm: "unrelated"})
	if kids, err := k.FS().Children(h.PID); err != nil || !slices.Contains(kids, tool.PID) {
		t.Fatalf("children of the harness before the pause: %v, %v; want the stale %d", kids, err, tool.PID)
	}
	if got := k.Parent(newcomer); got != 1 {
		t.Fatalf("parent of the newcomer %s = %d, want 1", newcomer, got)
	}
	k.Pause(context.Background(), 0, nil)
	if kids, err := k.FS().Children(h.PID); err != nil || slices.Contains(kids, tool.PID) {
		t.Fatalf("children of the harness after the pause: %v, %v; want no %d", kids, err, tool.PID)
	}
}
