package agent

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// A get reads what a harness wrote, as root: a path resolved by name can
// be led anywhere by a link the harness planted at any of its components
// ({home}/lnk -> /, then {home}/lnk/etc/shadow), and a file the harness
// could not read itself would be read by root. So a get resolves its path
// with the confined primitive (runner/confine: from a descriptor of the
// root, following no link at any component), walks a tree by descriptors
// (every entry opened relative to its parent's, never by path), and runs
// on a thread that took the user's filesystem ids. A put and a remove
// resolve the same way (server.go).

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
