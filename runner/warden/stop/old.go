package stop

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/runner/warden/mutant"
	"github.com/sandproof/sandproof/runner/warden/proc"
)

// OldSet remembers the processes that started before the launch, each
// pinned by a pidfd, so a rescan need not read their stat again.
//
// Why that is safe: a process that started before the launch can never be
// reached. It cannot carry the launch's marker (the id did not exist), it
// cannot join the harness's process group (setpgid only moves a process
// within its own session, and the harness's session is the supervisor's,
// which is younger), and it cannot become a descendant or an orphan of a
// reached process (reparenting only goes up to an existing ancestor that is
// a subreaper, or to init). So once its identity is known, all a rescan
// needs to know is whether the same process still holds the pid: its pidfd
// becomes readable when that process exits, and only then can its pid be
// reused.
//
// The pidfds sit in one epoll set, so asking which of them exited costs
// what exited, not what is pinned: a poll(2) over all of them made every
// round of a stop O(host processes) (about 2.5 ms with 5,000 on the host).
//
// Only the kernel's /proc gives these guarantees; fake roots always read
// everything.
type OldSet struct {
	mu    sync.Mutex
	since uint64
	fds   map[int]int // pid -> pidfd
	pids  map[int]int // pidfd -> pid
	max   int
	epfd  int
	// broken: the epoll set failed; nothing is pinned any more and every
	// process is read (the safe side).
	broken bool

	// The background prime (StartPriming): halted once a stop begins,
	// done closed when it has returned.
	halted  atomic.Bool
	done    chan struct{}
	started bool
	// AfterChunk, when set before StartPriming, runs after each chunk the
	// background prime pinned: specs hold the prime there, so that a stop
	// arrives in the middle of the scan.
	AfterChunk func()
}

// NewOldSet tracks processes started before since (clock ticks), at most
// max of them (each costs a descriptor).
func NewOldSet(since uint64, max int) *OldSet {
	o := &OldSet{since: since, fds: map[int]int{}, pids: map[int]int{}, max: max}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		o.broken, o.epfd = true, -1
		return o
	}
	o.epfd = epfd
	return o
}

// PrimeDelay is how long after StartPriming the background prime begins.
const PrimeDelay = 100 * time.Millisecond

// primeChunk is how many processes the background prime pins under one
// hold of the lock: a stop's rescan waits for at most one chunk.
const primeChunk = 64

// StartPriming pins, in the background, every process of the host that
// started before the launch: the harness runs meanwhile, and a later stop
// reads only what is new. It begins PrimeDelay after the call and goes
// chunk by chunk (see pinLocked); StopPriming halts it.
//
// Why the delay: the prime costs about 15 us of kernel time a process (a
// stat read, pidfd_open, a second read, epoll_ctl), 75 ms with 5,000 on
// the host, and it only pays off for a stop that scans many rounds. A
// harness that exits at once (or is stopped at once) would have it compete
// for the CPU with its own start and its stop, which the BirthFence serves
// at about 1 us a process without any prime.
func (o *OldSet) StartPriming(fs proc.FS) {
	o.mu.Lock()
	o.done, o.started = make(chan struct{}), true
	o.mu.Unlock()
	go func() {
		defer close(o.done)
		if time.Sleep(PrimeDelay); o.halted.Load() {
			return
		}
		pids, err := fs.PIDs()
		if err != nil {
			return
		}
		buf := make([]byte, 0, 512)
		for lo := 0; lo < len(pids) && !o.halted.Load(); lo += primeChunk {
			o.mu.Lock()
			for _, pid := range pids[lo:min(lo+primeChunk, len(pids))] {
				if o.halted.Load() {
					break
				}
				o.pinLocked(fs, pid, buf)
			}
			o.mu.Unlock()
			if o.AfterChunk != nil {
				o.AfterChunk()
			}
		}
	}()
}

// Primed is closed once the background prime has returned (nil before
// StartPriming).
func (o *OldSet) Primed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.done
}

// StopPriming halts the background prime when a stop begins: a stop never
// waits for it. What it has pinned stays pinned; the stop reads the rest
// itself, which is what it would have had to wait for anyway.
func (o *OldSet) StopPriming() {
	o.halted.Store(true)
	o.mu.Lock()
	started := o.started
	o.mu.Unlock()
	if started && mutant.Is(mutant.ScanWait) {
		<-o.done // the mutant: the stop waits for the whole prime
	}
}

// pinLocked pins pid if the process holding it started before the launch.
// The stat comes first, so a process of the launch (a young one) is never
// opened at all; an old one is pinned, then read again to make sure the
// pinned process is the one read (see addLocked).
func (o *OldSet) pinLocked(fs proc.FS, pid int, buf []byte) {
	if o.broken || len(o.fds) >= o.max {
		return
	}
	if _, ok := o.fds[pid]; ok {
		return
	}
	st, err := fs.StatInto(pid, buf)
	if err != nil || st.StartTime >= o.since {
		return
	}
	o.addLocked(st)
}

// watchLocked adds a pinned process to the epoll set and the maps.
func (o *OldSet) watchLocked(pid, fd int) {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if err := unix.EpollCtl(o.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(fd)
		return
	}
	o.fds[pid] = fd
	o.pids[fd] = pid
}

// Prime pins every process of the table that started before the launch.
func (o *OldSet) Prime(stats []proc.Stat) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, st := range stats {
		o.addLocked(st)
	}
}

func (o *OldSet) addLocked(st proc.Stat) {
	if o.broken || st.StartTime >= o.since || len(o.fds) >= o.max {
		return
	}
	if _, ok := o.fds[st.PID]; ok {
		return
	}
	fd, err := unix.PidfdOpen(st.PID, 0)
	if err != nil {
		return
	}
	// The pid may have been reused between the stat and pidfd_open: pin
	// first, then make sure the pinned process is the one we read.
	again, err := proc.NewFS("").Stat(st.PID)
	if err != nil || again.StartTime != st.StartTime {
		unix.Close(fd)
		return
	}
	o.watchLocked(st.PID, fd)
}

// refreshLocked forgets every pinned process that has exited (its pid may
// now be reused). It reports false when the set cannot tell any more.
func (o *OldSet) refreshLocked() bool {
	if o.broken {
		return false
	}
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(o.epfd, events, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			o.breakLocked()
			return false
		}
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			unix.EpollCtl(o.epfd, unix.EPOLL_CTL_DEL, fd, nil)
			unix.Close(fd)
			delete(o.fds, o.pids[fd])
			delete(o.pids, fd)
		}
		if n < len(events) {
			return true
		}
	}
}

func (o *OldSet) breakLocked() {
	o.broken = true
	for pid, fd := range o.fds {
		unix.Close(fd)
		delete(o.fds, pid)
	}
	clear(o.pids)
}

// Unpinned returns the pids of the list that are not held by a pinned,
// living old process: the ones whose stat a rescan must read.
func (o *OldSet) Unpinned(pids []int) []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.refreshLocked() {
		return pids
	}
	fresh := pids[:0:0]
	for _, pid := range pids {
		if _, pinned := o.fds[pid]; !pinned {
			fresh = append(fresh, pid)
		}
	}
	return fresh
}

// Live returns the tracked pids whose pinned process has not exited.
func (o *OldSet) Live() map[int]bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	live := map[int]bool{}
	if !o.refreshLocked() {
		return live
	}
	for pid := range o.fds {
		live[pid] = true
	}
	return live
}

// Close releases every pidfd and the epoll set.
func (o *OldSet) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.breakLocked()
	if o.epfd >= 0 {
		unix.Close(o.epfd)
		o.epfd = -1
	}
}
