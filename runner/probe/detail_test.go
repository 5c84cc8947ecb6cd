package probe

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/witness"
)

// addDetailed gives a fake process the files Detail reads: a status with
// Gid and TracerPid, a cmdline and an exe link.
func (f fakeProc) addDetailed(pid, uid, tracer int, argv []string, exe string) {
	f.t.Helper()
	f.add(pid, 1, filepath.Base(exe), "S", uint64(1000+pid), uid)
	dir := filepath.Join(f.root, strconv.Itoa(pid))
	f.write(filepath.Join(dir, "status"), fmt.Sprintf("Name:\tx\nUid:\t%d\t%d\t%d\t%d\nGid:\t%d\t%d\t%d\t%d\nTracerPid:\t%d\n", uid, uid, uid, uid, uid, uid, uid, uid, tracer))
	f.write(filepath.Join(dir, "cmdline"), strings.Join(argv, "\x00")+"\x00")
	if err := os.Symlink(exe, filepath.Join(dir, "exe")); err != nil {
		f.t.Fatal(err)
	}
}

// Only the processes of the uids asked about carry a Detail; it holds the
// command line split at its NULs, the executable, the gid and the tracer.
// A status without TracerPid leaves -1 (never "untraced"), and a command
// line past MaxCmdline is cut and says so.
func TestReadProcessesDetail(t *testing.T) {
	fp := newFakeProc(t)
	fp.addDetailed(10, 65534, 0, []string{"sleep", "1799"}, "/usr/bin/sleep")
	fp.addDetailed(11, 1000, 0, []string{"sh", "-c", ": sandproof-writer; i=0"}, "/usr/bin/dash")
	fp.addDetailed(12, 1000, 11, []string{"sleep", "1"}, "/usr/bin/sleep")
	fp.addDetailed(13, 1000, 0, []string{strings.Repeat("a", MaxCmdline+10)}, "/usr/bin/long")
	fp.addDetailed(14, 0, 0, []string{"root-owned"}, "/usr/bin/x")
	fp.addDetailed(15, 65534, 0, []string{"sleep"}, "/usr/bin/sleep")
	fp.write(filepath.Join(fp.root, "15", "status"), "Name:\tx\nUid:\t65534\t65534\t65534\t65534\n")

	procs, err := readProcesses(fp.root, []int{1000, 65534})
	if err != nil {
		t.Fatal(err)
	}
	by := map[int]Process{}
	for _, p := range procs {
		by[p.PID] = p
	}
	if d := by[10].Detail; d == nil || fmt.Sprint(d.Cmdline) != "[sleep 1799]" || d.Exe != "/usr/bin/sleep" || d.GID != 65534 || d.TracerPID != 0 || d.Error != "" {
		t.Errorf("pid 10: detail %+v", d)
	}
	if d := by[11].Detail; d == nil || len(d.Cmdline) != 3 || d.Cmdline[2] != ": sandproof-writer; i=0" || d.CmdlineCut {
		t.Errorf("pid 11: detail %+v", d)
	}
	if d := by[12].Detail; d == nil || d.TracerPID != 11 {
		t.Errorf("pid 12: detail %+v, want tracer 11", d)
	}
	if d := by[13].Detail; d == nil || !d.CmdlineCut || len(d.Cmdline) != 1 || len(d.Cmdline[0]) != MaxCmdline {
		t.Errorf("pid 13: a %d-byte command line gave %+v, want it cut at %d", MaxCmdline+10, d, MaxCmdline)
	}
	if d := by[14].Detail; d != nil {
		t.Errorf("pid 14 (uid 0, not asked about): detail %+v, want none", d)
	}
	if d := by[15].Detail; d == nil || d.TracerPID != -1 || d.GID != -1 || !strings.Contains(d.Error, "TracerPid") {
		t.Errorf("pid 15 (no Gid or TracerPid line): detail %+v, want -1 for both and the error named", d)
	}
	none, err := readProcesses(fp.root, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range none {
		if p.Detail != nil {
			t.Errorf("no uid asked about, yet pid %d has detail %+v", p.PID, p.Detail)
		}
	}
}

// A snapshot details at most MaxDetailed processes: past it each holds
// only the error, so a harness's processes cannot grow the snapshot
// without bound.
func TestReadProcessesDetailIsBounded(t *testing.T) {
	fp := newFakeProc(t)
	for pid := 2; pid < 2+MaxDetailed+3; pid++ {
		fp.addDetailed(pid, 1000, 0, []string{"sh"}, "/bin/sh")
	}
	procs, err := readProcesses(fp.root, []int{1000})
	if err != nil {
		t.Fatal(err)
	}
	read, limited := 0, 0
	for _, p := range procs {
		switch {
		case p.Detail == nil:
			t.Fatalf("pid %d has no detail", p.PID)
		case p.Detail.Exe == "/bin/sh":
			read++
		case strings.Contains(p.Detail.Error, "limit") && p.Detail.TracerPID == -1:
			limited++
		}
	}
	if read != MaxDetailed || limited != 3 {
		t.Errorf("%d detailed, %d past the limit; want %d and 3", read, limited, MaxDetailed)
	}
}

// The real /proc: a child this test traces shows the tracing thread as
// its tracer (TracerPid names a thread), an untraced one 0.
func TestDetailTracerReal(t *testing.T) {
	traced := exec.Command("sleep", "600")
	traced.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	// The tracer is the thread that started the child: it stays locked,
	// and alive, until the test ends.
	started, release := make(chan error), make(chan struct{})
	tracer := 0
	go func() {
		runtime.LockOSThread()
		tracer = syscall.Gettid()
		started <- traced.Start()
		<-release
		if traced.Process != nil {
			traced.Process.Kill()
			traced.Wait()
		}
	}()
	if err := <-started; err != nil {
		close(release)
		testenv.Missing(t, fmt.Sprintf("ptrace of a child (start a traced child: %v)", err), "run the tests where ptrace is allowed (kernel.yama.ptrace_scope at most 1, no seccomp filter denying it)")
	}
	defer close(release)
	plain := exec.Command("sleep", "600")
	if err := plain.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Process.Kill(); plain.Wait() })

	if d := detailOf(traced.Process.Pid, os.Getuid()); d.TracerPID != tracer {
		t.Errorf("traced child: detail %+v, want tracer %d", d, tracer)
	}
	if d := detailOf(plain.Process.Pid, os.Getuid()); d.TracerPID != 0 || d.Error != "" {
		t.Errorf("untraced child: detail %+v, want tracer 0", d)
	}
}

