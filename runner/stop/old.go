package stop

import (
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/runner/proc"
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
// needs to know is whether the same process still holds the pid - which an
// open pidfd answers in one poll(2) for all of them: the pidfd becomes
// readable when that process exits, and only then can its pid be reused.
//
// Only the kernel's /proc gives these guarantees; fake roots always read
// everything.
type OldSet struct {
	mu    sync.Mutex
	since uint64
	fds   map[int]int // pid -> pidfd
	max   int
}

// NewOldSet tracks processes started before since (clock ticks), at most
// max of them (each costs a descriptor).
func NewOldSet(since uint64, max int) *OldSet {
	return &OldSet{since: since, fds: map[int]int{}, max: max}
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
	if st.StartTime >= o.since || len(o.fds) >= o.max {
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
	o.fds[st.PID] = fd
}

// Live returns the tracked pids whose pinned process has not exited, and
// forgets the others (their pids may now be reused).
func (o *OldSet) Live() map[int]bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	pfds := make([]unix.PollFd, 0, len(o.fds))
	pids := make([]int, 0, len(o.fds))
	for pid, fd := range o.fds {
		pfds = append(pfds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		pids = append(pids, pid)
	}
	for {
		if _, err := unix.Poll(pfds, 0); err != unix.EINTR {
			if err != nil {
				return map[int]bool{} // cannot tell: read everything
			}
			break
		}
	}
	live := make(map[int]bool, len(pids))
	for i, p := range pfds {
		if p.Revents == 0 {
			live[pids[i]] = true
			continue
		}
		unix.Close(o.fds[pids[i]])
		delete(o.fds, pids[i])
	}
	return live
}

// Close releases every pidfd.
func (o *OldSet) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for pid, fd := range o.fds {
		unix.Close(fd)
		delete(o.fds, pid)
	}
}
