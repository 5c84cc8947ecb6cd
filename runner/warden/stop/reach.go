package stop

import (
	"bytes"
	"errors"
	"time"

	"github.com/sandproof/sandproof/runner/warden/mutant"
	"github.com/sandproof/sandproof/runner/warden/proc"
)

// Why a process was reached; the receipt's reached[].why.
const (
	WhyGroup      = "group"
	WhyDescendant = "descendant"
	WhyOrphan     = "orphan"
	WhyMarker     = "marker"
)

// Member is one process in a receipt list.
type Member struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
	Comm      string `json:"comm"`
	Why       string `json:"why,omitempty"`
	// State is the stat state seen last ("Z" for a zombie); survivors carry
	// it so a reader can tell a stuck process from a live one.
	State string `json:"state,omitempty"`
}

// Identity returns the member's (pid, start time).
func (m Member) Identity() proc.Identity { return proc.Identity{PID: m.PID, StartTime: m.StartTime} }

// Launch describes what a stop must reach.
type Launch struct {
	// ID is the launch id carried in WARDEN_LAUNCH.
	ID string
	// Self is the supervisor's pid: its children are adopted orphans, and it
	// is never signalled.
	Self int
	// Harness is the harness process; zero when it never started.
	Harness proc.Identity
	// Since is the start time (clock ticks) of the launch: only processes
	// started at or after it can carry its marker, so only theirs environ is
	// read. Zero reads every process's environment.
	Since uint64
	// Services are declared services, named by identity: each of them and
	// its whole subtree (the kernel's children lists, and the stat parent
	// links) is preserved, never reached. Nothing else is a service: no
	// environment variable makes a process one.
	Services []proc.Identity
}

// ServiceVar is the variable that earlier versions trusted to mark a
// service's processes. It marks nothing now: a process that sets it is
// reached like any other (the env-spoofer fixture and its specs check it).
const ServiceVar = "WARDEN_SERVICE"

// Scanner computes reached sets for one launch, remembering across rounds
// the members of the harness's process group it has seen, since a group may
// only be followed while its leader or a recorded member still holds its id.
type Scanner struct {
	FS     proc.FS
	Launch Launch
	// EnvironTimeout bounds each environ read; zero means 100 ms.
	EnvironTimeout time.Duration
	// Old, when set, spares rescans the processes that started before the
	// launch (see OldSet); nil reads every process every round.
	Old *OldSet
	// Fence, when set, rules out with one fstatat the unpinned processes
	// that started before the harness was forked (see BirthFence), so an
	// early stop need not read every stat on the host.
	Fence *BirthFence
	// ServicesOnly turns the scanner around for `stop --services`: the
	// preserved set (declared services and what belongs to them) becomes the
	// reached set, and nothing else is reached.
	ServicesOnly bool

	groupMembers map[proc.Identity]bool
	// fullScans counts the scans that listed /proc, for scanSkippingOld.
	fullScans int
	// vanished counts, in the last walk, listed children gone before their
	// stat was read.
	vanished int
}

// Snapshot is one round's view.
type Snapshot struct {
	// Reached are the live processes the stop must end: a zombie leader
	// with a live thread is one (state "Z"), a plain zombie is not.
	Reached []Member
	// Unverified started after the launch, could not have their environ
	// read, and are not otherwise reached.
	Unverified []Member
	// Preserved are declared services and what belongs to them.
	Preserved []Member
	// Tree is what the kernel's children lists showed below the supervisor
	// this round (services' subtrees left out), zombies included. Every
	// living member is also in Reached.
	Tree []Member
	// TreeErr is set when the kernel's children lists could not be read:
	// no cleanup can be confirmed then.
	TreeErr error
	// Stats is the whole table of the round, by pid.
	Stats map[int]proc.Stat
}

// Scan reads the process table and computes the reached set.
func (s *Scanner) Scan() (*Snapshot, error) {
	var stats []proc.Stat
	var err error
	if (s.Old != nil || s.Fence != nil) && s.FS.IsReal() {
		stats, err = s.scanSkippingOld()
	} else {
		stats, err = s.FS.Scan()
	}
	if err != nil {
		return nil, err
	}
	return s.compute(stats), nil
}

