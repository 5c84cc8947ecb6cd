package fakeproc

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandproof/sandproof/runner/warden/proc"
)

// TB is the part of testing.TB (and of GinkgoT()) the kernel needs: a place
// for its tree and a way to fail the spec that misused it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	TempDir() string
}

// Options configure a Kernel. Every zero value has a meaning.
type Options struct {
	// Dir is the proc root to build; "" means a new directory from TempDir.
	Dir string
	// Subreaper is the pid of the process that set PR_SET_CHILD_SUBREAPER
	// (the supervisor): orphans below it are reparented to it instead of
	// pid 1. Zero means no subreaper.
	Subreaper int
	// Uptime is the time since boot when the kernel is created; zero means
	// 1000 s. Start times count in clock ticks from boot, like the kernel's.
	Uptime time.Duration
	// Round is how far Pause advances the clock; zero means 20 ms, the
	// engine's own default round.
	Round time.Duration
	// Epoch is the wall time of boot that Now is based on; zero means a
	// fixed date, so traces are the same from run to run.
	Epoch time.Time
}

// Reaction is what a process does when a TERM reaches it (when it is not
// stopped). It runs without the kernel's lock, so it may fork, rewrite its
// environment or spawn; it returns whether the process then exits.
type Reaction func(k *Kernel, self proc.Identity) (exits bool)

// IgnoreTERM is a process that ignores or handles TERM and keeps running.
func IgnoreTERM(*Kernel, proc.Identity) bool { return false }

// SetsidChildOnTERM is a TERM handler that runs `setsid child &` and exits.
func SetsidChildOnTERM(child Proc) Reaction {
	return func(k *Kernel, self proc.Identity) bool {
		child.Setsid = true
		k.Fork(self.PID, child)
		return true
	}
}

// Proc describes a process to create. Zero fields are inherited from the
// parent as fork(2) would (group, session, environment, name, arguments).
type Proc struct {
	// PID is the pid; zero means the next free one.
	PID int
	// PPID is the parent (Spawn only; Fork sets it). Zero means 1.
	PPID int
	// PGID and SID are the process group and session; zero inherits them.
	PGID, SID int
	// Setsid makes the process lead a new session and group (setsid(1)).
	Setsid bool
	// Setpgid makes the process lead a new group in its session.
	Setpgid bool
	// Comm is the name; the kernel keeps its first 15 bytes.
	Comm string
	// Args is the command line; nil means []string{Comm}.
	Args []string
	// Env is the environment ("K=V" entries); nil inherits the parent's,
	// an empty non-nil slice is an empty environment.
	Env []string
	// State is the stat state; zero means 'S' (sleeping). 'T' is a process
	// stopped by a signal, which acts on TERM only after a CONT.
	State byte
	// StartTime in clock ticks after boot; zero means now.
	StartTime uint64
	// UID is the owner shown in status; zero is root.
	UID int
	// OnTERM is the reaction to TERM; nil dies.
	OnTERM Reaction
	// Zombie keeps the process as a zombie (state Z) after it exits until
	// Reap, as when its parent does not wait for it.
	Zombie bool
	// Unstoppable is a process SIGSTOP does not hold: a ptraced process
	// whose tracer swallows the stop. Its state never shows T.
	Unstoppable bool
	// Subreaper marks a process that set PR_SET_CHILD_SUBREAPER (a
	// service's reaper): orphans below it come back to it. Options'
	// Subreaper names the supervisor the same way.
	Subreaper bool
	// EnvironUnreadable makes reading environ fail, as for another user's
	// process when the reader lacks CAP_SYS_PTRACE.
	EnvironUnreadable bool
	// Threads is how many threads the process runs besides its leader,
	// each with a tid of its own and a PROC_ROOT/PID/task/TID entry; zero
	// is a single-threaded process. ExitLeader ends the leader alone.
	Threads int
}

// thread is a thread of a process other than its leader.
type thread struct {
	tid   int
	state byte
}

type process struct {
	Proc
	pendingTERM bool
	exitStatus  int // wait status shown in a zombie's stat (field 52)
	// tasks are the live threads besides the leader.
	tasks []thread
	// leaderGone: the leader called pthread_exit; its letter shows Z while
	// tasks run, and the process lives until the last of them ends.
	leaderGone bool
}

