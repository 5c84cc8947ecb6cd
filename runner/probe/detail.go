package probe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/runner/witness"
)

// Detail is what a process runs and who traces it, as the probe reads it
// as root: the owner's positive controls rest on it (certify's witness
// reads, docs/threat-model.md "Witnesses"). A harness can name itself
// anything (comm) and write any file of its uid, but not make root's
// reading of its /proc entry say another executable, command line or
// tracer.
type Detail struct {
	// GID is the real gid (status "Gid:"); TracerPID is status
	// "TracerPid:", the pid of the process that ptraces this one, 0 when
	// none does. Both are -1 when status could not be read: an unread
	// tracer never passes for "none".
	GID       int `json:"gid"`
	TracerPID int `json:"tracer_pid"`
	// Cmdline is /proc/PID/cmdline split at its NULs, from at most
	// MaxCmdline bytes of it; CmdlineCut says there was more.
	Cmdline    []string `json:"cmdline"`
	CmdlineCut bool     `json:"cmdline_cut,omitempty"`
	// Exe is where /proc/PID/exe points; "" when it could not be read.
	Exe string `json:"exe"`
	// Error says what could not be read, or that the snapshot's limit of
	// detailed processes was reached before this one.
	Error string `json:"error,omitempty"`
}

// The bounds of a snapshot's detail: MaxCmdline bytes of each command
// line, maxExe bytes of each executable's path, MaxDetailed processes in
// all (in pid order; past it a process's Detail holds only the error). A
// snapshot's detail is then at most about 300 KiB, whatever the processes
// of the uids asked about do to their command lines.
const (
	MaxCmdline  = 1024
	maxExe      = 1024
	MaxDetailed = 128
)

// addDetail reads the Detail of every process of procs whose uid is in
// uids, within the bounds above. The exe links root may not read are read
// afterwards, a uid and gid at a time (readlinksAs), so the filesystem
// ids change once per identity, not once per process.
func addDetail(fs witness.FS, procs []Process, uids []int) {
	n := 0
	type ids struct{ uid, gid int }
	later := map[ids][]*Detail{}
	links := map[*Detail]string{}
	for i := range procs {
		p := &procs[i]
		if p.UID < 0 || !slices.Contains(uids, p.UID) {
			continue
		}
		if n == MaxDetailed {
			p.Detail = &Detail{GID: -1, TracerPID: -1, Cmdline: []string{},
				Error: fmt.Sprintf("not read: the snapshot's limit of %d detailed processes was reached", MaxDetailed)}
			continue
		}
		n++
		d, uid, link := readDetail(fs, p.PID)
		p.Detail = d
		if link != "" {
			later[ids{uid, d.GID}] = append(later[ids{uid, d.GID}], d)
			links[d] = link
		}
	}
	for id, ds := range later {
		paths := make([]string, len(ds))
		for i, d := range ds {
			paths[i] = links[d]
		}
		targets, errs := readlinksAs(paths, id.uid, id.gid)
		for i, d := range ds {
			d.Exe, d.Error = exeOrError(targets[i], errs[i], d.Error)
		}
	}
}

// readDetail reads one process's Detail; what cannot be read is named in
// Error and left at its "unknown" value. An exe link root may not read
// (another uid's, no CAP_SYS_PTRACE) is returned, with the process's
// uid, for addDetail to read with the owner's ids; "" when done.
func readDetail(fs witness.FS, pid int) (*Detail, int, string) {
	d := &Detail{GID: -1, TracerPID: -1, Cmdline: []string{}}
	var errs []string
	st, serr := fs.ReadStatus(pid)
	if serr != nil {
		errs = append(errs, serr.Error())
	} else {
		d.GID, d.TracerPID = st.GID, st.TracerPID
	}
	base := string(fs) + "/" + strconv.Itoa(pid)
	var err error
	if d.Cmdline, d.CmdlineCut, err = readCmdline(base + "/cmdline"); err != nil {
		errs = append(errs, err.Error())
	}
	d.Error = strings.Join(errs, "; ")
	link := base + "/exe"
	target, err := os.Readlink(link)
	denied := errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EPERM)
	if denied && serr == nil && st.UID > 0 && st.GID >= 0 && os.Geteuid() == 0 {
		return d, st.UID, link
	}
	d.Exe, d.Error = exeOrError(target, err, d.Error)
	return d, -1, ""
}

