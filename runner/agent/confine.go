package agent

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A get reads what a harness wrote, as root: a path resolved by name can
// be led anywhere by a link the harness planted at any of its components
// ({home}/lnk -> /, then {home}/lnk/etc/shadow), and a file the harness
// could not read itself would be read by root. So a get resolves its path
// from a descriptor of the root following no link at any component, walks
// a tree by descriptors (every entry opened relative to its parent's, never
// by path), and runs on a thread that took the user's filesystem ids.

// errLink is a link met at a component of a path on the way to its last
// one (the last one is an entry of its own, recorded as a link).
type errLink struct {
	at     string // the link's path, relative to the root
	target string
}

func (e *errLink) Error() string { return fmt.Sprintf("a link at %q (to %q)", e.at, e.target) }

// openat2Missing is set once openat2 turned out absent (ENOSYS, or a
// seccomp filter's EPERM): every resolve walks from then on. A variable so
// the tests can force the walk.
var openat2Missing atomic.Bool

// openParent opens the parent of rel (a cleaned path relative to the root
// descriptor, no ".." component; "" is the root itself) beneath root,
// following no link at any component, and returns it with rel's last
// component ("." for the root), which the caller opens O_NOFOLLOW in it:
// openat2 with RESOLVE_NO_SYMLINKS|RESOLVE_BENEATH where the kernel has
// it, else one O_NOFOLLOW|O_DIRECTORY step per component. A link on the
// way is *errLink; a missing component is ENOENT or ENOTDIR; one the user
// may not search is EACCES.
func openParent(root int, rel string) (int, string, error) {
	if rel == "" {
		fd, err := unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return fd, ".", err
	}
	for _, part := range strings.Split(rel, "/") {
		if part == "" || part == "." || part == ".." {
			return -1, "", fmt.Errorf("path %q: not clean: %w", rel, unix.EINVAL)
		}
	}
	dirRel, name := path.Split(rel)
	dirRel = strings.TrimSuffix(dirRel, "/")
	if dirRel == "" {
		fd, err := unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return fd, name, err
	}
	if !openat2Missing.Load() {
		fd, err := unix.Openat2(root, dirRel, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
		})
		switch {
		case err == nil:
			return fd, name, nil
		case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.E2BIG):
			openat2Missing.Store(true)
		case !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.EXDEV):
			return -1, "", err
		}
		// ELOOP or ENOTDIR: a link on the way, or a file where a
		// directory should be; the walk tells which, for the record.
	}
	fd, err := walkParent(root, dirRel)
	return fd, name, err
}

// walkParent opens dirRel one component at a time, each O_NOFOLLOW|
// O_DIRECTORY relative to the one before.
func walkParent(root int, dirRel string) (int, error) {
	dir, err := unix.Openat(root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	done := ""
	for _, part := range strings.Split(dirRel, "/") {
		next, err := unix.Openat(dir, part, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
				if t, lerr := readlinkAt(dir, part); lerr == nil {
					err = &errLink{at: path.Join(done, part), target: t}
				}
			}
			unix.Close(dir)
			return -1, err
		}
		unix.Close(dir)
		dir, done = next, path.Join(done, part)
		if stepHook != nil {
			stepHook(done)
		}
	}
	return dir, nil
}

// stepHook, when set (tests only), runs after each step of a walk has
// opened rel (walkParent's components, and a tree's entries between their
// stat and their open): a test swaps what comes next for a link there.
var stepHook func(rel string)

// readlinkAt reads the link name in dir ("" with an O_PATH descriptor of
// the link itself); an entry that is not a link is EINVAL.
func readlinkAt(dir int, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dir, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// takeIDs gives the calling thread, which the caller locked and never
// unlocks (Go retires it when its goroutine ends, so no other goroutine
// ever runs with the borrowed ids), the filesystem ids and groups of the
// user spec names ("" leaves the agent's own). A thread whose fsuid turns
// from 0 to another loses its file capabilities too (CAP_DAC_OVERRIDE,
// CAP_DAC_READ_SEARCH, CAP_FOWNER: capabilities(7)), so its reads are the
// user's own. setgroups and setfsuid are the raw per-thread calls, unlike
// the syscall package's, which apply to every thread of the process.
func takeIDs(spec string) error {
	if spec == "" {
		return nil
	}
	u, err := lookupUser(spec)
	if err != nil {
		return fmt.Errorf("read as %q: %w", spec, err)
	}
	gids := make([]int, 0, len(u.groups))
	for _, g := range u.groups {
		gids = append(gids, int(g))
	}
	if err := unix.Setgroups(gids); err != nil && unix.Geteuid() == 0 {
		return fmt.Errorf("read as %q: setgroups %v: %w", spec, gids, err)
	}
	unix.SetfsgidRetGid(int(u.gid))
	unix.SetfsuidRetUid(int(u.uid))
	// Both calls answer the previous id whether or not they took:
	// asking again with an invalid id (-1 changes nothing) tells.
	gotG, _ := unix.SetfsgidRetGid(-1)
	gotU, _ := unix.SetfsuidRetUid(-1)
	if gotU != int(u.uid) || gotG != int(u.gid) {
		return fmt.Errorf("read as %q: this thread's filesystem ids are %d:%d, not %d:%d (the agent runs as uid %d)", spec, gotU, gotG, u.uid, u.gid, unix.Getuid())
	}
	return nil
}