// alive reports whether any thread of the process runs: a zombie leader
// with live threads is alive.
func (p *process) alive() bool { return p.State != 'Z' && p.State != 'X' || len(p.tasks) > 0 }

// stopped reports whether the process cannot run: every live thread is
// stopped (the leader's own letter, while it lives, included).
func (p *process) stopped() bool {
	if !p.leaderGone && p.State != 'T' && p.State != 't' {
		return false
	}
	for _, t := range p.tasks {
		if t.state != 'T' && t.state != 't' {
			return false
		}
	}
	return p.alive()
}

// setState puts every live thread in state s (a group stop or CONT).
func (p *process) setState(s byte) {
	if !p.leaderGone {
		p.State = s
	}
	for i := range p.tasks {
		p.tasks[i].state = s
	}
}

func (p *process) id() proc.Identity { return proc.Identity{PID: p.PID, StartTime: p.StartTime} }

// Kernel is one simulated machine: a process table mirrored into a proc
// root on disk. Its methods are safe for concurrent use (Follow runs beside
// a spec); Reactions and hooks run without the lock.
type Kernel struct {
	t    TB
	root string
	opt  Options

	mu        sync.Mutex
	procs     map[int]*process
	uptime    time.Duration
	nextPID   int
	round     int
	scripts   map[int][]func(*Kernel)
	queue     []pending
	delivered []Delivery
	lost      []Delivery
	sigOffset int64
	seq       int
	// children caches what each task/PID/children file holds.
	children map[int]string
	// lastStart remembers the start time of every pid's last holder, so a
	// reused pid never repeats an identity even within one clock tick.
	lastStart map[int]uint64
	// stale holds the pids whose children list StaleChildren froze until
	// the next pause.
	stale map[int]bool

	// BeforeOpen runs in Open before the pid is resolved: a pid reused here
	// is pinned as the new process, which the engine's start-time re-check
	// must then refuse.
	BeforeOpen func(id proc.Identity)
	// AfterOpen runs in Open after the process is pinned, i.e. between
	// pidfd_open and the engine's start-time re-check: a pid reused here
	// must not receive the signal, since the handle names the old process.
	AfterOpen func(id proc.Identity)
}

// Delivery is one signal the kernel saw.
type Delivery struct {
	To     proc.Identity
	Signal syscall.Signal
	// At is the fake clock when the signal was sent.
	At time.Time
	// Round is the engine round (Pause calls so far) when it was sent.
	Round int
}

func (d Delivery) String() string {
	return fmt.Sprintf("%s %s@round%d", d.To, signalName(d.Signal), d.Round)
}

// New builds an empty machine: pid 1 (init), the uptime file and the
// non-numeric entries a real /proc has, which every reader must skip.
func New(t TB, opt Options) *Kernel {
	t.Helper()
	if opt.Dir == "" {
		opt.Dir = filepath.Join(t.TempDir(), "proc")
	}
	if opt.Uptime == 0 {
		opt.Uptime = 1000 * time.Second
	}
	if opt.Round == 0 {
		opt.Round = 20 * time.Millisecond
	}
	if opt.Epoch.IsZero() {
		opt.Epoch = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	}
	k := &Kernel{t: t, root: opt.Dir, opt: opt, procs: map[int]*process{}, uptime: opt.Uptime,
		nextPID: 300, scripts: map[int][]func(*Kernel){}, lastStart: map[int]uint64{}, children: map[int]string{}, stale: map[int]bool{}}
	if err := os.MkdirAll(k.root, 0o755); err != nil {
		t.Fatalf("fakeproc: create proc root %q: %v", opt.Dir, err)
	}
	for _, dir := range []string{"sys", "net", "bus", "tty"} {
		k.must(os.MkdirAll(filepath.Join(k.root, dir), 0o755))
	}
	k.must(os.WriteFile(filepath.Join(k.root, "cmdline"), []byte("BOOT_IMAGE=/vmlinuz ro quiet\n"), 0o644))
	k.must(os.WriteFile(filepath.Join(k.root, "loadavg"), []byte("0.08 0.03 0.01 1/87 4242\n"), 0o644))
	k.must(os.Symlink("1", filepath.Join(k.root, "self")))
	k.must(os.Symlink("1/task/1", filepath.Join(k.root, "thread-self")))
	k.mu.Lock()
	k.writeUptime()
	k.mu.Unlock()
	k.Spawn(Proc{PID: 1, PPID: 0, Comm: "init", Args: []string{"/sbin/init"}, Env: []string{"HOME=/", "TERM=linux"}, StartTime: 1, Setsid: true})
	return k
}

