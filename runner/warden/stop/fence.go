package stop

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/runner/warden/mutant"
	"github.com/sandproof/sandproof/runner/warden/proc"
)

// BirthFence proves, with one fstatat per process and no read of its stat,
// that a process started before the launch, so that a stop that begins
// before the background pinning (OldSet) is done need not read the stat of
// every process on the host (about 6 us each, against 1 us for the fstatat).
//
// Why it holds: the kernel makes a /proc/PID directory's inode when the pid
// is first looked up or listed, never before its process exists, and stamps
// its ctime then from the coarse real-time clock; a pid reused by another
// process gets a new inode (the old one names the old struct pid and fails
// revalidation), and any change to the inode moves its ctime to the
// present (utimensat on a /proc/PID is refused: EPERM, even to root). So a /proc/PID whose ctime is before a coarse clock
// reading taken before the harness was forked names a process that started
// before the harness: one that can never be reached (see OldSet). The one
// thing that can move ctimes into the past is the real-time clock being set
// back; the fence watches for any clock set (a timerfd with
// TFD_TIMER_CANCEL_ON_SET, latched) and any step of the real-time clock
// against the monotonic one beyond StepTolerance, and proves nothing once
// either was seen. A process whose inode the fence cannot stat is not
// ruled out (its stat is read and tells).
//
// Only the kernel's /proc gives these guarantees; fake roots never use it.
type BirthFence struct {
	mu     sync.Mutex
	tfd    int
	dirfd  int
	before unix.Timespec
	offset time.Duration // real-time minus monotonic when armed
	broken string        // why the fence proves nothing any more; empty while it holds
}

// StepTolerance is the largest step of the real-time clock against the
// monotonic one the fence ignores (two readings of the two clocks differ by
// microseconds); the fence's boundary is this much before its clock reading.
const StepTolerance = 2 * time.Millisecond

// NewBirthFence arms the fence; the caller forks the harness only after it
// returns. It first lists the proc root, which makes an inode, stamped now,
// for every process that has none yet. When the listing found FenceWaitFrom
// processes or more it then waits (at most a few clock ticks) until the
// coarse clock has moved StepTolerance past the end of that listing, read
// on the fine-grained clock, so that the processes whose inodes the listing
// made are ruled out too; with fewer, it does not wait, and those few are
// read by a stop that comes before the pinning instead. It returns nil
// where the kernel cannot give what the fence needs.
func NewBirthFence(fs proc.FS) *BirthFence {
	return newBirthFence(fs, FenceWaitFrom)
}

// FenceWaitFrom is the number of listed processes from which the fence
// waits for the coarse clock. The wait costs every launch 2-6 ms before its
// fork (2 ms and up to two 4 ms ticks; measured 5-7 ms of a container's
// supervise start); not ruling out a process whose inode the listing made
// costs only a stop that comes before the pinning, one stat read (about
// 6 us) each: under 1.6 ms for 256, the whole table of a typical task
// container many times over. Either way the fence stays sound: the
// boundary is read before the fork, and what is forked later is stamped
// after it.
const FenceWaitFrom = 256

func newBirthFence(fs proc.FS, waitFrom int) *BirthFence {
	if !fs.IsReal() {
		return nil
	}
	tfd, err := armClockSetWatch()
	if err != nil {
		return nil
	}
	dirfd, err := unix.Open(fs.Root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(tfd)
		return nil
	}
	f := &BirthFence{tfd: tfd, dirfd: dirfd, offset: realMinusMono()}
	pids, _ := fs.PIDs() // instantiates the inodes of processes nobody listed yet
	// The listing's inodes may be stamped later than the coarse clock
	// reads: since Linux 6.13 an inode's ctime is the later of the coarse
	// clock and the newest fine-grained timestamp any multigrain file
	// system (ext4, tmpfs, ...) has handed out, which can lead it by up to
	// a tick. Neither is ever later than the fine-grained clock, so it is
	// the listing's bound; the wait below then lasts up to a tick longer.
	var listed, c unix.Timespec
	unix.ClockGettime(unix.CLOCK_REALTIME, &listed)
	wait := len(pids) >= waitFrom
	for deadline := time.Now().Add(50 * time.Millisecond); ; {
		unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &c)
		if !wait || c.Nano()-listed.Nano() > int64(StepTolerance) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	f.before = unix.NsecToTimespec(c.Nano() - int64(StepTolerance))
	return f
}