// exeOrError is an exe link's target, bounded, or "" with why joined to
// the detail's errors.
func exeOrError(target string, err error, errs string) (string, string) {
	if err == nil && len(target) > maxExe {
		err = fmt.Errorf("a path of %d bytes, over %d", len(target), maxExe)
	}
	if err == nil {
		return target, errs
	}
	if errs != "" {
		errs += "; "
	}
	return "", errs + "read exe: " + err.Error()
}

// readCmdline reads at most MaxCmdline bytes of a cmdline file and splits
// them at the NULs (one ends each argument).
func readCmdline(path string) ([]string, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return []string{}, false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxCmdline+1))
	if err != nil {
		return []string{}, false, fmt.Errorf("read %s: %w", path, err)
	}
	cut := len(b) > MaxCmdline
	if cut {
		b = b[:MaxCmdline]
	} else {
		b = bytes.TrimSuffix(b, []byte{0})
	}
	if len(b) == 0 {
		return []string{}, cut, nil
	}
	return strings.Split(string(b), "\x00"), cut, nil
}

// errIDsNotRestored means the thread's own filesystem ids or capabilities
// could not be restored: it stays locked, so the runtime ends it with the
// goroutine instead of handing it to another.
var errIDsNotRestored = errors.New("filesystem ids not restored")

// readlinksAs reads links with uid and gid as the calling thread's
// filesystem ids, on a thread locked for the duration: root in a
// container has no CAP_SYS_PTRACE, and the kernel lets only a
// tracer-capable reader, or one with the process's own ids, follow
// another user's exe link (warden reads such environments the same way).
// Each link gets its target or its error.
func readlinksAs(paths []string, uid, gid int) ([]string, []error) {
	runtime.LockOSThread()
	targets, errs, err := readlinksWithIDs(paths, uid, gid)
	if !errors.Is(err, errIDsNotRestored) {
		runtime.UnlockOSThread()
	}
	return targets, errs
}

// readlinksWithIDs is readlinksAs's work on the locked thread. setfsuid
// and setfsgid report no error: asked for -1 they change nothing and
// return the current id, which is how each change is checked. A change
// or a restore that did not take is every link's error.
func readlinksWithIDs(paths []string, uid, gid int) ([]string, []error, error) {
	targets, errs := make([]string, len(paths)), make([]error, len(paths))
	fail := func(err error) ([]string, []error, error) {
		for i := range paths {
			targets[i], errs[i] = "", err
		}
		return targets, errs, err
	}
	ownUID, _ := unix.SetfsuidRetUid(-1)
	ownGID, _ := unix.SetfsgidRetGid(-1)
	ownCaps, err := threadCaps()
	if err != nil {
		return fail(err)
	}
	unix.SetfsgidRetGid(gid)
	unix.SetfsuidRetUid(uid)
	if u, _ := unix.SetfsuidRetUid(-1); u != uid {
		err = fmt.Errorf("fsuid %d, want %d", u, uid)
	} else if g, _ := unix.SetfsgidRetGid(-1); g != gid {
		err = fmt.Errorf("fsgid %d, want %d", g, gid)
	} else {
		for i, p := range paths {
			targets[i], errs[i] = os.Readlink(p)
		}
	}
	unix.SetfsuidRetUid(ownUID)
	unix.SetfsgidRetGid(ownGID)
	u, _ := unix.SetfsuidRetUid(-1)
	g, _ := unix.SetfsgidRetGid(-1)
	caps, cerr := threadCaps()
	if u != ownUID || g != ownGID || cerr != nil || caps != ownCaps {
		return fail(fmt.Errorf("%w: fsuid %d fsgid %d, capabilities %x (%v); were %d %d %x", errIDsNotRestored, u, g, caps, cerr, ownUID, ownGID, ownCaps))
	}
	if err != nil {
		return fail(err)
	}
	return targets, errs, nil
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