// Root is the proc root, for --proc-root.
func (k *Kernel) Root() string { return k.root }

// FS is the proc root as the supervisor reads it.
func (k *Kernel) FS() proc.FS { return proc.FS{Root: k.root} }

func (k *Kernel) must(err error) {
	if err != nil {
		k.t.Helper()
		k.t.Fatalf("fakeproc: %v", err)
	}
}

// Now is the simulated wall time: boot plus uptime. It makes the Kernel a
// stop.Clock.
func (k *Kernel) Now() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.opt.Epoch.Add(k.uptime)
}

// Ticks is the uptime in clock ticks, the unit of stat start times.
func (k *Kernel) Ticks() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ticks()
}

func (k *Kernel) ticks() uint64 { return uint64(k.uptime / (time.Second / proc.ClockTicks)) }

// Advance moves the clock (and the uptime file) forward.
func (k *Kernel) Advance(d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.uptime += d
	k.writeUptime()
}

// Round returns how many rounds Pause has simulated.
func (k *Kernel) Round() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.round
}

// Spawn creates a process with the given fields as they are, for the
// starting state of a tree (init, the supervisor, an unrelated daemon).
func (k *Kernel) Spawn(p Proc) proc.Identity {
	k.t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if p.PPID == 0 && p.PID != 1 {
		p.PPID = 1
	}
	if p.Env == nil {
		p.Env = []string{}
	}
	return k.create(p)
}

// Fork creates a child of parent, inheriting what fork(2) inherits for
// every field left zero.
func (k *Kernel) Fork(parent int, p Proc) proc.Identity {
	k.t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.fork(parent, p)
}

func (k *Kernel) fork(parent int, p Proc) proc.Identity {
	k.t.Helper()
	par, ok := k.procs[parent]
	if !ok || !par.alive() {
		k.t.Fatalf("fakeproc: fork from pid %d: no such live process", parent)
		return proc.Identity{}
	}
	p.PPID = parent
	if p.PGID == 0 {
		p.PGID = par.PGID
	}
	if p.SID == 0 {
		p.SID = par.SID
	}
	if p.Env == nil {
		p.Env = slices.Clone(par.Env)
	}
	if p.Comm == "" {
		p.Comm = par.Comm
		if p.Args == nil {
			p.Args = slices.Clone(par.Args)
		}
	}
	if p.UID == 0 {
		p.UID = par.UID
	}
	return k.create(p)
}

func (k *Kernel) create(p Proc) proc.Identity {
	k.t.Helper()
	if p.PID == 0 {
		p.PID = k.freePID()
	}
	if old, ok := k.procs[p.PID]; ok {
		k.t.Fatalf("fakeproc: create pid %d: held by %s (%q); use Reuse", p.PID, old.id(), old.Comm)
	}
	if p.Setsid {
		p.SID, p.PGID = p.PID, p.PID
	} else if p.Setpgid {
		p.PGID = p.PID
	}
	if p.PGID == 0 {
		p.PGID = p.PID
	}
	if p.SID == 0 {
		p.SID = p.PID
	}
	// TASK_COMM_LEN is 16 with the NUL: longer names are cut.
	if len(p.Comm) > 15 {
		p.Comm = p.Comm[:15]
	}
	if p.Args == nil {
		p.Args = []string{p.Comm}
	}
	if p.State == 0 {
		p.State = 'S'
	}
	if p.StartTime == 0 {
		p.StartTime = k.ticks()
		if last, ok := k.lastStart[p.PID]; ok && p.StartTime <= last {
			p.StartTime = last + 1
		}
	}
	k.lastStart[p.PID] = p.StartTime
	np := &process{Proc: p}
	k.procs[p.PID] = np
	for i := 0; i < p.Threads; i++ {
		// A thread's id comes from the pid allocator too.
		np.tasks = append(np.tasks, thread{tid: k.freePID(), state: p.State})
	}
	k.write(np)
	return np.id()
}

// freePID returns the next pid that is neither a process nor a group or
// session id still in use, as the kernel's allocator does.
func (k *Kernel) freePID() int {
	for {
		pid := k.nextPID
		k.nextPID++
		if !k.idInUse(pid) {
			return pid
		}
	}
}

