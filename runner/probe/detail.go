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
// uids, within the bounds above.
func addDetail(fs witness.FS, procs []Process, uids []int) {
	n := 0
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
		p.Detail = readDetail(fs, p.PID)
	}
}

// readDetail reads one process's Detail; what cannot be read is named in
// Error and left at its "unknown" value.
func readDetail(fs witness.FS, pid int) *Detail {
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
	if serr == nil {
		d.Exe, err = readExe(base+"/exe", st.UID, st.GID)
	} else {
		d.Exe, err = readExe(base+"/exe", -1, -1)
	}
	if err != nil {
		errs = append(errs, err.Error())
	}
	d.Error = strings.Join(errs, "; ")
	return d
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

// readExe reads where an exe link points. Root in a container has no
// CAP_SYS_PTRACE, and the kernel lets only a tracer-capable reader follow
// another user's exe link: the link of a process of another uid (uid,
// gid, when known) is read again with that uid and gid as the thread's
// filesystem ids (setfsuid), as warden reads such environments.
func readExe(path string, uid, gid int) (string, error) {
	target, err := os.Readlink(path)
	if err != nil && (errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EPERM)) && uid > 0 && gid >= 0 && os.Geteuid() == 0 {
		target, err = readlinkAs(path, uid, gid)
	}
	if err != nil {
		return "", err
	}
	if len(target) > maxExe {
		return "", fmt.Errorf("read %s: a path of %d bytes, over %d", path, len(target), maxExe)
	}
	return target, nil
}

// errIDsNotRestored means the thread's own filesystem ids or capabilities
// could not be restored: it stays locked, so the runtime ends it with the
// goroutine instead of handing it to another.
var errIDsNotRestored = errors.New("filesystem ids not restored")

// readlinkAs reads a link with uid and gid as the calling thread's
// filesystem ids, on a thread locked for the duration.
func readlinkAs(path string, uid, gid int) (string, error) {
	runtime.LockOSThread()
	target, err := readlinkWithIDs(path, uid, gid)
	if !errors.Is(err, errIDsNotRestored) {
		runtime.UnlockOSThread()
	}
	return target, err
}

// readlinkWithIDs is readlinkAs's work on the locked thread. setfsuid and
// setfsgid report no error: asked for -1 they change nothing and return
// the current id, which is how each change is checked.
func readlinkWithIDs(path string, uid, gid int) (string, error) {
	ownUID, _ := unix.SetfsuidRetUid(-1)
	ownGID, _ := unix.SetfsgidRetGid(-1)
	ownCaps, err := threadCaps()
	if err != nil {
		return "", err
	}
	unix.SetfsgidRetGid(gid)
	unix.SetfsuidRetUid(uid)
	target := ""
	if u, _ := unix.SetfsuidRetUid(-1); u != uid {
		err = fmt.Errorf("read %s: fsuid %d, want %d", path, u, uid)
	} else if g, _ := unix.SetfsgidRetGid(-1); g != gid {
		err = fmt.Errorf("read %s: fsgid %d, want %d", path, g, gid)
	} else {
		target, err = os.Readlink(path)
	}
	unix.SetfsuidRetUid(ownUID)
	unix.SetfsgidRetGid(ownGID)
	u, _ := unix.SetfsuidRetUid(-1)
	g, _ := unix.SetfsgidRetGid(-1)
	caps, cerr := threadCaps()
	if u != ownUID || g != ownGID || cerr != nil || caps != ownCaps {
		return "", fmt.Errorf("%w: fsuid %d fsgid %d, capabilities %x (%v); were %d %d %x", errIDsNotRestored, u, g, caps, cerr, ownUID, ownGID, ownCaps)
	}
	return target, err
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
