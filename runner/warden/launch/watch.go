package launch

import (
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Watcher reports names created or renamed into a directory: through
// inotify, so a stop request is noticed at once, and by polling the
// directory when inotify is unavailable (no instances left, some FUSE
// filesystems).
type Watcher struct {
	// C receives file names; it is never closed while the watcher runs.
	C    chan string
	done chan struct{}
	// wake is the write end of a pipe that tells the reader to stop. The
	// reader owns the inotify descriptor and closes it itself: closing it
	// under a blocked read would let the number be reused by another open
	// and the reader parse that file's bytes as events.
	wake int
	// Polling is true when inotify could not be used.
	Polling bool
}

// Watch starts watching dir. Names already present are not reported; the
// caller lists the dir once after Watch returns to catch earlier requests.
func Watch(dir string) *Watcher {
	w := &Watcher{C: make(chan string, 64), done: make(chan struct{}), wake: -1}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err == nil {
		_, err = unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE)
		if err != nil {
			unix.Close(fd)
		}
	}
	var p [2]int
	if err == nil {
		if err = unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		w.Polling = true
		go w.poll(dir)
		return w
	}
	w.wake = p[1]
	go w.read(fd, p[0])
	return w
}

func (w *Watcher) read(fd, wake int) {
	defer unix.Close(fd)
	defer unix.Close(wake)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(wake), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents == 0 {
			continue
		}
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafePointer(&buf[off]))
			start := off + unix.SizeofInotifyEvent
			end := start + int(ev.Len)
			if ev.Len > unix.NAME_MAX+1 || end > n {
				break // never trust a length the buffer cannot hold
			}
			name := string(trimNUL(buf[start:end]))
			off = end
			if name != "" {
				select {
				case w.C <- name:
				case <-w.done:
					return
				}
			}
		}
	}
}

// poll is the watcher without inotify: it lists dir every 50 ms and
// reports what pollChanges finds, the names already there when it starts
// excepted.
func (w *Watcher) poll(dir string) {
	seen := map[string]time.Time{}
	pollChanges(dir, seen)
	for {
		select {
		case <-w.done:
			return
		case <-time.After(50 * time.Millisecond):
		}
		for _, name := range pollChanges(dir, seen) {
			select {
			case w.C <- name:
			case <-w.done:
				return
			}
		}
	}
}

// pollChanges lists the names in dir that seen does not hold, or holds
// with another modification time (a request written again under its
// name: a stop, then a stop of the services), and records them in seen.
func pollChanges(dir string, seen map[string]time.Time) []string {
	var out []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue
		}
		if old, ok := seen[e.Name()]; !ok || !old.Equal(info.ModTime()) {
			seen[e.Name()] = info.ModTime()
			out = append(out, e.Name())
		}
	}
	return out
}

// Close stops the watcher; the reader closes its own descriptors.
func (w *Watcher) Close() {
	close(w.done)
	if w.wake >= 0 {
		unix.Write(w.wake, []byte{1})
		unix.Close(w.wake)
	}
}

func trimNUL(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// WaitFile blocks until dir/name exists, timeout passes (zero: forever), or
// check returns true (polled at least every 100 ms); it reports whether the
// file exists.
//
// It looks before it watches, and polls for the first pollFirst: an
// inotify instance costs its process a grace period of the kernel's
// fsnotify SRCU when it is closed, at the latest at exit (5-8 ms on these
// hosts, measured: a program that only opens one and exits takes that much
// longer to exit), and whoever waits for a `warden wait` or `stop --wait`
// waits for its exit too. A receipt that is already there (close's stop of
// an ended launch, a replay) or that comes within pollFirst (a short
// launch, a small tree's stop) is found without one, about pollStep
// late.
func WaitFile(dir, name string, timeout time.Duration, check func() bool) bool {
	path := filepath.Join(dir, name)
	exists := func() bool {
		_, err := os.Lstat(path)
		return err == nil
	}
	start := time.Now()
	for i := 0; ; i++ {
		if exists() {
			return true
		}
		if check != nil && i%checkEvery == 0 && check() {
			return exists()
		}
		waited := time.Since(start)
		if timeout > 0 && waited >= timeout {
			return exists()
		}
		if waited >= pollFirst {
			break
		}
		time.Sleep(pollStep)
	}
	w := newWatcher(dir)
	defer w.Close()
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout - time.Since(start))
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(watchTick)
	defer tick.Stop()
	for {
		if exists() {
			return true
		}
		if check != nil && check() {
			return exists()
		}
		select {
		case <-w.C:
		case <-tick.C:
		case <-deadline:
			return exists()
		}
	}
}

// pollFirst and pollStep: how long WaitFile polls before it watches, and
// how often; check is called every checkEvery polls, and every watchTick
// while watching. 50 ms holds a short launch's whole run and a small
// tree's stop. Longer waits are watched: a poll a millisecond beside a stop
// that signals and reaps a large tree takes the cores that stop needs
// (BigTreeStop was no faster polling for a second, on a noisy host), and a
// long wait can afford the teardown. Variables so that tests can stretch
// either phase.
var (
	pollFirst = 50 * time.Millisecond
	pollStep  = time.Millisecond
	watchTick = 100 * time.Millisecond
)

const checkEvery = 10

// newWatcher is Watch; a test counts its calls.
var newWatcher = Watch
