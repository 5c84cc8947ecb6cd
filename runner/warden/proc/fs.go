package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultRoot is where the kernel's proc filesystem is mounted.
const DefaultRoot = "/proc"

// maxStatSize bounds a stat read: a real stat line is under 1 KiB even with a
// 16-byte crafted name, so anything longer is not a kernel's.
const maxStatSize = 4096

// ErrGone means the process vanished (or never existed); callers treat it as
// "already dead", not as a failure.
var ErrGone = errors.New("process gone")

// FS is a proc root: the real /proc or a fake tree with the same files.
type FS struct {
	Root string
}

// NewFS returns the proc root at root; "" means /proc.
func NewFS(root string) FS {
	if root == "" {
		root = DefaultRoot
	}
	return FS{Root: root}
}

// IsReal reports whether this is the kernel's /proc, where signals are real.
func (fs FS) IsReal() bool { return fs.Root == DefaultRoot }

// Check verifies that the proc root can be read at all: a supervisor that
// cannot see processes must refuse to launch rather than confirm a cleanup
// it cannot observe.
//
// It reads the directory only until the first pid: a full listing costs
// O(host processes) at every launch's start, and one is enough to know.
func (fs FS) Check() error {
	fd, err := syscall.Open(fs.Root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open proc root: %w", &os.PathError{Op: "open", Path: fs.Root, Err: err})
	}
	defer syscall.Close(fd)
	buf := make([]byte, 16<<10)
	for {
		n, err := syscall.Getdents(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("read proc root %q: %w", fs.Root, err)
		}
		if n <= 0 {
			return fmt.Errorf("read proc root %q: no processes listed", fs.Root)
		}
		if len(appendPIDs(nil, buf[:n])) > 0 {
			return nil
		}
	}
}

// PIDs lists the numeric entries of the proc root. Non-numeric names (self,
// sys, a crafted "12a") are skipped.
//
// It reads the directory with getdents64 into one large buffer and parses
// the names in place: listing /proc is the one part of a stop whose cost
// grows with the host's process count, and this takes about two thirds of
// the time os.File.Readdirnames does (no string per entry, a tenth of the
// system calls).
func (fs FS) PIDs() ([]int, error) {
	fd, err := syscall.Open(fs.Root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open proc root: %w", &os.PathError{Op: "open", Path: fs.Root, Err: err})
	}
	defer syscall.Close(fd)
	bufp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bufp)
	buf := *bufp
	pids := make([]int, 0, 1024)
	for {
		n, err := syscall.Getdents(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read proc root %q: %w", fs.Root, err)
		}
		if n <= 0 {
			return pids, nil
		}
		pids = appendPIDs(pids, buf[:n])
	}
}

var direntBufs = sync.Pool{New: func() any { b := make([]byte, 128<<10); return &b }}

// appendPIDs parses linux_dirent64 records (ino u64, off s64, reclen u16,
// type u8, name NUL-terminated) and appends each name that is a pid.
func appendPIDs(pids []int, buf []byte) []int {
	for off := 0; off+19 <= len(buf); {
		reclen := int(buf[off+16]) | int(buf[off+17])<<8
		if reclen < 19 || off+reclen > len(buf) {
			break // not a record the kernel writes
		}
		name := buf[off+19 : off+reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		off += reclen
		if len(name) == 0 || name[0] < '1' || name[0] > '9' {
			continue
		}
		v, ok := parseUint(name)
		if !ok || v > 1<<31-1 {
			continue
		}
		pids = append(pids, int(v))
	}
	return pids
}

// readSmall reads a whole file of at most limit bytes into buf (grown if
// needed) with one open and as few reads as it takes, without a stat: proc
// files report size 0.
func readSmall(path string, buf []byte, limit int) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	return readFD(fd, buf, limit)
}

// readFD is readSmall's read of an open file; it closes fd.
func readFD(fd int, buf []byte, limit int) ([]byte, error) {
	defer syscall.Close(fd)
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			if cap(buf) >= limit {
				return buf, nil
			}
			nb := make([]byte, len(buf), min(2*cap(buf)+512, limit))
			copy(nb, buf)
			buf = nb
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

func gone(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.ENOTDIR)
}

// Stat reads /proc/PID/stat. A vanished process gives ErrGone.
func (fs FS) Stat(pid int) (Stat, error) {
	var buf [512]byte
	return fs.stat(pid, buf[:0])
}

