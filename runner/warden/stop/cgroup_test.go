package stop

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/warden/proc"
)

// This host's layout (hybrid: v1 controllers, cgroup2 at .../unified), a
// pure v2 host under systemd, a container's cgroup namespace (mount root
// and path both below the host's), and a mount point with an escaped space.
func TestOwnCgroupDirFromFakeFiles(t *testing.T) {
	const hybrid = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`
	const v1only = `32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
`
	const systemd = `25 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	const nested = `610 600 0:23 /docker/abc /sys/fs/cgroup ro,nosuid master:4 - cgroup2 cgroup2 rw
`
	const escaped = `41 31 0:38 / /mnt/cg\040two rw,relatime - cgroup2 none rw
`
	cases := []struct {
		name, mountinfo, cgroup, want string
		err                           bool
	}{
		{"hybrid, root cgroup", hybrid, "9:name=systemd:/\n4:memory:/x\n0::/\n", "/sys/fs/cgroup/unified", false},
		{"hybrid, nested", hybrid, "0::/warden-a/harness\n1:cpu:/\n", "/sys/fs/cgroup/unified/warden-a/harness", false},
		{"systemd", systemd, "0::/user.slice/user-1000.slice/session-2.scope\n", "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope", false},
		{"namespace root", nested, "0::/docker/abc\n", "/sys/fs/cgroup", false},
		{"below namespace root", nested, "0::/docker/abc/sub\n", "/sys/fs/cgroup/sub", false},
		{"not below the mount's root", nested, "0::/docker/abcd\n", "", true},
		{"escaped mount point", escaped, "0::/a\n", "/mnt/cg two/a", false},
		{"no cgroup2 mount", v1only, "1:cpu:/\n0::/\n", "", true},
		{"no unified line", hybrid, "1:cpu:/\n", "", true},
		{"outside the namespace", hybrid, "0::/../../x\n", "", true},
		{"relative path", hybrid, "0::x\n", "", true},
		{"empty files", "", "", "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			mi, cg := filepath.Join(dir, "mountinfo"), filepath.Join(dir, "cgroup")
			if err := os.WriteFile(mi, []byte(c.mountinfo), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cg, []byte(c.cgroup), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := FindOwnCgroup(mi, cg)
			if c.err {
				if !errors.Is(err, ErrNoCgroup2) {
					t.Fatalf("FindOwnCgroup = %q, %v; want an ErrNoCgroup2", got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("FindOwnCgroup = %q, %v; want %q", got, err, c.want)
			}
		})
	}
	if _, err := FindOwnCgroup(filepath.Join(t.TempDir(), "absent"), "/proc/self/cgroup"); !errors.Is(err, ErrNoCgroup2) {
		t.Fatalf("an unreadable mountinfo: %v, want ErrNoCgroup2", err)
	}
}

// A parent that is not a cgroup (no cgroup.kill appears in a new
// directory) means tier cgroup is unavailable, and nothing is left behind:
// the supervisor then falls back to the subreaper tier.
func TestLaunchCgroupRefusesAPlainDirectory(t *testing.T) {
	parent := t.TempDir()
	cg, err := NewLaunchCgroup("plain", CgroupOptions{Parent: parent})
	if err == nil {
		cg.Remove()
		t.Fatalf("NewLaunchCgroup in a plain directory made %s", cg.Dir)
	}
	if !strings.Contains(err.Error(), "cgroup.kill") {
		t.Fatalf("error %q does not say what is missing", err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
	if _, err := NewLaunchCgroup("ro", CgroupOptions{Parent: filepath.Join(parent, "absent")}); err == nil || !strings.Contains(err.Error(), "not writable") {
		t.Fatalf("a parent that cannot take a directory: %v, want a not-writable error", err)
	}
}

// writableCgroup makes a launch cgroup under the test's own cgroup v2, or
// ends the test when there is none it can write (not root, a container).
func writableCgroup(t *testing.T, id string) *Cgroup {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, fmt.Sprintf("root for a cgroup of its own (euid is %d)", os.Geteuid()), "run the tests as root on a host with a cgroup2 mount")
	}
	cg, err := NewLaunchCgroup(id, CgroupOptions{})
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("a writable cgroup v2 (%v)", err), "run on a host (not in a container) with cgroup2 mounted, e.g. at /sys/fs/cgroup/unified")
	}
	t.Cleanup(func() {
		// Kill by hand, not through Stop, so a mutant build cannot leave
		// the hopper running.
		os.WriteFile(filepath.Join(cg.Dir, "cgroup.kill"), []byte("1"), 0)
		cg.wait(context.Background(), time.Now().Add(5*time.Second), func(ev map[string]string) bool { return ev["populated"] == "0" })
		if err := cg.Remove(); err != nil {
			t.Errorf("remove %s: %v", cg.Dir, err)
		}
	})
	return cg
}

