package proc_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/warden/proc"
)

// ownerChildEnv marks the run of TestOwnerReadsKeepTheirThread that has
// none of the capabilities that let root read any environ (the parent run
// re-executes the test binary for it).
const ownerChildEnv = "SANDPROOF_PROC_OWNER_CHILD"

// Root without CAP_SYS_PTRACE (a container's root) reads another user's
// environ by opening it with the owner's filesystem ids, and every such read
// uses the one thread kept for it: no read ends a thread. A thread per read
// (the earlier design) ended one OS thread per other user's process a stop
// looked at; past the supervisor's reserved threads, each next thread has to
// be made, which a harness at its pids limit makes impossible (the Go
// runtime then aborts the supervisor).
func TestOwnerReadsKeepTheirThread(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (the test reads another user's environ as root without CAP_SYS_PTRACE)", "run the tests as root")
	}
	if os.Getenv(ownerChildEnv) == "" {
		runWithoutPtrace(t, "TestOwnerReadsKeepTheirThread")
		return
	}
	if c := capEff(t); c&readAnyEnviron != 0 {
		t.Fatalf("positive control: the effective set %#x still has CAP_SYS_PTRACE, CAP_SYS_ADMIN or CAP_PERFMON", c)
	}

	mark := "OWNER_MARK=" + strconv.FormatInt(time.Now().UnixNano(), 10)
	pid := startOtherUser(t, mark)
	// Positive control: with root's own ids the open is refused, so the
	// reads below go through the owner's ids.
	if err := rootOpen(pid); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("positive control: root without the readAnyEnviron capabilities opened uid 65534's environ (err %v); want EACCES", err)
	}

	pfs := proc.NewFS("")
	read := func() {
		t.Helper()
		env, err := pfs.Environ(pid, proc.EnvironLimit, 5*time.Second)
		if err != nil {
			t.Fatalf("environ of uid 65534's sleep: %v", err)
		}
		if !bytes.Contains(env, []byte(mark)) {
			t.Fatalf("environ of uid 65534's sleep is %q, want %s in it", env, mark)
		}
	}
	read() // the first read takes the opener's thread
	before := taskIDs(t)
	for range 50 {
		read()
	}
	after := taskIDs(t)
	for tid := range before {
		if !after[tid] {
			t.Errorf("thread %s ended during 50 owner reads (threads before %d, after %d): a read costs a thread", tid, len(before), len(after))
		}
	}
}

// readAnyEnviron are the capabilities that let root open any process's
// environ on the kernels here: CAP_SYS_PTRACE (19), and also CAP_SYS_ADMIN
// (21) and CAP_PERFMON (38), found by trying each. Docker's default set has
// none of them.
const readAnyEnviron = 1<<19 | 1<<21 | 1<<38

// runWithoutPtrace runs test again in a child test binary whose bounding
// set lacks the readAnyEnviron capabilities (root's exec takes its
// capabilities from the bounding set) and fails unless the child ran it and
// it passed.
func runWithoutPtrace(t *testing.T, test string) {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) drops the capabilities for the child run: %v", err)
	}
	cmd := exec.Command(setpriv, "--bounding-set", "-sys_ptrace,-sys_admin,-perfmon", os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), ownerChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s without CAP_SYS_PTRACE, CAP_SYS_ADMIN and CAP_PERFMON: %v\n%s", test, err, out)
	}
	if !bytes.Contains(out, []byte("--- PASS: "+test)) {
		t.Fatalf("the child run did not pass %s:\n%s", test, out)
	}
}

// capEff is this process's effective capability set.
func capEff(t *testing.T) uint64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			c, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatalf("CapEff %q: %v", v, err)
			}
			return c
		}
	}
	t.Fatal("no CapEff in /proc/self/status")
	return 0
}

// taskIDs lists this process's threads.
func taskIDs(t *testing.T) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, e := range ents {
		ids[e.Name()] = true
	}
	return ids
}

// BenchmarkEnvironAsOwner: one read of another user's environ by root
// without the readAnyEnviron capabilities, the open as the owner included.
// It needs those capabilities dropped, as `make bench` runs it:
//
//	setpriv --bounding-set -sys_ptrace,-sys_admin,-perfmon go test -run '^$' -bench EnvironAsOwner ./runner/warden/proc
func BenchmarkEnvironAsOwner(b *testing.B) {
	if os.Geteuid() != 0 {
		testenv.Missing(b, "root (the benchmark reads another user's environ as root)", "run it as root")
	}
	pid := startOtherUser(b, "OWNER_MARK=1")
	pfs := proc.NewFS("")
	if err := rootOpen(pid); !errors.Is(err, fs.ErrPermission) {
		testenv.Missing(b, "a root without CAP_SYS_PTRACE, CAP_SYS_ADMIN and CAP_PERFMON (root opens any environ here)",
			"run it under setpriv --bounding-set -sys_ptrace,-sys_admin,-perfmon, as `make bench` does")
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := pfs.Environ(pid, proc.EnvironLimit, 5*time.Second); err != nil {
			b.Fatal(err)
		}
	}
}

// startOtherUser starts `sleep 600` as uid and gid 65534 with mark as its
// whole environment, ends it when tb ends, and returns its pid once it has
// exec'd (its environment is then its own).
func startOtherUser(tb testing.TB, mark string) int {
	tb.Helper()
	sleeper := exec.Command("sleep", "600")
	sleeper.Env = []string{mark}
	sleeper.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := sleeper.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	pid := sleeper.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for {
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if err == nil && string(comm) == "sleep\n" {
			return pid
		}
		if time.Now().After(deadline) {
			tb.Fatalf("uid 65534's sleep never exec'd: comm %q, %v", comm, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// rootOpen opens pid's environ with this thread's own ids and closes it.
func rootOpen(pid int) error {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/environ")
	if err == nil {
		f.Close()
	}
	return err
}