// StatInto is Stat reading into buf, for loops that read many.
func (fs FS) StatInto(pid int, buf []byte) (Stat, error) { return fs.stat(pid, buf[:0]) }

func (fs FS) stat(pid int, buf []byte) (Stat, error) {
	path := fs.Root + "/" + strconv.Itoa(pid) + "/stat"
	data, err := readSmall(path, buf, maxStatSize)
	if err != nil {
		if gone(err) {
			return Stat{}, ErrGone
		}
		return Stat{}, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) == 0 {
		// A process that exited between open and read leaves an empty file.
		return Stat{}, ErrGone
	}
	st, err := ParseStat(data)
	if err != nil {
		return Stat{}, err
	}
	if st.PID != pid {
		return Stat{}, fmt.Errorf("%w: %s names pid %d", ErrBadStat, path, st.PID)
	}
	if st.State == 'Z' && st.Threads == 0 {
		// A zombie whose thread count did not parse: count the live
		// threads in its task directory, so Dead can answer. Only a Z
		// leader ever costs this read.
		live, _, err := fs.threads(pid, buf)
		if err != nil && !errors.Is(err, ErrGone) {
			return Stat{}, err
		}
		st.Threads = 1 + live
	}
	return st, nil
}

// MaxThreads bounds how many threads of one zombie leader are read: past
// that many the process is not counted as held (Held), so a stop cannot
// be confirmed on a reading it did not finish.
const MaxThreads = 4096

// Held reports whether the process cannot run: stopped by a signal or in a
// tracing stop (T or t). For a live process whose leader is a zombie (it
// called pthread_exit while other threads run) the leader's own letter
// stays Z, so every other thread's task/TID/stat is read and each one
// alive must show T or t. Only a Z leader costs a task read; a process
// gone while it was read is held (nothing of it runs).
func (fs FS) Held(st Stat) bool {
	if !st.ZombieLeader() {
		return st.Stopped()
	}
	live, stopped, err := fs.threads(st.PID, make([]byte, 0, 512))
	if errors.Is(err, ErrGone) {
		return true
	}
	return err == nil && live == stopped
}

// threads reads the stat of every thread of pid but the leader, from
// PROC_ROOT/PID/task/TID/stat (a thread's stat has the process's layout,
// its tid first): how many are alive (not Z or X) and how many of those
// are stopped (T or t). More than MaxThreads threads is an error.
func (fs FS) threads(pid int, buf []byte) (live, stopped int, err error) {
	taskDir := fs.Root + "/" + strconv.Itoa(pid) + "/task"
	tids, err := listNumeric(taskDir)
	if err != nil {
		if gone(err) {
			return 0, 0, ErrGone
		}
		return 0, 0, fmt.Errorf("list %s: %w", taskDir, err)
	}
	if len(tids) > MaxThreads {
		return 0, 0, fmt.Errorf("list %s: %d threads, more than %d", taskDir, len(tids), MaxThreads)
	}
	for _, tid := range tids {
		if tid == pid {
			continue
		}
		path := taskDir + "/" + strconv.Itoa(tid) + "/stat"
		data, err := readSmall(path, buf, maxStatSize)
		if (err != nil && gone(err)) || (err == nil && len(data) == 0) {
			continue // the thread exited between the listing and the read
		}
		if err != nil {
			return 0, 0, fmt.Errorf("read %s: %w", path, err)
		}
		ts, err := ParseStat(data)
		if err != nil || ts.PID != tid {
			return 0, 0, fmt.Errorf("%w: %s", ErrBadStat, path)
		}
		switch ts.State {
		case 'Z', 'X', 'x':
		case 'T', 't':
			live++
			stopped++
		default:
			live++
		}
	}
	return live, stopped, nil
}

// Scan reads the stat of every process. Entries that vanish or do not parse
// are skipped: a crafted or racing entry must never abort a stop. A large
// table is read by one goroutine per CPU: the cost is all in the kernel
// (open, read, close per process), so the reads scale with the cores.
func (fs FS) Scan() ([]Stat, error) {
	pids, err := fs.PIDs()
	if err != nil {
		return nil, err
	}
	return fs.ScanPIDs(pids), nil
}

// ScanPIDs reads the stat of the given processes, skipping those that
// vanish or do not parse.
func (fs FS) ScanPIDs(pids []int) []Stat { return fs.ScanPIDsSkipping(pids, nil) }

