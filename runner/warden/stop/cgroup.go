package stop

// Tier cgroup (contract §2 hold, §3 receipt's tier): where the
// supervisor's own cgroup v2 is writable, the harness is started straight
// into a cgroup of its own (clone3 CLONE_INTO_CGROUP, so no fork escapes
// before a move), and the stop freezes it (cgroup.freeze) and kills it
// (cgroup.kill): the kernel stops every member at once, and a fork racing
// the kill is killed too. The subreaper machinery keeps running beside it:
// a root harness may move a process out of its cgroup, and a process
// reached by the marker lives outside it; the cgroup is one more thing the
// kernel must confirm empty (populated 0), never the only check.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/runner/warden/mutant"
	"github.com/sandproof/sandproof/runner/warden/proc"
)

// ErrNoCgroup2 means the calling process has no cgroup v2 it can use: no
// cgroup2 mount, no unified entry in /proc/self/cgroup (a pure v1 host),
// or its cgroup lies outside every cgroup2 mount it can see.
var ErrNoCgroup2 = errors.New("no cgroup v2 for this process")

// OwnCgroupDir returns the directory of the calling process's own cgroup
// v2, from the contents of /proc/self/mountinfo and /proc/self/cgroup: the
// unified line ("0::PATH") names the cgroup relative to the hierarchy's
// root, and the cgroup2 mount whose root contains PATH says where that part
// of the hierarchy is mounted. Inside a cgroup namespace both are relative
// to the namespace's root, so they still agree.
func OwnCgroupDir(mountinfo, cgroup []byte) (string, error) {
	path, ok := "", false
	for _, line := range strings.Split(string(cgroup), "\n") {
		if p, found := strings.CutPrefix(line, "0::"); found {
			path, ok = p, true
			break
		}
	}
	if !ok {
		return "", fmt.Errorf("%w: no unified (0::) line in /proc/self/cgroup", ErrNoCgroup2)
	}
	if !strings.HasPrefix(path, "/") || strings.Contains("/"+path+"/", "/../") || strings.HasSuffix(path, " (deleted)") {
		return "", fmt.Errorf("%w: own cgroup %q is outside this namespace's hierarchy", ErrNoCgroup2, path)
	}
	mounts := 0
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) || fields[sep+1] != "cgroup2" {
			continue
		}
		mounts++
		root, point := unescapeMount(fields[3]), unescapeMount(fields[4])
		rel, ok := underRoot(path, root)
		if !ok {
			continue
		}
		return filepath.Join(point, rel), nil
	}
	if mounts == 0 {
		return "", fmt.Errorf("%w: no cgroup2 mount in /proc/self/mountinfo", ErrNoCgroup2)
	}
	return "", fmt.Errorf("%w: own cgroup %q is under no cgroup2 mount's root", ErrNoCgroup2, path)
}

// FindOwnCgroup is OwnCgroupDir on the files at those paths
// (/proc/self/mountinfo and /proc/self/cgroup in warden).
func FindOwnCgroup(mountinfoPath, cgroupPath string) (string, error) {
	mi, err := os.ReadFile(mountinfoPath)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoCgroup2, err)
	}
	cg, err := os.ReadFile(cgroupPath)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoCgroup2, err)
	}
	return OwnCgroupDir(mi, cg)
}