// hopsIn reads the hopper's heartbeat: one pid per incarnation.
func hopsIn(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(string(data))
}

// waitFor polls cond until it holds or 20 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// The cgroup is the kernel's word, not the scan's: a fork-and-exit hopper
// whose every incarnation takes a session of its own and is orphaned to
// init (this test is no subreaper) and carries no marker is invisible to
// the scanner, and an engine without the cgroup confirms a stop while it
// hops on. With the cgroup the same engine freezes and kills it, and
// confirms only once the kernel says populated 0.
func TestCgroupStopsWhatTheScanCannotSee(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		testenv.Package(t, "sh", "dash")
	}
	if _, err := exec.LookPath("setsid"); err != nil {
		testenv.Package(t, "setsid(1)", "util-linux")
	}
	id := fmt.Sprintf("stoptest-%d-%d", os.Getpid(), time.Now().UnixNano())
	cg := writableCgroup(t, id)
	heartbeat := filepath.Join(t.TempDir(), "hops")
	cmd := exec.Command(sh, "-c", `sh -c "$H"`)
	cmd.Env = append(os.Environ(), "HOPS="+heartbeat,
		`H=echo $$ >> "$HOPS"; sleep 0.01; setsid sh -c "$H" & exit 0`)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	cg.CloneIntoCgroup(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil { // the first incarnation's parent: the hopper is orphaned from here on
		t.Fatal(err)
	}

	// Positive control: the hopper hops, and the kernel lists it in the
	// cgroup.
	waitFor(t, "the hopper hopped 20 times", func() bool { return len(hopsIn(t, heartbeat)) >= 20 })
	if populated, err := cg.Populated(); err != nil || !populated {
		t.Fatalf("positive control: cgroup %s populated = %v, %v", cg.Dir, populated, err)
	}

	fs := proc.NewFS("")
	newEngine := func(c *Cgroup) *Engine {
		return &Engine{
			Scanner:   &Scanner{FS: fs, Launch: Launch{ID: id, Self: os.Getpid()}},
			Signaller: NewSignaller(fs),
			KillWait:  5 * time.Second,
			Cgroup:    c,
			Log:       func(line string) { t.Log(line) },
		}
	}

	// Control: blind without the cgroup.
	res := newEngine(nil).Run(context.Background())
	if !res.Confirmed || len(res.Reached) != 0 {
		t.Fatalf("control: the engine without the cgroup was not blind to the hopper: %+v", res)
	}
	seen := len(hopsIn(t, heartbeat))
	waitFor(t, "the hopper hops on after the blind stop", func() bool { return len(hopsIn(t, heartbeat)) > seen+5 })

	res = newEngine(cg).Run(context.Background())
	if !res.Confirmed {
		t.Fatalf("the stop with the cgroup is not confirmed: err %v, survivors %+v, still in the cgroup %v", res.Err, res.Survivors, cg.Procs())
	}
	if populated, err := cg.Populated(); err != nil || populated {
		t.Fatalf("a confirmed stop left cgroup %s populated = %v (%v), pids %v", cg.Dir, populated, err, cg.Procs())
	}
	if pids := cg.Procs(); len(pids) != 0 {
		t.Fatalf("a confirmed stop left pids %v in the cgroup", pids)
	}
}

