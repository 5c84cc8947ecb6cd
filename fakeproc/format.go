package fakeproc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// StatLine renders /proc/PID/stat the way fs/proc/array.c does: 52 fields,
// the name in parentheses exactly as the process set it (a ')' or ' '
// inside it is not escaped), one trailing newline. A real line:
//
//	4242 (sleep) S 4241 4241 4100 34816 4242 4194304 97 0 0 0 0 0 0 0 20 0 1 0 123456 2318336 234 18446744073709551615 94849432805376 94849432819313 140736942350512 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94849432834960 94849432836192 94849459757056 140736942357843 140736942357863 140736942357863 140736942362603 0
func (p *process) StatLine() string {
	vsize, rss, code, stack := 8388608, 234, uint64(94849432805376), uint64(140736942350512)
	if p.State == 'Z' {
		// A zombie has no memory map left: the kernel prints zeros.
		vsize, rss, code, stack = 0, 0, 0, 0
	}
	cnt := func(off uint64) uint64 {
		if code == 0 {
			return 0
		}
		return code + off
	}
	stk := func(off uint64) uint64 {
		if stack == 0 {
			return 0
		}
		return stack + off
	}
	return fmt.Sprintf("%d (%s) %c %d %d %d 0 -1 4194304 97 0 0 0 1 2 0 0 20 0 %d 0 %d %d %d 18446744073709551615 %d %d %d 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 %d %d %d %d %d %d %d %d\n",
		p.PID, p.Comm, p.State, p.PPID, p.PGID, p.SID, p.numThreads(),
		p.StartTime, vsize, rss, cnt(0), cnt(13937), stk(0),
		cnt(29584), cnt(30816), cnt(26951680), stk(7331), stk(7351), stk(7351), stk(12091),
		p.exitStatus)
}

// numThreads is num_threads (stat field 20, status's Threads:): the live
// threads, plus the leader, which counts while it is unreaped even after it
// exited (a plain zombie shows 1, a zombie leader 1 + its live threads).
func (p *process) numThreads() int { return 1 + len(p.tasks) }

// threadStat renders PROC_ROOT/PID/task/TID/stat of a thread: the
// process's line with the thread's id and state.
func (p *process) threadStat(t thread) string {
	q := *p
	q.PID, q.State = t.tid, t.state
	return q.StatLine()
}

// StatusText renders /proc/PID/status (the fields readers look at, in the
// kernel's order and layout; the name is escaped as the kernel escapes it).
func (p *process) StatusText() string {
	name := strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(p.Comm)
	var b strings.Builder
	fmt.Fprintf(&b, "Name:\t%s\nUmask:\t0022\nState:\t%c (%s)\n", name, p.State, stateWord(p.State))
	fmt.Fprintf(&b, "Tgid:\t%d\nNgid:\t0\nPid:\t%d\nPPid:\t%d\nTracerPid:\t0\n", p.PID, p.PID, p.PPID)
	fmt.Fprintf(&b, "Uid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\n", p.UID, p.UID, p.UID, p.UID, p.UID, p.UID, p.UID, p.UID)
	fmt.Fprintf(&b, "FDSize:\t64\nGroups:\t\nNStgid:\t%d\nNSpid:\t%d\nNSpgid:\t%d\nNSsid:\t%d\n", p.PID, p.PID, p.PGID, p.SID)
	if p.State != 'Z' {
		b.WriteString("VmPeak:\t    8192 kB\nVmSize:\t    8192 kB\nVmRSS:\t     936 kB\n")
	}
	fmt.Fprintf(&b, "Threads:\t%d\n", p.numThreads())
	b.WriteString("SigQ:\t0/31616\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n")
	b.WriteString("SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\nSigCgt:\t0000000000000000\n")
	return b.String()
}

func stateWord(s byte) string {
	switch s {
	case 'R':
		return "running"
	case 'S':
		return "sleeping"
	case 'D':
		return "disk sleep"
	case 'T':
		return "stopped"
	case 't':
		return "tracing stop"
	case 'Z':
		return "zombie"
	case 'X':
		return "dead"
	case 'I':
		return "idle"
	}
	return "unknown"
}

// nulList renders environ and cmdline: NUL after every entry.
func nulList(entries []string) string {
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e)
		b.WriteByte(0)
	}
	return b.String()
}

func (k *Kernel) dir(pid int) string { return filepath.Join(k.root, strconv.Itoa(pid)) }