// underRoot returns path relative to a mount's root, if it lies under it.
func underRoot(path, root string) (string, bool) {
	if root == "/" {
		return path, true
	}
	if path == root {
		return "/", true
	}
	if rest, ok := strings.CutPrefix(path, root+"/"); ok {
		return "/" + rest, true
	}
	return "", false
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Cgroup is one launch's cgroup v2: PARENT/warden-<launch id>/harness for
// the harness and, made when the first service starts, .../services for
// the declared services, so that killing the harness's cgroup never
// touches a service. PARENT is the supervisor's own cgroup; the supervisor
// itself stays there, outside both.
type Cgroup struct {
	// Dir is this cgroup's directory.
	Dir string
	// top is PARENT/warden-<launch id>, removed with the last child.
	top string
	fd  int
}

// CgroupOptions say where the cgroups go; zero values read the calling
// process's own /proc/self files.
type CgroupOptions struct {
	// Parent, when set, is used instead of the process's own cgroup.
	Parent string
}

// NewLaunchCgroup makes PARENT/warden-<id>/harness and opens it for
// CLONE_INTO_CGROUP. Any error means tier cgroup is not available here
// (read-only or absent cgroup2, no delegation, a kernel without cgroup.kill)
// and says why; nothing is left behind.
func NewLaunchCgroup(id string, opt CgroupOptions) (*Cgroup, error) {
	parent := opt.Parent
	if parent == "" {
		var err error
		if parent, err = FindOwnCgroup("/proc/self/mountinfo", "/proc/self/cgroup"); err != nil {
			return nil, err
		}
	}
	top := filepath.Join(parent, "warden-"+id)
	if err := os.Mkdir(top, 0o755); errors.Is(err, os.ErrExist) {
		// A launch with this id ended without removing its cgroup (its
		// supervisor was KILLed): reuse it only once it is empty.
		if rmErr := removeTree(top); rmErr != nil {
			return nil, fmt.Errorf("cgroup %s exists and cannot be removed: %v", top, rmErr)
		}
		err = os.Mkdir(top, 0o755)
		if err != nil {
			return nil, fmt.Errorf("not writable: mkdir %s: %v", top, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("not writable: mkdir %s: %v", top, err)
	}
	c, err := openChild(top, "harness")
	if err != nil {
		removeTree(top)
		return nil, err
	}
	return c, nil
}

// Services makes (once) and returns the cgroup beside this one that
// declared services are started into.
func (c *Cgroup) Services() (*Cgroup, error) {
	return openChild(c.top, "services")
}

func openChild(top, name string) (*Cgroup, error) {
	dir := filepath.Join(top, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("not writable: mkdir %s: %v", dir, err)
	}
	for _, f := range []string{"cgroup.kill", "cgroup.events", "cgroup.procs"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			os.Remove(dir)
			return nil, fmt.Errorf("no %s in %s (cgroup.kill needs Linux 5.14): %v", f, dir, err)
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("open %s: %v", dir, err)
	}
	return &Cgroup{Dir: dir, top: top, fd: fd}, nil
}

// FD is the open cgroup directory, for SysProcAttr.CgroupFD.
func (c *Cgroup) FD() int { return c.fd }

// events reads cgroup.events' keys (populated, frozen).
func (c *Cgroup) events() (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(c.Dir, "cgroup.events"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			out[k] = v
		}
	}
	return out, nil
}

// Populated reports whether a live process is in the cgroup or below it.
func (c *Cgroup) Populated() (bool, error) {
	ev, err := c.events()
	if err != nil {
		return true, err
	}
	return ev["populated"] != "0", nil
}

// Procs lists the pids in the cgroup and its descendants.
func (c *Cgroup) Procs() []int {
	var pids []int
	filepath.WalkDir(c.Dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	sort.Ints(pids)
	return pids
}

// wait polls cgroup.events until cond holds or until passes; inotify on
// cgroup.events would wake sooner, but a stop's wait is short and a poll
// cannot miss an event.
func (c *Cgroup) wait(ctx context.Context, until time.Time, cond func(map[string]string) bool) bool {
	step := 100 * time.Microsecond
	for {
		ev, err := c.events()
		if err == nil && cond(ev) || errors.Is(err, os.ErrNotExist) {
			return true // a removed cgroup holds nothing
		}
		if ctx.Err() != nil || !time.Now().Before(until) {
			return false
		}
		time.Sleep(step)
		if step < 5*time.Millisecond {
			step *= 2
		}
	}
}

// FreezeTimeout bounds the wait for cgroup.events to say frozen 1: a task
// in an uninterruptible sleep freezes only when it wakes, and cgroup.kill
// works on a cgroup that is not frozen yet too.
const FreezeTimeout = 500 * time.Millisecond

// Stop freezes the cgroup (waiting, bounded, for frozen 1), kills it, and
// waits until it is empty or until passes. It reports whether the cgroup
// was empty at the end, and what it did, for the log.
func (c *Cgroup) Stop(ctx context.Context, until time.Time) (empty bool, how string) {
	return c.stop(ctx, until, true)
}

// Kill is Stop without the freeze: cgroup.kill alone, which the kernel
// applies to a fork racing it too, and the wait for populated 0. A freeze
// costs a wake-up of every member (each is trapped in the freezer before
// the kill wakes it again to die), which a stop that sends nothing before
// the kill has no use for.
func (c *Cgroup) Kill(ctx context.Context, until time.Time) (empty bool, how string) {
	return c.stop(ctx, until, false)
}

func (c *Cgroup) stop(ctx context.Context, until time.Time, freeze bool) (empty bool, how string) {
	var steps []string
	if freeze {
		steps = append(steps, c.freeze(ctx, until))
	}
	killed := false
	tk := time.Now()
	if mutant.Is(mutant.NoCgroupKill) {
		steps = append(steps, "kill skipped (mutant)")
	} else if err := os.WriteFile(filepath.Join(c.Dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		steps = append(steps, fmt.Sprintf("kill: %v", err))
	} else {
		steps = append(steps, "killed"+since(tk)) // the write: the kernel signals every member in it
		killed = true
	}
	isEmpty := func(ev map[string]string) bool { return ev["populated"] == "0" }
	t := time.Now()
	if killed {
		empty = c.wait(ctx, until, isEmpty)
	} else {
		// Nothing will empty it: one look, and the time left goes to the
		// hold, which still stops what it reaches.
		empty = c.wait(ctx, time.Now(), isEmpty)
	}
	if freeze {
		// Thaw, so that a process the kill could not reach (moved in
		// after it) is not left frozen for ever; killed ones are gone
		// either way.
		os.WriteFile(filepath.Join(c.Dir, "cgroup.freeze"), []byte("0"), 0)
	}
	if empty {
		steps = append(steps, "populated 0"+since(t))
	} else {
		steps = append(steps, "still populated"+since(t))
	}
	return empty, strings.Join(steps, ", ")
}

// freeze freezes the cgroup and waits (FreezeTimeout at most, never past
// until) for frozen 1; it says how that went, for the log.
func (c *Cgroup) freeze(ctx context.Context, until time.Time) string {
	_, how := c.freezeWait(ctx, until)
	return how
}

// freezeWait is freeze, also reporting whether the kernel said frozen 1
// (or populated 0) in time.
func (c *Cgroup) freezeWait(ctx context.Context, until time.Time) (bool, string) {
	if err := os.WriteFile(filepath.Join(c.Dir, "cgroup.freeze"), []byte("1"), 0); err != nil {
		return false, fmt.Sprintf("freeze: %v", err)
	}
	frozenBy := time.Now().Add(FreezeTimeout)
	if until.Before(frozenBy) {
		frozenBy = until
	}
	t := time.Now()
	if c.wait(ctx, frozenBy, func(ev map[string]string) bool { return ev["frozen"] == "1" || ev["populated"] == "0" }) {
		return true, "frozen" + since(t)
	}
	return false, "not frozen in time" + since(t)
}

// thaw lets the cgroup's members run again (cgroup.freeze 0).
func (c *Cgroup) thaw() error {
	return os.WriteFile(filepath.Join(c.Dir, "cgroup.freeze"), []byte("0"), 0)
}

// since says, for the log, how long ago t was: " (1.234 ms)".
func since(t time.Time) string {
	return fmt.Sprintf(" (%.3f ms)", float64(time.Since(t).Microseconds())/1000)
}

// Remove closes the cgroup and removes its directory (with any cgroup a
// nested launch made below it and left), and the launch's top directory
// once no child of it is left. A cgroup that still holds a process stays
// (EBUSY): removing it is not worth a failed receipt.
func (c *Cgroup) Remove() error {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	err := removeTree(c.Dir)
	if rmErr := unix.Rmdir(c.top); rmErr != nil && rmErr != unix.ENOENT && rmErr != unix.ENOTEMPTY && rmErr != unix.EBUSY && err == nil {
		err = fmt.Errorf("rmdir %s: %w", c.top, rmErr)
	}
	return err
}

// removeTree removes a cgroup directory and every cgroup below it, deepest
// first; only directories are removed (a cgroup's files go with it).
func removeTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	for _, e := range entries {
		if e.IsDir() {
			removeTree(filepath.Join(dir, e.Name()))
		}
	}
	if err := unix.Rmdir(dir); err != nil && err != unix.ENOENT {
		return fmt.Errorf("rmdir %s: %w", dir, err)
	}
	return nil
}

// cgroupKill is the engine's cgroup step, once the grace has passed: freeze
// and kill the launch's cgroup, so everything in it is gone before the hold
// looks for what lives outside it.
func (e *Engine) cgroupKill(ctx context.Context, endAt time.Time) {
	_, how := e.Cgroup.Stop(ctx, endAt)
	e.reap()
	e.logf("cgroup %s: %s", e.Cgroup.Dir, how)
}

// killFirst says whether the stop kills the launch's cgroup before its
// first round: at grace 0 nothing is TERMed, so the grace is over at once
// and the cgroup's kill, which comes first once it is (contract §2 stop
// rules), needs no walk before it. Fake roots and stop --services keep the
// rounds.
func (e *Engine) killFirst() bool {
	return e.Grace <= 0 && e.Cgroup != nil && e.Scanner.FS.IsReal() && !e.Scanner.ServicesOnly
}

// cgroupFirst reads the launch's cgroup's members (one stat each), kills
// the cgroup (Kill: nothing was sent before, so nothing is frozen), and
// records as reached the members the kill ended: those whose pid now names
// a dead process, another process, or none. A member still alive under its
// identity was not in the cgroup at the kill (its pid reused by an
// outsider between the list and its stat, or moved out by a root harness)
// or is not dead yet (the wait for populated 0 ran out), and is left to the
// rounds, which reach it if it is the launch's. The
// rounds that follow scan the table as after any cgroup kill: what is
// reached outside the cgroup (the marker, a process moved out of it) is
// held and KILLed, and the confirmation is the kernel's, as ever.
func (e *Engine) cgroupFirst(ctx context.Context, r *run) {
	r.cgroupKilled = true
	t := time.Now()
	members := e.Scanner.cgroupMembers(e.Cgroup.Procs())
	read := since(t)
	_, how := e.Cgroup.Kill(ctx, r.endAt)
	t = time.Now()
	if !mutant.Is(mutant.CgroupBlind) {
		r.note(e.Scanner.ended(members))
	}
	ended := since(t)
	t = time.Now()
	e.reap()
	e.logf("cgroup %s (grace 0, before the first round): %d members read%s, %s, ended checked%s, reaped%s",
		e.Cgroup.Dir, len(members.Reached), read, how, ended, since(t))
}

// termFirst says whether the stop's first TERM goes, walk-free, to the
// launch's cgroup's members (cgroupTerm) rather than to a walk of the
// supervisor's tree: tier cgroup with a grace (at grace 0 the cgroup is
// killed first instead). Fake roots and stop --services keep the rounds.
func (e *Engine) termFirst() bool {
	return e.Grace > 0 && e.Cgroup != nil && e.Scanner.FS.IsReal() && !e.Scanner.ServicesOnly
}

// cgroupTerm is the first TERM of a stop with a grace in tier cgroup, in
// place of the first round's walk of the tree: it freezes the launch's
// cgroup, reads its members (cgroup.procs, a stat each: cgroupTree),
// TERMs those of the supervisor's tree (with CONT to the stopped), and
// thaws the cgroup, so that the TERMed handle their TERM and exit only
// once every one has been sent it (their exits do not take the cores from
// the sending, as in a walk's round). It returns the members TERMed; the
// rounds after it scan the whole table as ever (the marker, what lives
// outside the cgroup), TERM what they reach that was not TERMed here,
// then hold, KILL and confirm.
//
// Each TERM goes to a process identified first, as every signal does: a
// frozen member cannot run, so it cannot exec, fork or exit of itself,
// and the pid, start time and parent its stat shows after the listing
// still name the process the listing named when the signal is sent. Only a
// fatal signal from outside the cgroup can end a frozen task, and its pid
// stays taken until its parent reaps it; send pins each process with a
// pidfd and re-reads its start time all the same, so not even that lets a
// TERM land on another process. A freeze that does not take in time (a
// member in an uninterruptible sleep) leaves the pass as sound, only
// slower: the members that run may fork (the next round's scan finds the
// child) or exit (send finds them gone).
func (e *Engine) cgroupTerm(ctx context.Context, r *run) []Member {
	if populated, err := e.Cgroup.Populated(); err == nil && !populated {
		return nil // the harness left nothing in it: the rounds decide
	}
	_, froze := e.Cgroup.freezeWait(ctx, r.endAt)
	t := time.Now()
	snap := e.Scanner.cgroupTree(e.Cgroup.Procs())
	read := since(t)
	t = time.Now()
	e.signalAll(snap.Reached, syscall.SIGTERM, r.sent)
	termed := since(t)
	t = time.Now()
	thawed := "thawed"
	if mutant.Is(mutant.CgroupNoThaw) {
		thawed = "thaw skipped (mutant)"
	} else if err := e.Cgroup.thaw(); err != nil {
		// The grace then runs out on frozen members, and the cgroup's
		// kill (which thaws) ends them: slower, never unsound.
		thawed = fmt.Sprintf("thaw: %v", err)
	}
	r.note(snap)
	r.prev = snap.Reached
	e.logf("cgroup %s (first TERM, walk-free): %s, %d members of the tree read%s, TERMed%s, %s%s",
		e.Cgroup.Dir, froze, len(snap.Reached), read, termed, thawed, since(t))
	return snap.Reached
}

// cgroupTree reads the stat of each pid of the launch's cgroup and returns
// as a snapshot's reached those of the supervisor's tree by their stat
// parent links: a member whose parent is the supervisor (the harness, an
// adopted orphan) or, link by link, another such member; named as
// cgroupMembers names them. A member whose chain of parents leaves the
// cgroup before it reaches the supervisor (a process that joined the
// cgroup from outside the tree, or a child of one) is not reached here:
// the rounds reach it if a rule of the contract does (the marker, a tree
// process a root harness moved out of the cgroup), and the cgroup's kill
// ends it otherwise, without a TERM first. A declared service is never
// reached, nor is anything below one. The dead, the supervisor and what
// cannot be read are left out.
func (s *Scanner) cgroupTree(pids []int) *Snapshot {
	byPID := map[int]proc.Stat{}
	for _, st := range s.FS.ScanPIDs(pids) {
		if !st.Dead() && st.PID != s.Launch.Self {
			byPID[st.PID] = st
		}
	}
	service := map[proc.Identity]bool{}
	for _, id := range s.Launch.Services {
		service[id] = true
	}
	in := make(map[int]bool, len(byPID))
	var inTree func(pid, depth int) bool
	inTree = func(pid, depth int) bool {
		if v, ok := in[pid]; ok {
			return v
		}
		st := byPID[pid]
		v := false
		switch {
		case service[st.Identity()]:
		case st.PPID == s.Launch.Self:
			v = true
		case depth < len(byPID):
			// depth bounds a chain that loops (no kernel shows one).
			if _, member := byPID[st.PPID]; member {
				v = inTree(st.PPID, depth+1)
			}
		}
		in[pid] = v
		return v
	}
	snap := &Snapshot{}
	for pid, st := range byPID {
		if inTree(pid, 0) || mutant.Is(mutant.CgroupTermAll) {
			snap.Reached = append(snap.Reached, s.cgroupMember(st))
		}
	}
	sortMembers(snap.Reached)
	return snap
}

// ended keeps of a snapshot's reached the members that are no longer
// alive under their identity.
func (s *Scanner) ended(snap *Snapshot) *Snapshot {
	pids := make([]int, len(snap.Reached))
	for i, m := range snap.Reached {
		pids[i] = m.PID
	}
	alive := map[proc.Identity]bool{}
	for _, st := range s.FS.ScanPIDs(pids) {
		if !st.Dead() {
			alive[st.Identity()] = true
		}
	}
	out := &Snapshot{}
	for _, m := range snap.Reached {
		if !alive[m.Identity()] {
			out.Reached = append(out.Reached, m)
		}
	}
	return out
}

// cgroupMembers reads the stat of each pid of the launch's cgroup and
// returns them as a snapshot's reached: the harness by its identity (its
// group), a child of the supervisor as an orphan, any other as a
// descendant. The dead and what cannot be read are left out.
func (s *Scanner) cgroupMembers(pids []int) *Snapshot {
	snap := &Snapshot{}
	for _, st := range s.FS.ScanPIDs(pids) {
		if st.Dead() || st.PID == s.Launch.Self {
			continue
		}
		snap.Reached = append(snap.Reached, s.cgroupMember(st))
	}
	sortMembers(snap.Reached)
	return snap
}

// cgroupMember names one member of the launch's cgroup: the harness by
// its identity (its group), a child of the supervisor as an orphan, any
// other as a descendant.
func (s *Scanner) cgroupMember(st proc.Stat) Member {
	why := WhyDescendant
	switch {
	case st.Identity() == s.Launch.Harness:
		why = WhyGroup
	case st.PPID == s.Launch.Self:
		why = WhyOrphan
	}
	return Member{PID: st.PID, StartTime: st.StartTime, Comm: st.Comm, Why: why, State: string(st.State)}
}

// cgroupEmpty is the cgroup's part of a confirmation: the kernel must say
// populated 0. A cgroup that still holds a process when everything the scan
// reaches is gone (a process moved into it from outside, say) is killed
// now; what the kernel still lists after that, until endAt, makes the stop
// unconfirmed and is returned as survivors.
func (e *Engine) cgroupEmpty(ctx context.Context, endAt time.Time) ([]Member, error) {
	if e.Cgroup == nil {
		return nil, nil
	}
	populated, err := e.Cgroup.Populated()
	if err == nil && !populated {
		return nil, nil
	}
	pids := e.Cgroup.Procs()
	e.logf("cgroup %s still populated (%v) with nothing else reached: killing it", e.Cgroup.Dir, pids)
	empty, how := e.Cgroup.Stop(ctx, endAt)
	e.logf("cgroup %s: %s", e.Cgroup.Dir, how)
	if empty {
		return nil, nil
	}
	var living []Member
	for _, pid := range e.Cgroup.Procs() {
		m := Member{PID: pid, Why: WhyDescendant}
		if st, err := e.Scanner.FS.Stat(pid); err == nil {
			m.StartTime, m.Comm, m.State = st.StartTime, st.Comm, string(st.State)
		}
		living = append(living, m)
	}
	return living, fmt.Errorf("cgroup %s still populated after cgroup.kill", e.Cgroup.Dir)
}

func (e *Engine) logf(format string, args ...any) {
	if e.Log != nil {
		e.Log(fmt.Sprintf(format, args...))
	}
}

// CloneIntoCgroup fills in attr so that a fork through it starts in c
// (nil leaves attr alone).
func (c *Cgroup) CloneIntoCgroup(attr *syscall.SysProcAttr) {
	if c == nil {
		return
	}
	attr.UseCgroupFD = true
	attr.CgroupFD = c.fd
}