func (k *Kernel) idInUse(id int) bool {
	if _, ok := k.procs[id]; ok {
		return true
	}
	for _, p := range k.procs {
		if p.PGID == id || p.SID == id {
			return true
		}
		for _, t := range p.tasks {
			if t.tid == id {
				return true
			}
		}
	}
	return false
}

// DoubleFork daemonizes the way daemon(3) does: parent forks an
// intermediate that calls setsid and forks child, then the intermediate
// exits, so child is reparented to the nearest subreaper or pid 1. The
// parent keeps running. It returns the daemon.
func (k *Kernel) DoubleFork(parent int, child Proc) proc.Identity {
	k.t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.doubleFork(parent, child)
}

func (k *Kernel) doubleFork(parent int, child Proc) proc.Identity {
	k.t.Helper()
	inter := k.fork(parent, Proc{Setsid: true, Env: child.Env})
	d := k.fork(inter.PID, child)
	k.exit(inter.PID, 0)
	return d
}

// Exit ends a process with status 0 (a zombie when it was created with
// Zombie, otherwise gone at once); its children are reparented.
func (k *Kernel) Exit(pid int) {
	k.t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.procs[pid]; !ok {
		k.t.Fatalf("fakeproc: exit pid %d: no such process", pid)
	}
	k.exit(pid, 0)
}

// ExitLeader ends the leader thread of a multi-threaded process alone, as
// pthread_exit in main does: its stat shows Z while the other threads run
// on, and signals to the process still reach them (contract §2 stop rules:
// a zombie leader with a live thread is alive).
func (k *Kernel) ExitLeader(pid int) {
	k.t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.procs[pid]
	if !ok || !p.alive() || p.leaderGone || len(p.tasks) == 0 {
		k.t.Fatalf("fakeproc: exit the leader of pid %d: no live process with another thread", pid)
		return
	}
	p.leaderGone = true
	p.State = 'Z'
	k.write(p)
}

// TIDs returns the ids of the live threads of pid besides its leader.
func (k *Kernel) TIDs(pid int) []int {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []int
	if p, ok := k.procs[pid]; ok {
		for _, t := range p.tasks {
			out = append(out, t.tid)
		}
	}
	return out
}

// exit ends a process with a wait status, every thread of it: its children
// go to the nearest live subreaper among its ancestors, else to pid 1.
func (k *Kernel) exit(pid int, status int) {
	p, ok := k.procs[pid]
	if !ok || !p.alive() {
		return
	}
	p.tasks = nil
	heir := k.heir(p)
	for _, c := range k.sortedProcs() {
		if c.PPID == pid && c.PID != pid {
			c.PPID = heir
			k.write(c)
		}
	}
	if p.Zombie {
		p.State = 'Z'
		p.exitStatus = status
		p.pendingTERM = false
		k.write(p)
		return
	}
	delete(k.procs, pid)
	k.removeDir(pid)
}

// vanish ends a process (if it is not already a zombie) and removes its
// entry at once, as an exit followed by an immediate reap.
func (k *Kernel) vanish(pid, status int) {
	if p, ok := k.procs[pid]; ok {
		if p.alive() {
			p.Zombie = false
			k.exit(pid, status)
		}
		delete(k.procs, pid)
	}
	k.removeDir(pid)
}

func (k *Kernel) heir(p *process) int {
	seen := map[int]bool{}
	for a := p.PPID; a > 1 && !seen[a]; {
		seen[a] = true
		anc, ok := k.procs[a]
		if !ok {
			break
		}
		if (a == k.opt.Subreaper || anc.Subreaper) && anc.alive() {
			return a
		}
		a = anc.PPID
	}
	return 1
}

// Reap removes a zombie, as its parent's wait(2) would.
func (k *Kernel) Reap(pid int) {
	k.t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.procs[pid]
	if !ok || p.alive() {
		// A zombie leader whose threads run is not reapable either: wait(2)
		// reports the process only once its last thread is gone.
		k.t.Fatalf("fakeproc: reap pid %d: not a zombie", pid)
		return
	}
	delete(k.procs, pid)
	k.removeDir(pid)
}