// armClockSetWatch arms a non-blocking timerfd, due a century from now,
// that any set of the real-time clock cancels: from then on a read of it
// fails with ECANCELED (latched; EAGAIN while no set has happened). The
// caller closes it.
func armClockSetWatch() (int, error) {
	tfd, err := unix.TimerfdCreate(unix.CLOCK_REALTIME, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return -1, err
	}
	var now unix.Timespec
	unix.ClockGettime(unix.CLOCK_REALTIME, &now)
	far := unix.ItimerSpec{Value: unix.Timespec{Sec: now.Sec + 100*365*86400}}
	if err := unix.TimerfdSettime(tfd, unix.TFD_TIMER_ABSTIME|unix.TFD_TIMER_CANCEL_ON_SET, &far, nil); err != nil {
		unix.Close(tfd)
		return -1, err
	}
	return tfd, nil
}

// realMinusMono is the real-time clock's offset from the monotonic one,
// which only a step changes (a frequency adjustment slews both). The real
// reading is bracketed by two monotonic ones and the tightest of a few
// brackets kept, so a preemption between two readings is not taken for a
// step.
func realMinusMono() time.Duration {
	best, width := time.Duration(0), int64(-1)
	for i := 0; i < 4; i++ {
		var m1, r, m2 unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &m1)
		unix.ClockGettime(unix.CLOCK_REALTIME, &r)
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &m2)
		if w := m2.Nano() - m1.Nano(); width < 0 || w < width {
			best, width = time.Duration(r.Nano()-(m1.Nano()+w/2)), w
		}
		if width < int64(StepTolerance/8) {
			break
		}
	}
	return best
}

// Valid reports whether no clock set or step has been seen since the fence
// was armed; once one has, it never is again.
func (f *BirthFence) Valid() bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broken != "" {
		return false
	}
	var buf [8]byte
	n, err := unix.Read(f.tfd, buf[:])
	switch {
	case err == unix.ECANCELED:
		f.breakLocked("the real-time clock was set (timerfd: ECANCELED)")
		return false
	case err != unix.EAGAIN && err != unix.EINTR:
		// An expiry a century early, or an error: nothing is proved
		// from here on.
		f.breakLocked(fmt.Sprintf("timerfd read: %d bytes, %v", n, err))
		return false
	}
	if d := realMinusMono() - f.offset; d > StepTolerance/2 || d < -StepTolerance/2 {
		f.breakLocked(fmt.Sprintf("the real-time clock stepped %v against the monotonic one", d))
		return false
	}
	return true
}

// breakLocked latches the fence off, saying why. Its descriptors stay open
// until Close, so an Older call racing it never stats through a reused one.
func (f *BirthFence) breakLocked(why string) { f.broken = why }

// Broken says why the fence proves nothing any more ("" while it holds);
// a stop's log and the fence's tests name the cause with it.
func (f *BirthFence) Broken() string {
	if f == nil {
		return "no fence"
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.broken
}

// Older reports whether /proc/PID's inode proves that its process started
// before the fence was armed. Call Valid before a batch of Older calls and
// again after it: a clock set in between voids the batch. It is safe to
// call from several goroutines at once, never after Close.
func (f *BirthFence) Older(pid int) bool {
	var st unix.Stat_t
	if err := unix.Fstatat(f.dirfd, strconv.Itoa(pid), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false
	}
	if mutant.Is(mutant.FenceAll) {
		return true // the mutant: the ctime is never compared
	}
	return st.Ctim.Nano() < f.before.Nano()
}

// Close releases the fence's descriptors.
func (f *BirthFence) Close() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tfd >= 0 {
		unix.Close(f.tfd)
		unix.Close(f.dirfd)
		f.tfd, f.dirfd, f.broken = -1, -1, "closed"
	}
}