// detailOf is the Detail the probe reads of the real process pid, of
// uid.
func detailOf(pid, uid int) *Detail {
	procs := []Process{{PID: pid, UID: uid}}
	addDetail(witness.Proc, procs, []int{uid})
	return procs[0].Detail
}

// detailChildEnv marks the run of TestDetailExeOfAnotherUser without
// CAP_SYS_PTRACE (the parent run re-executes the test binary for it).
const detailChildEnv = "SANDPROOF_PROBE_DETAIL_CHILD"

// Root without CAP_SYS_PTRACE (a container's root) is refused another
// user's exe link; the probe reads it with that user's filesystem ids.
func TestDetailExeOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (the test reads another user's exe link as root without CAP_SYS_PTRACE)", "run the tests as root")
	}
	if os.Getenv(detailChildEnv) == "" {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			testenv.Missing(t, "setpriv (util-linux), to drop CAP_SYS_PTRACE for the child run", "apt-get install util-linux")
		}
		cmd := exec.Command(setpriv, "--bounding-set", "-sys_ptrace,-sys_admin,-perfmon", os.Args[0], "-test.run=^TestDetailExeOfAnotherUser$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), detailChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestDetailExeOfAnotherUser")) {
			t.Fatalf("the run without CAP_SYS_PTRACE did not pass: %v\n%s", err, out)
		}
		return
	}
	// Two of uid 65534 (read in one change of ids) and one of uid 1000.
	var procs []Process
	var want []string
	for _, uid := range []uint32{65534, 65534, 1000} {
		sleeper := exec.Command("sleep", "600")
		sleeper.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		if err := sleeper.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
		pid := sleeper.Process.Pid
		exe, err := filepath.EvalSymlinks(sleeper.Path)
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); string(comm) == "sleep\n" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("uid %d's sleep never exec'd", uid)
			}
		}
		// Positive control: with root's own ids the link is refused.
		if _, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("positive control: root without CAP_SYS_PTRACE read uid %d's exe link (err %v); want EACCES", uid, err)
		}
		procs = append(procs, Process{PID: pid, UID: int(uid)})
		want = append(want, exe)
	}
	addDetail(witness.Proc, procs, []int{65534, 1000})
	for i, p := range procs {
		if d := p.Detail; d == nil || d.Exe != want[i] || d.Error != "" || d.GID != p.UID {
			t.Errorf("uid %d's sleep: detail %+v, want exe %q", p.UID, d, want[i])
		}
	}
	// The thread's own ids came back: root still reads its own files.
	if _, err := os.Readlink("/proc/self/exe"); err != nil {
		t.Errorf("after the read as uid 65534: %v", err)
	}
}
