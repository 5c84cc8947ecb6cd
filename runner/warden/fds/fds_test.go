package fds

import (
	"testing"

	"golang.org/x/sys/unix"
)

// openLeaky opens /dev/null without close-on-exec, the way a parent that
// forgot O_CLOEXEC would hand it to us, and returns its number.
func openLeaky(t *testing.T) int {
	t.Helper()
	fd, err := unix.Open("/dev/null", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("open /dev/null: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if cloexec(t, fd) {
		t.Fatalf("positive control: descriptor %d is already close-on-exec", fd)
	}
	return fd
}

func cloexec(t *testing.T, fd int) bool {
	t.Helper()
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		t.Fatalf("F_GETFD %d: %v", fd, err)
	}
	return flags&unix.FD_CLOEXEC != 0
}

func TestCloexecFrom(t *testing.T) {
	for _, tc := range []struct {
		name string
		mark func(minFD int) error
	}{
		{"close_range", CloexecFrom},
		{"proc walk", cloexecProc},
		{"rlimit walk", func(minFD int) error {
			old := procFD
			procFD = "/nonexistent/fd"
			defer func() { procFD = old }()
			if err := cloexecProc(minFD); err == nil {
				t.Fatalf("cloexecProc with a missing %q: want an error", procFD)
			}
			return cloexecFallback(minFD)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			low := openLeaky(t)
			high := openLeaky(t)
			if high <= low {
				t.Fatalf("descriptors out of order: %d then %d", low, high)
			}
			if err := tc.mark(high); err != nil {
				t.Fatalf("mark from %d: %v", high, err)
			}
			if !cloexec(t, high) {
				t.Errorf("descriptor %d >= minFD is not close-on-exec", high)
			}
			if cloexec(t, low) {
				t.Errorf("descriptor %d < minFD was marked close-on-exec", low)
			}
		})
	}
}

func TestCloexecFromNegative(t *testing.T) {
	if err := CloexecFrom(-1); err == nil {
		t.Fatal("CloexecFrom(-1): want an error")
	}
}