// ScanPIDsSkipping is ScanPIDs, leaving out the pids skip (when set) says
// need not be read; skip is called from the reading goroutines.
func (fs FS) ScanPIDsSkipping(pids []int, skip func(pid int) bool) []Stat {
	workers := runtime.GOMAXPROCS(0)
	if len(pids) < 256 || workers < 2 {
		return fs.scanPIDs(pids, skip)
	}
	chunk := (len(pids) + workers - 1) / workers
	parts := make([][]Stat, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := w*chunk, min((w+1)*chunk, len(pids))
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func(w int, pids []int) {
			defer wg.Done()
			parts[w] = fs.scanPIDs(pids, skip)
		}(w, pids[lo:hi])
	}
	wg.Wait()
	out := make([]Stat, 0, len(pids))
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func (fs FS) scanPIDs(pids []int, skip func(int) bool) []Stat {
	out := make([]Stat, 0, len(pids))
	buf := make([]byte, 0, 512)
	for _, pid := range pids {
		if skip != nil && skip(pid) {
			continue
		}
		st, err := fs.stat(pid, buf)
		if err != nil {
			continue
		}
		out = append(out, st)
	}
	return out
}

// EnvironLimit bounds how much of a process's environment is read. The marker
// is placed first, so a small bound finds it in any environment we set up.
const EnvironLimit = 1 << 20

// Environ reads /proc/PID/environ, at most limit bytes and for at most
// timeout: the read takes the target's mm lock, and a process stuck in D
// state must not hang the scan. A timed-out read is abandoned (its goroutine
// finishes when the kernel lets it) and reported as an error.
func (fs FS) Environ(pid int, limit int, timeout time.Duration) ([]byte, error) {
	return fs.environ(pid, fs.Root+"/"+strconv.Itoa(pid)+"/environ", limit, timeout)
}

// EnvironOf is Environ for a process whose stat was just read. A zombie
// leader has dropped its memory map (its environ reads ESRCH, as if it
// were gone) while its threads still run with the environment: it is read
// through a live thread, PROC_ROOT/PID/task/TID/environ.
func (fs FS) EnvironOf(st Stat, limit int, timeout time.Duration) ([]byte, error) {
	if !st.ZombieLeader() {
		return fs.Environ(st.PID, limit, timeout)
	}
	taskDir := fs.Root + "/" + strconv.Itoa(st.PID) + "/task"
	tids, err := listNumeric(taskDir)
	if err != nil {
		if gone(err) {
			return nil, ErrGone
		}
		return nil, fmt.Errorf("list %s: %w", taskDir, err)
	}
	for _, tid := range tids {
		if tid == st.PID {
			continue
		}
		env, err := fs.environ(st.PID, taskDir+"/"+strconv.Itoa(tid)+"/environ", limit, timeout)
		if errors.Is(err, ErrGone) {
			continue // that thread exited: try the next
		}
		return env, err
	}
	return nil, ErrGone
}

func (fs FS) environ(pid int, path string, limit int, timeout time.Duration) ([]byte, error) {
	type result struct {
		data []byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		data, err := readSmall(path, make([]byte, 0, 4096), limit)
		if (errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)) && fs.IsReal() && os.Geteuid() == 0 {
			data, err = readAsOwner(fs.Root+"/"+strconv.Itoa(pid), path, limit)
		}
		ch <- result{data, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-ch:
		if r.err != nil && gone(r.err) {
			return nil, ErrGone
		}
		if r.err != nil {
			return nil, fmt.Errorf("read %s: %w", path, r.err)
		}
		return r.data, nil
	case <-timer.C:
		return nil, fmt.Errorf("read %s: timed out after %v", path, timeout)
	}
}

// readAsOwner retries an environ read with the filesystem ids of the
// process's owner. Root without CAP_SYS_PTRACE (a container's default) may
// not read another user's environ, but /proc checks that access with the
// caller's fsuid and fsgid when the file is opened (and never again at the
// read), so a thread that takes the owner's ids for the open passes the same
// check the owner would (openAsOwner). The read needs no ids.
func readAsOwner(procDir, path string, limit int) ([]byte, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(procDir, &st); err != nil {
		return nil, err
	}
	fd, err := openAsOwner(path, int(st.Uid), int(st.Gid))
	if err != nil {
		return nil, err
	}
	return readFD(fd, make([]byte, 0, 4096), limit)
}

// errIDsNotRestored: a thread's filesystem ids or effective capabilities
// were not back to what they were after an open as another user.
var errIDsNotRestored = errors.New("filesystem ids not restored")

// openAsOwner opens path read-only with the filesystem ids uid and gid, on
// this goroutine's thread, locked for the while: the ids are per thread,
// and no other goroutine may run on a thread that holds them. The thread
// takes them, opens, and takes its own back; only once its fsuid, fsgid
// and effective capabilities read as before (a fsuid leaving 0 drops the
// file capabilities, and its return restores them) is it unlocked, to serve
// any goroutine again.
//
// Otherwise the thread stays locked, and the caller's goroutine (environ's,
// which ends right after) takes it with it when it ends. That was once the
// path of every read: a thread ended per other user's process a stop looked
// at, and past the threads the supervisor makes before its harness starts
// (supervisor.ReservedThreads) the runtime has to make new ones, which a
// harness at its pids limit makes impossible: the Go runtime then aborts
// the supervisor, and no receipt is written.
func openAsOwner(path string, uid, gid int) (int, error) {
	runtime.LockOSThread()
	fd, err := openWithIDs(path, uid, gid)
	if !errors.Is(err, errIDsNotRestored) {
		runtime.UnlockOSThread()
	}
	return fd, err
}

// openWithIDs is openAsOwner's work on the locked thread. setfsuid and
// setfsgid report no error: asked for -1 they change nothing and return the
// current id, which is how each change is checked.
func openWithIDs(path string, uid, gid int) (int, error) {
	ownUID, _ := unix.SetfsuidRetUid(-1)
	ownGID, _ := unix.SetfsgidRetGid(-1)
	ownCaps, err := threadCaps()
	if err != nil {
		return -1, err
	}
	unix.SetfsgidRetGid(gid)
	unix.SetfsuidRetUid(uid)
	fd, err := -1, error(nil)
	if u, _ := unix.SetfsuidRetUid(-1); u != uid {
		err = fmt.Errorf("fsuid %d, want %d", u, uid)
	} else if g, _ := unix.SetfsgidRetGid(-1); g != gid {
		err = fmt.Errorf("fsgid %d, want %d", g, gid)
	} else {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	}
	unix.SetfsuidRetUid(ownUID)
	unix.SetfsgidRetGid(ownGID)
	u, _ := unix.SetfsuidRetUid(-1)
	g, _ := unix.SetfsgidRetGid(-1)
	caps, cerr := threadCaps()
	if u != ownUID || g != ownGID || cerr != nil || caps != ownCaps {
		if fd >= 0 {
			syscall.Close(fd)
		}
		return -1, fmt.Errorf("%w: fsuid %d fsgid %d, capabilities %x (%v); were %d %d %x", errIDsNotRestored, u, g, caps, cerr, ownUID, ownGID, ownCaps)
	}
	return fd, err
}

// threadCaps reads the calling thread's effective capability set.
func threadCaps() ([2]uint32, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return [2]uint32{}, fmt.Errorf("capget: %w", err)
	}
	return [2]uint32{data[0].Effective, data[1].Effective}, nil
}