// Remove takes away the launch's cgroups, a cgroup a nested launch left
// below them included, and the top directory with the last of them.
func TestCgroupRemoveTakesNestedCgroups(t *testing.T) {
	id := fmt.Sprintf("rmtest-%d-%d", os.Getpid(), time.Now().UnixNano())
	cg := writableCgroup(t, id)
	svc, err := cg.Services()
	if err != nil {
		t.Fatalf("services cgroup: %v", err)
	}
	inner := filepath.Join(cg.Dir, "warden-inner", "harness")
	if err := os.MkdirAll(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	top := filepath.Dir(cg.Dir)
	if err := cg.Remove(); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := os.Stat(cg.Dir); !os.IsNotExist(err) {
		t.Fatalf("%s still there: %v", cg.Dir, err)
	}
	if _, err := os.Stat(top); err != nil {
		t.Fatalf("the top %s went while the services cgroup is still there: %v", top, err)
	}
	if err := svc.Remove(); err != nil {
		t.Fatalf("Remove services: %v", err)
	}
	if _, err := os.Stat(top); !os.IsNotExist(err) {
		t.Fatalf("the top %s is left after its last cgroup: %v", top, err)
	}
}

// The members a grace-0 stop records from its frozen cgroup before the
// kill: the harness by its identity (group), a child of the supervisor
// (orphan), anything else (descendant); the dead, the unreadable and the
// supervisor itself are not listed.
func TestCgroupMembersNamesEachMember(t *testing.T) {
	root := t.TempDir()
	write := procWriter(t, root)
	write("100/stat", statLine("100", "warden", "S", "1"))
	write("200/stat", statLine("200", "harness", "S", "100"))
	write("300/stat", statLine("300", "daemon", "S", "100"))
	write("400/stat", statLine("400", "tool", "S", "200"))
	write("500/stat", statLine("500", "gone", "Z", "200"))
	fs := proc.NewFS(root)
	h, err := fs.Stat(200)
	if err != nil {
		t.Fatal(err)
	}
	s := &Scanner{FS: fs, Launch: Launch{Self: 100, Harness: h.Identity()}}
	got := s.cgroupMembers([]int{100, 200, 300, 400, 500, 600})
	want := map[int]string{200: WhyGroup, 300: WhyOrphan, 400: WhyDescendant}
	if len(got.Reached) != len(want) {
		t.Fatalf("reached %+v, want pids %v", got.Reached, want)
	}
	for _, m := range got.Reached {
		if want[m.PID] != m.Why || m.StartTime != h.StartTime {
			t.Fatalf("member %+v, want why %q and the stat's start time", m, want[m.PID])
		}
	}
}

// The walk-free first TERM reaches, of the cgroup's members, only the
// supervisor's tree by the stat parent links: the harness, its child and
// grandchild, an adopted orphan; not a process that joined the cgroup from
// outside (its parent is no member), nor its child, nor a declared service
// or what is below it, nor the dead, nor a child read before the kernel
// moved it from its dead parent.
func TestCgroupTreeKeepsOnlyTheSupervisorsTree(t *testing.T) {
	root := t.TempDir()
	write := procWriter(t, root)
	write("100/stat", statLine("100", "warden", "S", "1"))
	write("200/stat", statLine("200", "harness", "S", "100"))
	write("210/stat", statLine("210", "tool", "S", "200"))
	write("220/stat", statLine("220", "deep", "S", "210"))
	write("300/stat", statLine("300", "daemon", "S", "100"))
	write("400/stat", statLine("400", "outsider", "S", "1"))
	write("410/stat", statLine("410", "outchild", "S", "400"))
	write("500/stat", statLine("500", "service", "S", "100"))
	write("510/stat", statLine("510", "svcchild", "S", "500"))
	write("600/stat", statLine("600", "gone", "Z", "200"))
	write("610/stat", statLine("610", "orphan", "S", "600"))
	fs := proc.NewFS(root)
	h, err := fs.Stat(200)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := fs.Stat(500)
	if err != nil {
		t.Fatal(err)
	}
	s := &Scanner{FS: fs, Launch: Launch{Self: 100, Harness: h.Identity(), Services: []proc.Identity{svc.Identity()}}}
	got := s.cgroupTree([]int{100, 200, 210, 220, 300, 400, 410, 500, 510, 600, 610, 700})
	want := map[int]string{200: WhyGroup, 210: WhyDescendant, 220: WhyDescendant, 300: WhyOrphan}
	var pids []int
	for _, m := range got.Reached {
		pids = append(pids, m.PID)
		if want[m.PID] != m.Why {
			t.Errorf("member %+v, want why %q", m, want[m.PID])
		}
	}
	if len(got.Reached) != len(want) {
		t.Fatalf("reached pids %v, want %v", pids, want)
	}
}

// cgroupTerm TERMs the tree's members while the cgroup is frozen and thaws
// it: the harness (a child of this test, which stands in for the
// supervisor) ends of its TERM, a process that joined the cgroup from
// outside the tree (orphaned to init) is left alive and unlisted, and the
// kernel says frozen 0 afterwards.
func TestCgroupTermTERMsTheTreeAndThaws(t *testing.T) {
	id := fmt.Sprintf("stoptest-%d-%d", os.Getpid(), time.Now().UnixNano())
	cg := writableCgroup(t, id)
	pidFile := filepath.Join(t.TempDir(), "outsider.pid")
	// The outsider: a sleep whose parent exits at once, so init adopts it.
	out := exec.Command("sh", "-c", `sleep 1000 & echo $! > "$0"`, pidFile)
	if err := out.Run(); err != nil {
		t.Fatal(err)
	}
	var outsider int
	waitFor(t, "the outsider's pid", func() bool {
		data, err := os.ReadFile(pidFile)
		_, serr := fmt.Sscan(string(data), &outsider)
		return err == nil && serr == nil && outsider > 0
	})
	t.Cleanup(func() { syscall.Kill(outsider, syscall.SIGKILL) })
	if err := os.WriteFile(filepath.Join(cg.Dir, "cgroup.procs"), []byte(fmt.Sprint(outsider)), 0); err != nil {
		t.Fatal(err)
	}
	h := exec.Command("sleep", "1000")
	h.SysProcAttr = &syscall.SysProcAttr{}
	cg.CloneIntoCgroup(h.SysProcAttr)
	if err := h.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- h.Wait() }()
	fs := proc.NewFS("")
	hst, err := fs.Stat(h.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// Positive control: both are members.
	if pids := cg.Procs(); len(pids) != 2 {
		t.Fatalf("positive control: cgroup members %v, want the harness %d and the outsider %d", pids, h.Process.Pid, outsider)
	}
	e := &Engine{
		Scanner:   &Scanner{FS: fs, Launch: Launch{ID: id, Self: os.Getpid(), Harness: hst.Identity()}},
		Signaller: NewSignaller(fs),
		Grace:     time.Minute,
		Cgroup:    cg,
		Log:       func(line string) { t.Log(line) },
	}
	if !e.termFirst() {
		t.Fatal("termFirst is false for a grace in tier cgroup")
	}
	r := e.newRun()
	termed := e.cgroupTerm(context.Background(), r)
	if len(termed) != 1 || termed[0].Identity() != hst.Identity() || r.sent[hst.Identity()] != syscall.SIGTERM {
		t.Fatalf("TERMed %+v (sent %v), want the harness %v alone", termed, r.sent, hst.Identity())
	}
	ev, err := cg.events()
	if err != nil || ev["frozen"] != "0" {
		t.Fatalf("cgroup.events after the pass: %v, %v; want frozen 0", ev, err)
	}
	select {
	case err := <-waited:
		if err == nil || !strings.Contains(err.Error(), "terminated") {
			t.Fatalf("the harness ended with %v, want its TERM", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the harness did not end of its TERM: still frozen?")
	}
	if st, err := fs.Stat(outsider); err != nil || st.Dead() {
		t.Fatalf("the outsider was ended by the pass: %+v, %v", st, err)
	}
}