// ScanTree is a quick first look for a stop's first round: the harness,
// the declared services and whatever the kernel's children lists show below
// the supervisor, without listing /proc, so it costs O(tree) rather than
// O(host processes). It cannot confirm anything: a process outside the tree
// that carries the marker, or a group member outside it, is not looked for.
// Engine.Run therefore only uses it to send the first TERM sooner, and
// every later round (and any round that would confirm) is a full Scan.
func (s *Scanner) ScanTree() *Snapshot {
	var stats []proc.Stat
	add := func(pid int) {
		if st, err := s.FS.Stat(pid); err == nil {
			stats = append(stats, st)
		}
	}
	if s.Launch.Harness.PID > 0 {
		add(s.Launch.Harness.PID)
	}
	for _, svc := range s.Launch.Services {
		add(svc.PID)
	}
	return s.compute(stats)
}

// scanSkippingOld reads the stat of every process except those the OldSet
// proves are the same processes, started before the launch, as before, and
// those the BirthFence proves started before the harness's fork.
// What it read is pinned from the second scan on: pinning costs about two
// reads, so a stop that one scan confirms (a harness that exited at once,
// before the background prime got far) does not pay for it, and a stop
// that goes on for rounds stops reading the same old processes again.
func (s *Scanner) scanSkippingOld() ([]proc.Stat, error) {
	pids, err := s.FS.PIDs()
	if err != nil {
		return nil, err
	}
	if s.Old != nil {
		pids = s.Old.Unpinned(pids)
	}
	var stats []proc.Stat
	if s.Fence.Valid() {
		stats = s.FS.ScanPIDsSkipping(pids, s.Fence.Older)
		if !s.Fence.Valid() {
			// The clock was set while the inodes were read: what the
			// fence ruled out is read after all.
			stats = s.FS.ScanPIDs(pids)
		}
	} else {
		stats = s.FS.ScanPIDs(pids)
	}
	if s.fullScans++; s.fullScans > 1 && s.Old != nil {
		s.Old.Prime(stats)
	}
	return stats, nil
}

// compute turns one round's stat table into its snapshot, phase by phase:
// what is preserved, then what is reached through the harness's group, the
// supervisor's children, the kernel's tree and the marker. Each phase sees
// the preserved set the one before it returned.
func (s *Scanner) compute(stats []proc.Stat) *Snapshot {
	if s.groupMembers == nil {
		s.groupMembers = map[proc.Identity]bool{}
	}
	r := index(stats, s.Launch.Self)
	snap := &Snapshot{Stats: r.byPID}
	env := s.envReader()
	r.preserved = s.preserve(r, env)
	s.reachGroup(r)
	if mutant.Is(mutant.GroupKill) {
		// A stop reduced to a process-group kill: nothing but the group.
		return s.snapshot(snap, r.byPID, r.reached, r.preserved, nil)
	}
	// Orphans the supervisor adopted as subreaper.
	for _, c := range r.children[r.self] {
		if !mutant.Is(mutant.NoSubreaper) {
			r.add(c, WhyOrphan)
		}
	}
	snap.Tree, snap.TreeErr = s.reachTree(r)
	s.descend(r.reached, r.preserved, r.children, r.add)
	unverified, markerFound := s.reachMarkers(r, env)
	if markerFound {
		s.descend(r.reached, r.preserved, r.children, r.add)
	}
	return s.snapshot(snap, r.byPID, r.reached, r.preserved, unverified)
}

// round is one compute's view of the table: the stats by pid and the
// children by parent (both grow as the kernel's lists add what the listing
// missed), what is preserved and what is reached, and why.
type round struct {
	self      int
	stats     []proc.Stat
	byPID     map[int]proc.Stat
	children  map[int][]int
	preserved map[int]bool
	reached   map[int]string
}

// index builds a round's tables from the listed stats.
func index(stats []proc.Stat, self int) *round {
	r := &round{
		self:     self,
		stats:    stats,
		byPID:    make(map[int]proc.Stat, len(stats)),
		children: make(map[int][]int, len(stats)/2),
		reached:  map[int]string{},
	}
	for _, st := range stats {
		r.byPID[st.PID] = st
		r.children[st.PPID] = append(r.children[st.PPID], st.PID)
	}
	return r
}

// add reaches pid for why, unless it is the supervisor, is preserved or is
// reached already (the first reason stays).
func (r *round) add(pid int, why string) {
	if pid == r.self || r.preserved[pid] {
		return
	}
	if _, ok := r.reached[pid]; !ok {
		r.reached[pid] = why
	}
}

// envInfo is what one environ read said of a process.
type envInfo struct {
	marked, failed, gone bool
}