// MarkerVar is the environment variable that carries the launch ids.
const MarkerVar = "WARDEN_LAUNCH"

// LaunchIDs returns the launch ids in the WARDEN_LAUNCH variable of a NUL
// separated environment block, or nil when it has none.
func LaunchIDs(environ []byte) []string {
	prefix := []byte(MarkerVar + "=")
	for len(environ) > 0 {
		entry := environ
		if i := bytes.IndexByte(environ, 0); i >= 0 {
			entry, environ = environ[:i], environ[i+1:]
		} else {
			environ = nil
		}
		if bytes.HasPrefix(entry, prefix) {
			var ids []string
			for _, id := range bytes.Split(entry[len(prefix):], []byte{':'}) {
				if len(id) > 0 {
					ids = append(ids, string(id))
				}
			}
			return ids
		}
	}
	return nil
}

// CarriesLaunch reports whether the environment carries launch id in its
// WARDEN_LAUNCH list.
func CarriesLaunch(environ []byte, id string) bool {
	for _, got := range LaunchIDs(environ) {
		if got == id {
			return true
		}
	}
	return false
}

// Uptime returns the seconds since boot from PROC_ROOT/uptime, the clock that
// start times in stat count from (in clock ticks).
func (fs FS) Uptime() (float64, error) {
	data, err := readSmall(fs.Root+"/uptime", make([]byte, 0, 128), 4096)
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(data)
	if len(f) == 0 {
		return 0, fmt.Errorf("invalid uptime %q", data)
	}
	v, err := strconv.ParseFloat(string(f[0]), 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("invalid uptime %q", data)
	}
	return v, nil
}