// Reuse gives pid to a new, unrelated process: the one holding it (if any)
// exits and is reaped first, and the newcomer gets a later start time. As
// in the kernel, a pid still used as a group or session id by another
// process cannot be reused. p.PPID zero means 1.
func (k *Kernel) Reuse(pid int, p Proc) proc.Identity {
	k.t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.vanish(pid, 9)
	for _, q := range k.procs {
		if q.PGID == pid || q.SID == pid {
			k.t.Fatalf("fakeproc: reuse pid %d: still the group or session of %s (%q)", pid, q.id(), q.Comm)
			return proc.Identity{}
		}
	}
	p.PID = pid
	if p.PPID == 0 {
		p.PPID = 1
	}
	if p.Env == nil {
		p.Env = []string{}
	}
	return k.create(p)
}

// StaleChildren keeps pid's children list as it reads now until the next
// pause (the engine's next round), whatever happens to the listed children
// meanwhile: every reading in this round sees what a supervisor would see
// that read the list just before the changes that follow (a child's exit,
// its reaping and its pid's reuse) and the rest of the tree just after.
// The list is brought up to date at the pause.
func (k *Kernel) StaleChildren(pid int) {
	k.t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.procs[pid]; !ok {
		k.t.Fatalf("fakeproc: stale children of pid %d: no such process", pid)
		return
	}
	k.stale[pid] = true
}

// SetEnv rewrites a process's environment, as a process that re-executes
// itself with another environment (dropping WARDEN_LAUNCH) does.
func (k *Kernel) SetEnv(pid int, env []string) {
	k.t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.procs[pid]
	if !ok {
		k.t.Fatalf("fakeproc: set environment of pid %d: no such process", pid)
		return
	}
	p.Env = slices.Clone(env)
	k.write(p)
}

// DropMarker removes WARDEN_LAUNCH from a process's environment.
func (k *Kernel) DropMarker(pid int) {
	k.t.Helper()
	k.mu.Lock()
	p, ok := k.procs[pid]
	var env []string
	if ok {
		env = slices.DeleteFunc(slices.Clone(p.Env), func(e string) bool {
			return strings.HasPrefix(e, proc.MarkerVar+"=")
		})
	}
	k.mu.Unlock()
	k.SetEnv(pid, env)
}

// SetState changes the stat state ('T' stops a process, 'S' resumes it),
// of every live thread.
func (k *Kernel) SetState(pid int, state byte) {
	k.t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.procs[pid]
	if !ok {
		k.t.Fatalf("fakeproc: set state of pid %d: no such process", pid)
		return
	}
	p.setState(state)
	k.write(p)
}

// Lookup returns the identity of the process now holding pid.
func (k *Kernel) Lookup(pid int) (proc.Identity, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.procs[pid]
	if !ok {
		return proc.Identity{}, false
	}
	return p.id(), true
}

// State returns the stat state of the process id, or 0 when it is gone
// (its pid free or held by another process).
func (k *Kernel) State(id proc.Identity) byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p, ok := k.procs[id.PID]; ok && p.StartTime == id.StartTime {
		return p.State
	}
	return 0
}

// Alive reports whether the process id still exists and any of its threads
// runs: a plain zombie is dead, a zombie leader with a live thread is not.
func (k *Kernel) Alive(id proc.Identity) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.procs[id.PID]
	return ok && p.StartTime == id.StartTime && p.alive()
}

// Parent returns the current parent pid of id, or 0 when it is gone.
func (k *Kernel) Parent(id proc.Identity) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p, ok := k.procs[id.PID]; ok && p.StartTime == id.StartTime {
		return p.PPID
	}
	return 0
}

// Husk leaves an entry listed whose files are gone, as a process that
// exits between the directory read and the open of its stat looks.
func (k *Kernel) Husk(pid int) {
	k.t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.vanish(pid, 0)
	k.must(os.Mkdir(filepath.Join(k.root, strconv.Itoa(pid)), 0o755))
}

// RawEntry writes an arbitrary entry (a crafted or truncated stat, a
// non-numeric name) that the kernel does not track.
func (k *Kernel) RawEntry(name string, files map[string]string) {
	k.t.Helper()
	dir := filepath.Join(k.root, name)
	k.must(os.MkdirAll(dir, 0o755))
	for f, data := range files {
		k.must(os.WriteFile(filepath.Join(dir, f), []byte(data), 0o444))
	}
}

func (k *Kernel) sortedProcs() []*process {
	out := make([]*process, 0, len(k.procs))
	for _, p := range k.procs {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}