// roundEnv reads environments at most once per scan, and only of processes
// that started at or after the launch: older ones cannot carry its id.
type roundEnv struct {
	fs      proc.FS
	launch  Launch
	timeout time.Duration
	seen    map[int]envInfo
}

// envReader is this round's environment reader.
func (s *Scanner) envReader() *roundEnv {
	timeout := s.EnvironTimeout
	if timeout == 0 {
		timeout = 100 * time.Millisecond
	}
	return &roundEnv{fs: s.FS, launch: s.Launch, timeout: timeout, seen: map[int]envInfo{}}
}

// candidate says whether st may carry the launch's marker: started at or
// after the launch, not the supervisor, not dead.
func (e *roundEnv) candidate(st proc.Stat) bool {
	return st.StartTime >= e.launch.Since && st.PID != e.launch.Self && !st.Dead()
}

// read reads st's environment once per round.
func (e *roundEnv) read(st proc.Stat) envInfo {
	pid := st.PID
	if i, ok := e.seen[pid]; ok {
		return i
	}
	var i envInfo
	env, err := e.fs.EnvironOf(st, proc.EnvironLimit, e.timeout)
	switch {
	case errors.Is(err, proc.ErrGone):
		i.gone = true
	case err != nil:
		i.failed = true
	default:
		i.marked = proc.CarriesLaunch(env, e.launch.ID)
	}
	e.seen[pid] = i
	return i
}

// preserve returns the preserved set: each service (by identity) and its
// subtree, from the stat parent links and from the kernel's children lists
// (which also show a child forked after the table was listed; their stats
// join r.byPID).
func (s *Scanner) preserve(r *round, env *roundEnv) map[int]bool {
	l := s.Launch
	preserved := map[int]bool{}
	var queue []int
	for _, svc := range l.Services {
		// The mutant: a service named by its pid alone, so a process
		// that reuses a dead service's pid is kept as that service.
		if st, ok := r.byPID[svc.PID]; ok && (st.StartTime == svc.StartTime || mutant.Is(mutant.ServicePID)) {
			preserved[svc.PID] = true
			queue = append(queue, svc.PID)
		}
	}
	if mutant.Is(mutant.ServiceEnv) && len(l.Services) > 0 {
		// The mutant: a process is a service because its environment says so.
		for _, st := range r.stats {
			if !env.candidate(st) || preserved[st.PID] {
				continue
			}
			b, err := s.FS.EnvironOf(st, proc.EnvironLimit, env.timeout)
			if err == nil && bytes.Contains(b, []byte("\x00"+ServiceVar+"="+l.ID+"\x00")) || bytes.HasPrefix(b, []byte(ServiceVar+"="+l.ID+"\x00")) {
				preserved[st.PID] = true
				queue = append(queue, st.PID)
			}
		}
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range r.children[p] {
			if !preserved[c] && c != l.Self {
				preserved[c] = true
				queue = append(queue, c)
			}
		}
	}
	if !mutant.Is(mutant.NoKernelWalk) {
		for _, svc := range l.Services {
			if preserved[svc.PID] {
				for _, n := range s.walkFrom(svc.PID) {
					preserved[n.PID] = true
					if _, ok := r.byPID[n.PID]; !ok {
						r.byPID[n.PID] = n.stat
					}
				}
			}
		}
	}
	return preserved
}

// reachGroup reaches the harness and its process group, while the group's
// id is still held by the harness or by a member recorded earlier.
func (s *Scanner) reachGroup(r *round) {
	l := s.Launch
	if l.Harness.PID <= 0 {
		return
	}
	g := l.Harness.PID
	if st, ok := r.byPID[g]; ok && st.StartTime == l.Harness.StartTime {
		r.add(g, WhyGroup)
	}
	groupHeld := s.heldGroup(r)
	for _, st := range r.stats {
		if st.PGID != g {
			continue
		}
		id := st.Identity()
		if groupHeld || s.groupMembers[id] {
			s.groupMembers[id] = true
			r.add(st.PID, WhyGroup)
		}
	}
}

