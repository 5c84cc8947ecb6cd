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
	fd   int
	done chan struct{}
	// Polling is true when inotify could not be used.
	Polling bool
}

// Watch starts watching dir. Names already present are not reported; the
// caller lists the dir once after Watch returns to catch earlier requests.
func Watch(dir string) *Watcher {
	w := &Watcher{C: make(chan string, 64), done: make(chan struct{}), fd: -1}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err == nil {
		_, err = unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE)
		if err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		w.Polling = true
		go w.poll(dir)
		return w
	}
	w.fd = fd
	go w.read()
	return w
}

func (w *Watcher) read() {
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := unix.Read(w.fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n <= 0 {
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafePointer(&buf[off]))
			nameLen := int(ev.Len)
			start := off + unix.SizeofInotifyEvent
			name := string(trimNUL(buf[start : start+nameLen]))
			off = start + nameLen
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

func (w *Watcher) poll(dir string) {
	seen := map[string]time.Time{}
	for first := true; ; first = false {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			info, err := e.Info()
			if err != nil {
				continue
			}
			if old, ok := seen[e.Name()]; !ok || !old.Equal(info.ModTime()) {
				seen[e.Name()] = info.ModTime()
				if !first {
					select {
					case w.C <- e.Name():
					case <-w.done:
						return
					}
				}
			}
		}
		select {
		case <-w.done:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Close stops the watcher.
func (w *Watcher) Close() {
	close(w.done)
	if w.fd >= 0 {
		unix.Close(w.fd)
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
func WaitFile(dir, name string, timeout time.Duration, check func() bool) bool {
	path := filepath.Join(dir, name)
	w := Watch(dir)
	defer w.Close()
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Lstat(path); err == nil {
			return true
		}
		if check != nil && check() {
			_, err := os.Lstat(path)
			return err == nil
		}
		select {
		case <-w.C:
		case <-tick.C:
		case <-deadline:
			_, err := os.Lstat(path)
			return err == nil
		}
	}
}