// write mirrors one process into its directory. Each file is replaced by a
// rename, so a supervisor binary reading the tree at the same time never
// sees half a stat line.
func (k *Kernel) write(p *process) {
	dir := k.dir(p.PID)
	k.must(os.MkdirAll(dir, 0o755))
	env, args := nulList(p.Env), nulList(p.Args)
	if p.State == 'Z' {
		// A zombie's memory is gone: environ and cmdline read empty.
		env, args = "", ""
	}
	k.writeFile(dir, "stat", p.StatLine())
	defer k.syncChildren()
	k.writeTasks(p)
	k.writeFile(dir, "status", p.StatusText())
	k.writeFile(dir, "cmdline", args)
	envPath := filepath.Join(dir, "environ")
	if p.EnvironUnreadable && p.State != 'Z' {
		// Root ignores file modes, so a mode-000 file would still read: a
		// directory fails every read (EISDIR), as EACCES does on a real
		// /proc, and is not mistaken for a vanished process.
		if fi, err := os.Lstat(envPath); err == nil && !fi.IsDir() {
			k.must(os.Remove(envPath))
		}
		k.must(os.MkdirAll(envPath, 0o500))
		return
	}
	if fi, err := os.Lstat(envPath); err == nil && fi.IsDir() {
		k.must(os.Remove(envPath))
	}
	k.writeFile(dir, "environ", env)
}

// writeTasks mirrors the threads besides the leader into
// PROC_ROOT/PID/task/TID (stat, environ, an empty children list), and
// removes the entries of threads that ended. The leader's own task dir
// holds its children list (syncChildren).
func (k *Kernel) writeTasks(p *process) {
	taskDir := filepath.Join(k.dir(p.PID), "task")
	want := map[string]bool{strconv.Itoa(p.PID): true}
	for _, t := range p.tasks {
		name := strconv.Itoa(t.tid)
		want[name] = true
		dir := filepath.Join(taskDir, name)
		k.must(os.MkdirAll(dir, 0o755))
		k.writeFile(dir, "stat", p.threadStat(t))
		k.writeFile(dir, "environ", nulList(p.Env))
		if _, err := os.Lstat(filepath.Join(dir, "children")); err != nil {
			k.writeFile(dir, "children", "")
		}
	}
	entries, _ := os.ReadDir(taskDir)
	for _, e := range entries {
		if !want[e.Name()] && !strings.HasPrefix(e.Name(), ".") {
			k.must(os.RemoveAll(filepath.Join(taskDir, e.Name())))
		}
	}
	if p.leaderGone {
		delete(k.children, p.PID) // rewritten by syncChildren to the thread that now holds them
	}
}

func (k *Kernel) writeFile(dir, name, data string) {
	tmp := filepath.Join(dir, "."+name+".tmp")
	k.must(os.WriteFile(tmp, []byte(data), 0o444))
	k.must(os.Rename(tmp, filepath.Join(dir, name)))
}

// removeDir makes an entry vanish at once: renamed out of the listing
// first, then deleted.
func (k *Kernel) removeDir(pid int) {
	dir := k.dir(pid)
	if _, err := os.Lstat(dir); err != nil {
		return
	}
	k.seq++
	gone := filepath.Join(filepath.Dir(k.root), fmt.Sprintf(".%s-gone-%d-%d", filepath.Base(k.root), pid, k.seq))
	k.must(os.Rename(dir, gone))
	k.must(os.RemoveAll(gone))
	delete(k.children, pid)
	k.syncChildren()
}

// syncChildren renders every process's PROC_ROOT/PID/task/PID/children
// the way fs/proc/array.c does ("PID PID "; zombies included, in creation
// order, which for a fake tree is pid order), one thread per process, so
// a supervisor walks a fake tree through the kernel's children lists as
// it walks /proc. Only the files whose list changed are rewritten.
func (k *Kernel) syncChildren() {
	lists := map[int]*strings.Builder{}
	for _, p := range k.sortedProcs() {
		if _, ok := k.procs[p.PPID]; !ok {
			continue
		}
		b := lists[p.PPID]
		if b == nil {
			b = &strings.Builder{}
			lists[p.PPID] = b
		}
		b.WriteString(strconv.Itoa(p.PID))
		b.WriteByte(' ')
	}
	for pid := range k.procs {
		if k.stale[pid] {
			continue // StaleChildren: what it read before, until the pause
		}
		want := ""
		if b := lists[pid]; b != nil {
			want = b.String()
		}
		if got, ok := k.children[pid]; ok && got == want {
			continue
		}
		task := filepath.Join(k.dir(pid), "task", strconv.Itoa(pid))
		k.must(os.MkdirAll(task, 0o755))
		if p := k.procs[pid]; p.leaderGone && len(p.tasks) > 0 {
			// A leader that exited handed its children to a live thread
			// of its group, as the kernel's exit does.
			k.writeFile(task, "children", "")
			task = filepath.Join(k.dir(pid), "task", strconv.Itoa(p.tasks[0].tid))
		}
		k.writeFile(task, "children", want)
		k.children[pid] = want
	}
}

// writeUptime renders PROC_ROOT/uptime: seconds since boot and idle
// seconds, two decimals each.
func (k *Kernel) writeUptime() {
	up := k.uptime.Seconds()
	idle := 2 * up * 0.9
	k.writeFile(k.root, "uptime", fmt.Sprintf("%.2f %.2f\n", up, idle))
}