// heldGroup says whether the harness's group id is still the launch's: its
// recorded leader or a recorded member holds it, and no other process leads
// a group of that id.
func (s *Scanner) heldGroup(r *round) bool {
	l := s.Launch
	g := l.Harness.PID
	groupHeld := false
	if st, ok := r.byPID[g]; ok && st.StartTime == l.Harness.StartTime && st.PGID == g {
		groupHeld = true // the recorded leader still holds the id
	}
	if !groupHeld {
		for id := range s.groupMembers {
			if st, ok := r.byPID[id.PID]; ok && st.StartTime == id.StartTime && st.PGID == g {
				groupHeld = true // a recorded member still holds it
				break
			}
		}
	}
	// A different process that now leads a group with the same id has
	// taken the id over: its group is not ours.
	if st, ok := r.byPID[g]; ok && st.StartTime != l.Harness.StartTime && st.PGID == g {
		groupHeld = false
	}
	if mutant.Is(mutant.GroupReuse) {
		groupHeld = true
	}
	return groupHeld
}

// reachTree takes the kernel's word: every process below the supervisor,
// whatever it did to its session, group or environment, found through the
// children lists of every thread. A child of the supervisor is an orphan it
// adopted (or the harness), anything deeper a descendant. It returns the
// tree it saw (the snapshot's Tree and TreeErr); what it found that the
// listing missed joins r's tables.
func (s *Scanner) reachTree(r *round) ([]Member, error) {
	if mutant.Is(mutant.NoKernelWalk) || mutant.Is(mutant.NoSubreaper) {
		return nil, nil
	}
	var tree []Member
	nodes, err := s.walk(r.self, r.preserved, nil, r.byPID, true)
	for _, n := range nodes {
		tree = append(tree, n.Member)
		st, ok := r.byPID[n.PID]
		if !ok || st.StartTime != n.StartTime {
			r.children[n.PPID] = append(r.children[n.PPID], n.PID)
		}
		r.byPID[n.PID] = n.stat // the fresher reading (state and threads)
		if n.Dead() {
			continue
		}
		r.add(n.PID, n.Why)
	}
	return tree, err
}

// reachMarkers reads the environ of the candidates not reached already and
// reaches those that carry the launch's marker. It returns those it could
// not read, and whether it found a marker (their descendants are then due).
func (s *Scanner) reachMarkers(r *round, env *roundEnv) (unverified []proc.Stat, found bool) {
	for _, st := range r.stats {
		if !env.candidate(st) || r.preserved[st.PID] || mutant.Is(mutant.NoMarker) {
			continue
		}
		if _, ok := r.reached[st.PID]; ok {
			continue
		}
		e := env.read(st)
		switch {
		case e.gone:
		case e.failed:
			unverified = append(unverified, st)
		case e.marked:
			r.add(st.PID, WhyMarker)
			found = true
		}
	}
	return unverified, found
}

// snapshot turns the round's sets into sorted member lists.
func (s *Scanner) snapshot(snap *Snapshot, byPID map[int]proc.Stat, reached map[int]string, preserved map[int]bool, unverified []proc.Stat) *Snapshot {
	if s.ServicesOnly {
		for pid := range preserved {
			if st := byPID[pid]; !st.Dead() {
				snap.Reached = append(snap.Reached, Member{PID: pid, StartTime: st.StartTime, Comm: st.Comm, Why: "service", State: string(st.State)})
			}
		}
		sortMembers(snap.Reached)
		return snap
	}
	for pid := range preserved {
		st := byPID[pid]
		snap.Preserved = append(snap.Preserved, Member{PID: pid, StartTime: st.StartTime, Comm: st.Comm, State: string(st.State)})
	}
	for pid, why := range reached {
		st := byPID[pid]
		if st.Dead() {
			continue // dead zombies; a zombie leader with a live thread is alive
		}
		snap.Reached = append(snap.Reached, Member{PID: pid, StartTime: st.StartTime, Comm: st.Comm, Why: why, State: string(st.State)})
	}
	for _, st := range unverified {
		if _, ok := reached[st.PID]; ok {
			continue
		}
		snap.Unverified = append(snap.Unverified, Member{PID: st.PID, StartTime: st.StartTime, Comm: st.Comm, State: string(st.State)})
	}
	sortMembers(snap.Reached)
	sortMembers(snap.Unverified)
	sortMembers(snap.Preserved)
	return snap
}

// descend adds every descendant of a reached process.
func (s *Scanner) descend(reached map[int]string, preserved map[int]bool, children map[int][]int, add func(int, string)) {
	var queue []int
	for pid := range reached {
		queue = append(queue, pid)
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if _, ok := reached[c]; ok || c == s.Launch.Self || preserved[c] {
				continue
			}
			add(c, WhyDescendant)
			queue = append(queue, c)
		}
	}
}