// ClockTicks is the kernel's USER_HZ, fixed at 100 on every Linux ABI Go
// supports; stat start times count in it.
const ClockTicks = 100

// ErrNoChildrenList means the kernel publishes no children lists
// (/proc/PID/task/TID/children needs CONFIG_PROC_CHILDREN): a cleanup cannot
// be confirmed from the kernel's own word.
var ErrNoChildrenList = errors.New("no /proc/PID/task/TID/children (kernel built without CONFIG_PROC_CHILDREN)")

// Children returns the children of every thread of pid, from the kernel's
// lists PROC_ROOT/PID/task/TID/children (a child belongs to the thread that
// forked it, and Go forks from any thread). A thread that exits hands its
// children to another thread of the process, so the threads are listed
// again after the reads and the whole read is redone when they changed.
// ErrGone when pid has no entry; ErrNoChildrenList when it has one but the
// kernel keeps no children lists. Zombies are listed too: the caller reads
// their state.
func (fs FS) Children(pid int) ([]int, error) {
	taskDir := fs.Root + "/" + strconv.Itoa(pid) + "/task"
	tids, err := listNumeric(taskDir)
	if err != nil {
		if gone(err) {
			if _, serr := os.Lstat(fs.Root + "/" + strconv.Itoa(pid)); serr == nil {
				return nil, ErrNoChildrenList
			}
			return nil, ErrGone
		}
		return nil, fmt.Errorf("list %s: %w", taskDir, err)
	}
	buf := make([]byte, 0, 256)
	for attempt := 0; ; attempt++ {
		var out []int
		missing := 0
		for _, tid := range tids {
			path := taskDir + "/" + strconv.Itoa(tid) + "/children"
			data, err := readSmall(path, buf, 1<<22)
			if err != nil {
				if gone(err) {
					missing++
					continue
				}
				return nil, fmt.Errorf("read %s: %w", path, err)
			}
			for _, f := range bytes.Fields(data) {
				if v, ok := parseUint(f); ok && v > 0 && v <= 1<<31-1 {
					out = append(out, int(v))
				}
			}
		}
		again, err := listNumeric(taskDir)
		if err != nil {
			if gone(err) {
				return nil, ErrGone
			}
			return nil, fmt.Errorf("list %s: %w", taskDir, err)
		}
		if missing == len(tids) && len(tids) > 0 && slices.Equal(again, tids) {
			// Every thread is listed and none has a children file.
			return nil, ErrNoChildrenList
		}
		if slices.Equal(again, tids) || attempt >= 8 {
			return out, nil
		}
		tids = again
	}
}

// ChildrenOf is Children for a process whose stat was just read: a
// single-threaded process has one children list, task/PID/children, read
// without listing its threads. A thread started after the stat was read
// can hide a child from this reading; callers that must not miss one (the
// reading that confirms a cleanup) use Children.
func (fs FS) ChildrenOf(st Stat) ([]int, error) {
	if st.Threads != 1 {
		return fs.Children(st.PID)
	}
	path := fs.Root + "/" + strconv.Itoa(st.PID) + "/task/" + strconv.Itoa(st.PID) + "/children"
	data, err := readSmall(path, make([]byte, 0, 256), 1<<22)
	if err != nil {
		if gone(err) {
			return fs.Children(st.PID) // gone, or no children lists: let Children tell
		}
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var out []int
	for _, f := range bytes.Fields(data) {
		if v, ok := parseUint(f); ok && v > 0 && v <= 1<<31-1 {
			out = append(out, int(v))
		}
	}
	return out, nil
}

// listNumeric lists the numeric names in dir, sorted.
func listNumeric(dir string) ([]int, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(names))
	for _, n := range names {
		if v, ok := parseUint([]byte(n)); ok && n[0] != '0' && v <= 1<<31-1 {
			out = append(out, int(v))
		}
	}
	slices.Sort(out)
	return out, nil
}
