package stop

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandproof/sandproof/runner/warden/mutant"
	"github.com/sandproof/sandproof/runner/warden/proc"
)

// Clock is the time source of a stop; fakeproc substitutes a simulated one.
type Clock interface {
	Now() time.Time
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Engine stops one launch.
type Engine struct {
	Scanner   *Scanner
	Signaller Signaller
	// Grace is the time between TERM and KILL.
	Grace time.Duration
	// KillWait bounds the wait for KILLed processes to vanish; zero means 5 s.
	KillWait time.Duration
	// Round is the longest pause between two rescans; zero means 20 ms.
	Round time.Duration
	// Clock defaults to the real clock (monotonic readings).
	Clock Clock
	// Pause waits between rounds. The default polls the processes signalled
	// so far and returns as soon as all are gone or Round has passed;
	// fakeproc replaces it with a step of its simulated kernel.
	Pause func(ctx context.Context, round int, alive []Member)
	// OnRound, when set, sees every round's snapshot (for tracing and specs).
	OnRound func(round int, snap *Snapshot)
	// QuickFirstRound: the first round looks at the tree only
	// (Scanner.ScanTree) and TERMs what it finds; marker and group members
	// outside the tree are found by the full scan of the next round, a
	// pause later. It keeps a stop's cost from growing with the host's
	// process count: a small stop then lists /proc once (to confirm), not
	// twice. A first round that finds nothing is scanned in full at once.
	QuickFirstRound bool
	// Cgroup, when set, is the launch's own cgroup v2 (tier cgroup): with a
	// grace, its members of the tree get the first TERM while it is frozen,
	// before the first round (cgroupTerm); it is frozen and killed once the
	// grace has passed, and required empty for a confirmation (cgroup.go).
	Cgroup *Cgroup
	// Log, when set, takes the stop's notes for the launch's log.
	Log func(string)
	// Reap, when set, reaps the supervisor's exited children. The stop
	// calls it after every pause of the grace or the kill and once the
	// cgroup's kill has been waited for, so that the rounds after it read
	// a tree without the zombies of what ended (a zombie is read, a stat
	// each, on every walk until it is reaped). Nil leaves the reaping to
	// the supervisor.
	Reap func()
}

// Result is what a stop observed.
type Result struct {
	// Reached lists every process reached in any round, first sighting.
	Reached []Member
	// Survivors were still alive when the bounded wait ended.
	Survivors []Member
	// Unverified and Preserved are from the last round.
	Unverified []Member
	Preserved  []Member
	// Confirmed is true when a round found nothing reached alive.
	Confirmed bool
	// Rounds counts full rescans.
	Rounds  int
	Seconds float64
	// Err is the last scan error, if scanning itself failed.
	Err error
	// Unsettled counts the rounds that found nothing reached alive but whose
	// second reading of the children lists disagreed.
	Unsettled int
}

// Run stops the launch: it rescans at the start and on every round, sends
// TERM (with CONT to stopped processes) to everything reached and, once the
// grace has passed, holds what is still alive (see hold) and KILLs it; it
// returns when a round finds nothing reached alive (the cleanup is then
// confirmed, provided the kernel's children lists could be read and every
// process was held) or KillWait after the grace has passed.
//
// Each round is a scan and then steps, in order, each of which may end the
// round (outcome again) or the stop (finished), or pass it on: onEmpty when
// nothing reached is alive, graceStep while the grace lasts, killStep after.
func (e *Engine) Run(ctx context.Context) Result {
	r := e.newRun()
	if e.killFirst() {
		t := time.Now()
		e.cgroupFirst(ctx, r)
		r.spent(phaseCgroup, t)
		if mutant.Is(mutant.CgroupOnly) {
			// The mutant: the cgroup's kill taken for the whole stop.
			if populated, err := e.Cgroup.Populated(); err == nil && !populated {
				r.res.Confirmed = true
				r.res.Seconds = r.clock.Now().Sub(r.start).Seconds()
				return r.res
			}
		}
	} else if e.termFirst() {
		t := time.Now()
		termed := e.cgroupTerm(ctx, r)
		r.spent(phaseTerm, t)
		if len(termed) > 0 {
			// The pause of the first round, whose TERM this was: the
			// rounds then scan the whole table, with no quick look first.
			r.termed = true
			t = time.Now()
			e.pauseGrace(ctx, 0, termed)
			e.reap()
			r.spent(phaseGrace, t)
		}
	}
	for round := 0; ; round++ {
		t := time.Now()
		snap, o := e.scanRound(ctx, r, round)
		r.spent(phaseScan, t)
		if o == pass && len(snap.Reached) == 0 {
			t = time.Now()
			o = e.onEmpty(ctx, r, snap, round)
			r.spent(phaseConfirm, t)
		}
		if o == pass {
			o = e.graceStep(ctx, r, snap, round)
		}
		if o == pass {
			o = e.killStep(ctx, r, snap, &round)
		}
		if o == finished {
			break
		}
	}
	r.settleUnheld()
	r.res.Seconds = r.clock.Now().Sub(r.start).Seconds()
	sortMembers(r.res.Reached)
	e.logPhases(r)
	return r.res
}

// The phases a stop's time is counted in, for its log line (logPhases):
// the rounds' scans (the listing, the kernel's tree walk, the marker
// reads), the TERMs and the grace's pauses, the cgroup's freeze and kill,
// the hold (its SIGSTOPs, readings and pauses), the KILLs and their
// pauses, and a confirmation's second reading and cgroup check.
const (
	phaseScan    = "scan"
	phaseTerm    = "term"
	phaseGrace   = "grace-pause"
	phaseCgroup  = "cgroup"
	phaseHold    = "hold"
	phaseKill    = "kill"
	phasePause   = "kill-pause"
	phaseConfirm = "confirm"
)

// phaseOrder is the order of the phases in a stop's log line, which reads
// "stop phases: scan 1.234 ms, term ...".
var phaseOrder = []string{phaseScan, phaseTerm, phaseGrace, phaseCgroup, phaseHold, phaseKill, phasePause, phaseConfirm}

// spent adds the real time since t to phase.
func (r *run) spent(phase string, t time.Time) {
	if r.phases == nil {
		r.phases = map[string]time.Duration{}
	}
	r.phases[phase] += time.Since(t)
}

// logPhases logs where the stop's time went, phase by phase, on the real
// clock (a fake clock's stop shows its real cost).
func (e *Engine) logPhases(r *run) {
	if e.Log == nil {
		return
	}
	var parts []string
	for _, p := range phaseOrder {
		parts = append(parts, fmt.Sprintf("%s %.3f ms", p, float64(r.phases[p].Microseconds())/1000))
	}
	e.logf("stop phases: %s", strings.Join(parts, ", "))
}

// run is one stop's state across its rounds.
type run struct {
	clock Clock
	start time.Time
	// killAt ends the grace (earlier once the harness is gone); endAt ends
	// the bounded wait.
	killAt, endAt time.Time
	// sent is the last signal each process was sent; seen the processes
	// reached in any round so far (res.Reached holds their first sighting).
	sent map[proc.Identity]syscall.Signal
	seen map[proc.Identity]bool
	res  Result
	// held and cgroupKilled say the hold and the cgroup's kill were done;
	// termed that the cgroup's members had their first TERM before the
	// first round (cgroupTerm).
	held, cgroupKilled, termed bool
	// tail counts the rounds since the harness was seen gone; prev is the
	// reached set of the round before.
	tail int
	prev []Member
	// unheld are the processes the hold could not stop.
	unheld []Member
	// phases is the real time spent in each phase (logPhases).
	phases map[string]time.Duration
}

// outcome is what a step of a round leaves the loop to do.
type outcome int

const (
	// pass: the step did not apply; the round's next step decides.
	pass outcome = iota
	// again: the round is over (its signals sent, its pause waited).
	again
	// finished: the stop is over.
	finished
)

// newRun starts a stop's clock: the grace ends at killAt, the bounded wait
// KillWait after it.
func (e *Engine) newRun() *run {
	clock := e.Clock
	if clock == nil {
		clock = realClock{}
	}
	killWait := e.KillWait
	if killWait == 0 {
		killWait = 5 * time.Second
	}
	start := clock.Now()
	if e.Scanner.Old != nil {
		// A stop never waits for the background pinning: what is not
		// pinned yet, it reads itself.
		e.Scanner.Old.StopPriming()
	}
	killAt := start.Add(e.Grace)
	return &run{
		clock:  clock,
		start:  start,
		killAt: killAt,
		endAt:  killAt.Add(killWait),
		sent:   map[proc.Identity]syscall.Signal{},
		seen:   map[proc.Identity]bool{},
	}
}

// note records a snapshot in the result: its unverified and preserved
// members, and the reached it shows for the first time.
func (r *run) note(snap *Snapshot) {
	r.res.Unverified, r.res.Preserved = snap.Unverified, snap.Preserved
	for _, m := range snap.Reached {
		if !r.seen[m.Identity()] {
			r.seen[m.Identity()] = true
			r.res.Reached = append(r.res.Reached, m)
		}
	}
}

// scanRound reads the round's snapshot (the tree alone on a quick first
// round that finds something) and notes it. A failed scan ends the round
// after a pause, or the stop once the bounded wait is over.
func (e *Engine) scanRound(ctx context.Context, r *run, round int) (*Snapshot, outcome) {
	var snap *Snapshot
	var err error
	if round == 0 && e.QuickFirstRound && !r.termed && !e.Scanner.ServicesOnly && !mutant.Is(mutant.NoKernelWalk) {
		if snap = e.Scanner.ScanTree(); len(snap.Reached) == 0 || snap.TreeErr != nil {
			snap, err = e.Scanner.Scan()
		}
	} else {
		snap, err = e.Scanner.Scan()
	}
	r.res.Rounds = round + 1
	if err != nil {
		r.res.Err = err
		if r.clock.Now().After(r.endAt) || ctx.Err() != nil {
			return nil, finished
		}
		e.pause(ctx, round, nil)
		return nil, again
	}
	if e.OnRound != nil {
		e.OnRound(round, snap)
	}
	r.note(snap)
	return snap, pass
}

// onEmpty decides a round that found nothing reached alive: confirmed when
// the kernel's children lists could be read and settle and the cgroup is
// empty; a tree that moved between two readings is read again, within the
// bounded wait.
func (e *Engine) onEmpty(ctx context.Context, r *run, snap *Snapshot, round int) outcome {
	r.res.Err = nil
	if snap.TreeErr != nil {
		// Nothing seen, but the kernel could not say so: not confirmed.
		r.res.Err = fmt.Errorf("read the supervisor's children: %w", snap.TreeErr)
		return finished
	}
	if living, ok := e.settled(snap); !ok {
		r.res.Unsettled++
		// The tree moved between two readings (a process forked
		// and its parent exited while the lists were read): read
		// it all again, within the bounded wait.
		if r.clock.Now().After(r.endAt) || ctx.Err() != nil {
			r.res.Survivors = living
			r.res.Err = errors.New("the supervisor's children lists did not settle")
			return finished
		}
		e.pause(ctx, round, living)
		return again
	}
	if living, err := e.cgroupEmpty(ctx, r.endAt); err != nil {
		r.res.Survivors, r.res.Err = living, err
		return finished
	}
	r.res.Confirmed = true
	return finished
}

// graceStep ends the stop once the bounded wait is over, cuts the grace
// short once the harness is gone, and while the grace lasts TERMs what is
// reached and waits.
func (e *Engine) graceStep(ctx context.Context, r *run, snap *Snapshot, round int) outcome {
	now := r.clock.Now()
	if now.After(r.endAt) || ctx.Err() != nil {
		r.res.Survivors = snap.Reached
		return finished
	}
	if now.Before(r.killAt) && e.leaderGone(snap) {
		// The grace is the harness's: once it has exited, what is
		// left is held and KILLed as soon as each has had its TERM
		// and a round has passed in which none of them ended of it
		// (what is left then ignores TERM), at most GraceTailRounds
		// rounds after the harness was seen gone: a tool that
		// respawns a child for every one TERMed cannot keep the
		// grace going, and a large tree dying of its TERM is not
		// held for nothing.
		ended := r.prev != nil && endedSince(r.prev, snap.Reached, e.Scanner.Launch.Harness)
		if r.tail >= GraceTailRounds || (!ended && allSent(snap.Reached, r.sent)) {
			r.killAt = now
		}
		r.tail++
	}
	r.prev = snap.Reached
	if now.Before(r.killAt) || mutant.Is(mutant.NoKill) {
		t := time.Now()
		e.signalAll(snap.Reached, syscall.SIGTERM, r.sent)
		r.spent(phaseTerm, t)
		t = time.Now()
		e.pauseGrace(ctx, round, snap.Reached)
		e.reap()
		r.spent(phaseGrace, t)
		return again
	}
	return pass
}

// killStep, once the grace has passed, kills the cgroup, then holds what
// is left and KILLs it, then KILLs what each later round still finds. The
// hold's readings count as rounds.
func (e *Engine) killStep(ctx context.Context, r *run, snap *Snapshot, round *int) outcome {
	if e.Cgroup != nil && !r.cgroupKilled {
		// Everything in the cgroup at once; the rescan then finds
		// what lives outside it, for the hold.
		r.cgroupKilled = true
		t := time.Now()
		e.cgroupKill(ctx, r.endAt)
		r.spent(phaseCgroup, t)
		return again
	}
	members := snap.Reached
	if !r.held && !mutant.Is(mutant.NoHold) {
		r.held = true
		t := time.Now()
		members, r.unheld = e.hold(ctx, round, snap, r.clock, r.endAt, r.note)
		r.spent(phaseHold, t)
	}
	t := time.Now()
	e.signalAll(members, syscall.SIGKILL, r.sent)
	r.spent(phaseKill, t)
	t = time.Now()
	e.pause(ctx, *round, members)
	e.reap()
	r.spent(phasePause, t)
	return again
}

// reap reaps the supervisor's exited children, when the stop was given a
// way to.
func (e *Engine) reap() {
	if e.Reap != nil {
		e.Reap()
	}
}

// settleUnheld withdraws the confirmation when the hold left a process it
// could not stop (ptraced, say): it may have forked between two readings,
// so the stop cannot vouch for its tree.
func (r *run) settleUnheld() {
	if len(r.unheld) == 0 {
		return
	}
	r.res.Confirmed = false
	for _, m := range r.unheld {
		if _, dup := findMember(r.res.Survivors, m.Identity()); !dup {
			r.res.Survivors = append(r.res.Survivors, m)
		}
	}
	sortMembers(r.res.Survivors)
	if r.res.Err == nil {
		r.res.Err = fmt.Errorf("could not hold %d process(es) with SIGSTOP", len(r.unheld))
	}
}

// leaderGone reports whether the launch's leader (the harness, by pid and
// start time) is no longer among the living this round: exited, a zombie
// waiting to be reaped, or its pid reused. The grace is the harness's own
// (contract §2 stop rules): once it is gone, nothing else is waited for.
// A stop without a known harness, or of services only, keeps the grace.
func (e *Engine) leaderGone(snap *Snapshot) bool {
	h := e.Scanner.Launch.Harness
	if h.PID == 0 || e.Scanner.ServicesOnly || mutant.Is(mutant.GraceWait) {
		return false
	}
	_, alive := findMember(snap.Reached, h)
	return !alive
}

// GraceTailRounds bounds the rounds a stop goes on TERMing after the
// harness was seen gone, while what it TERMed still ends of it.
const GraceTailRounds = 2

// endedSince reports whether a member of before other than the harness is
// missing from now: a TERMed process ended during the last pause.
func endedSince(before, now []Member, harness proc.Identity) bool {
	alive := make(map[proc.Identity]bool, len(now))
	for _, m := range now {
		alive[m.Identity()] = true
	}
	for _, m := range before {
		if id := m.Identity(); id != harness && !alive[id] {
			return true
		}
	}
	return false
}

// allSent reports whether every member has been sent a signal already
// (its TERM, at least): the grace may be cut short only then.
func allSent(members []Member, sent map[proc.Identity]syscall.Signal) bool {
	for _, m := range members {
		if _, ok := sent[m.Identity()]; !ok {
			return false
		}
	}
	return true
}

// settled reads the supervisor's children lists once more after a scan
// that found nothing reached alive, and agrees only if this second reading
// shows nothing alive and no process the first reading did not show
// (zombies reaped in between may be missing). One reading alone can miss a
// process that forks and lets its parent exit in a loop: the walk reads the
// supervisor's list while the parent lives, the parent exits (its child
// goes to the supervisor's list, already read) and is read as a zombie.
// The second reading then shows the child, alive or as a new zombie whose
// own child was handed to the supervisor before it died: a new identity
// either way, and the confirmation is refused.
func (e *Engine) settled(snap *Snapshot) (living []Member, ok bool) {
	if mutant.Is(mutant.NoKernelWalk) || mutant.Is(mutant.GroupKill) || mutant.Is(mutant.NoSubreaper) {
		return nil, true
	}
	skip := map[int]bool{}
	for _, m := range snap.Preserved {
		skip[m.PID] = true
	}
	again, err := e.Scanner.Walk(skip)
	ok = err == nil
	ids := map[proc.Identity]bool{}
	for _, m := range snap.Tree {
		ids[m.Identity()] = true
	}
	for _, n := range again {
		m := n.Member
		if !n.Dead() {
			living = append(living, m)
			ok = false
		}
		if !ids[m.Identity()] {
			ok = false
		}
	}
	return living, ok
}

// MaxHoldRounds bounds the readings of a hold: a tree that still grows
// after that many is not held, and the stop is not confirmed.
const MaxHoldRounds = 64

// heldState reports whether a member's stat state shows a process that
// cannot run: stopped by a signal (T) or in a tracing stop (t). A zombie
// leader's letter stays Z whatever its threads do, so its members are
// judged by FS.Held instead, thread by thread.
func heldState(state string) bool { return state == "T" || state == "t" }

// hold stops a stop from being outrun. Every reached process is sent
// SIGSTOP; then the kernel's children lists are read again and again,
// each newly seen process stopped the moment it is read (a process that
// forks and lets its parent exit in a loop is caught between two forks), and
// every known one re-read, until a reading finds no new member and every
// member shows state T or t (for a zombie leader: every live thread does,
// read from task/TID/stat); a full rescan then checks that nothing was
// reached another way (group, marker), and the hold ends. A stopped process
// cannot fork, so what is held is all there is to KILL. It returns the
// members to KILL and those it could not hold within MaxHoldRounds.
func (e *Engine) hold(ctx context.Context, round *int, snap *Snapshot, clock Clock, endAt time.Time, note func(*Snapshot)) (members, unheld []Member) {
	known := map[proc.Identity]Member{}
	// isHeld is each known member's last reading, by FS.Held.
	isHeld := map[proc.Identity]bool{}
	stopSent := map[proc.Identity]int{}
	fresh := false
	stopOne := func(m Member, held bool, iter int) {
		id := m.Identity()
		if _, ok := known[id]; !ok {
			known[id] = m
			fresh = true
		}
		if !held && stopSent[id] != iter+1 {
			stopSent[id] = iter + 1
			e.send(id, syscall.SIGSTOP)
		}
	}
	skip := map[int]bool{}
	for _, m := range snap.Preserved {
		skip[m.PID] = true
	}
	for iter := 0; ; iter++ {
		fresh = false
		if iter == 0 {
			for _, m := range snap.Reached {
				stopOne(m, heldState(m.State), iter)
			}
		}
		for _, root := range e.Scanner.treeRoots() {
			e.Scanner.walk(root, skip, func(n Node) {
				if !n.Dead() {
					stopOne(n.Member, e.Scanner.FS.Held(n.stat), iter)
				}
			}, nil, true)
		}
		// Re-read every member: drop the dead, stop again whoever is not
		// held yet (a SIGCONT from a sibling may have woken it).
		var waiting []Member
		for id, m := range known {
			st, err := e.Scanner.FS.Stat(id.PID)
			if err != nil || st.StartTime != id.StartTime || st.Dead() {
				delete(known, id)
				delete(isHeld, id)
				continue
			}
			m.State = string(st.State)
			known[id] = m
			isHeld[id] = e.Scanner.FS.Held(st)
			if !isHeld[id] {
				waiting = append(waiting, m)
				if stopSent[id] != iter+1 {
					stopSent[id] = iter + 1
					e.send(id, syscall.SIGSTOP)
				}
			}
		}
		if len(waiting) == 0 && !fresh && iter > 0 {
			full, err := e.Scanner.Scan()
			if err == nil {
				note(full)
				for _, m := range full.Reached {
					if _, ok := known[m.Identity()]; !ok && !heldState(m.State) {
						stopOne(m, false, iter)
					} else if !ok {
						known[m.Identity()] = m
						isHeld[m.Identity()] = true // shown T or t by this scan
					}
				}
				if !fresh {
					break
				}
			}
		}
		if iter+1 >= MaxHoldRounds || clock.Now().After(endAt) || ctx.Err() != nil {
			for id, m := range known {
				if !isHeld[id] {
					unheld = append(unheld, m)
				}
			}
			break
		}
		e.pauseHold(ctx, *round, waiting)
		*round++
	}
	for _, m := range known {
		members = append(members, m)
	}
	sortMembers(members)
	sortMembers(unheld)
	return members, unheld
}

// pauseHold waits until every waiting member is held or gone, or a round
// has passed; fakeproc's pause step stands in for it on fake trees.
func (e *Engine) pauseHold(ctx context.Context, round int, waiting []Member) {
	held := func(st proc.Stat) bool { return e.Scanner.FS.Held(st) }
	e.waitRound(ctx, round, waiting, held, 200*time.Microsecond, 2*time.Millisecond)
}

func findMember(ms []Member, id proc.Identity) (Member, bool) {
	for _, m := range ms {
		if m.Identity() == id {
			return m, true
		}
	}
	return Member{}, false
}

// signalAll sends sig to every reached process: TERM once (with CONT to a
// stopped process, again on every round so its pending TERM is handled),
// KILL on every round after the grace. A large set on the real /proc is
// signalled by one goroutine per CPU: each signal costs a pidfd_open, a stat
// re-read and the send, all in the kernel. Fake roots keep the order
// deterministic.
func (e *Engine) signalAll(members []Member, sig syscall.Signal, sent map[proc.Identity]syscall.Signal) {
	one := func(m Member) (proc.Identity, bool) {
		id := m.Identity()
		stopped := m.State == "T" || m.State == "t"
		// A reached member in state Z is a zombie leader with live threads,
		// which may be stopped though its letter cannot say: it gets one
		// CONT with its first TERM (harmless if they run).
		zombieLeader := m.State == "Z"
		if prev, ok := sent[id]; ok && prev == sig && sig == syscall.SIGTERM {
			if stopped {
				e.sendCont(id)
			}
			return id, false
		}
		if !e.send(id, sig) {
			return id, false
		}
		if sig == syscall.SIGTERM && (stopped || zombieLeader) {
			e.sendCont(id)
		}
		return id, true
	}
	workers := runtime.GOMAXPROCS(0)
	if len(members) < 64 || workers < 2 || !e.Scanner.FS.IsReal() {
		for _, m := range members {
			if id, ok := one(m); ok {
				sent[id] = sig
			}
		}
		return
	}
	// sent is only read by the workers and written after they finish.
	done := make([]bool, len(members))
	var wg sync.WaitGroup
	chunk := (len(members) + workers - 1) / workers
	for lo := 0; lo < len(members); lo += chunk {
		hi := min(lo+chunk, len(members))
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				_, done[i] = one(members[i])
			}
		}(lo, hi)
	}
	wg.Wait()
	for i, m := range members {
		if done[i] {
			sent[m.Identity()] = sig
		}
	}
}

// send signals one process after making sure the pid still names it. It
// returns false when the process is gone or the pid was reused.
func (e *Engine) send(id proc.Identity, sig syscall.Signal) bool {
	h, err := e.Signaller.Open(id)
	if err != nil {
		return false
	}
	defer h.Close()
	// Re-read the start time only now that the process is pinned: a pid
	// reused before Open shows a different start time here, and one reused
	// after Open cannot be reached through the handle.
	st, err := e.Scanner.FS.Stat(id.PID)
	if (err != nil || st.StartTime != id.StartTime) && !mutant.Is(mutant.NoStartCheck) {
		return false
	}
	err = h.Signal(sig)
	return err == nil
}

// sendCont wakes a stopped process so the TERM pending on it is handled.
func (e *Engine) sendCont(id proc.Identity) {
	if !mutant.Is(mutant.NoCont) {
		e.send(id, syscall.SIGCONT)
	}
}

func (e *Engine) pause(ctx context.Context, round int, alive []Member) {
	never := func(proc.Stat) bool { return false }
	e.waitRound(ctx, round, alive, never, 500*time.Microsecond, 4*time.Millisecond)
}

// pauseGrace is a round of the grace: it ends once the harness is gone
// (the grace is its own, and the rescan then holds and KILLs what is left
// without waiting out the round), or everything signalled is.
func (e *Engine) pauseGrace(ctx context.Context, round int, alive []Member) {
	if h := e.Scanner.Launch.Harness; h.PID != 0 && !e.Scanner.ServicesOnly && !mutant.Is(mutant.GraceWait) {
		if _, ok := findMember(alive, h); ok {
			alive = []Member{{PID: h.PID, StartTime: h.StartTime}}
		}
	}
	e.pause(ctx, round, alive)
}

// waitRound polls the members' stat files, which is cheap, until each is
// gone, dead or settled, or the round is over, and returns for a full
// rescan; the step doubles from step up to maxStep. fakeproc's pause step
// stands in for it on fake trees.
func (e *Engine) waitRound(ctx context.Context, round int, members []Member, settled func(proc.Stat) bool, step, maxStep time.Duration) {
	if e.Pause != nil {
		e.Pause(ctx, round, members)
		return
	}
	roundLen := e.Round
	if roundLen == 0 {
		roundLen = 20 * time.Millisecond
	}
	deadline := time.Now().Add(roundLen)
	for ctx.Err() == nil {
		done := true
		for _, m := range members {
			st, err := e.Scanner.FS.Stat(m.PID)
			if err == nil && st.StartTime == m.StartTime && !st.Dead() && !settled(st) {
				done = false
				break
			}
		}
		if done || !time.Now().Before(deadline) {
			return
		}
		time.Sleep(step)
		if step < maxStep {
			step *= 2
		}
	}
}

func sortMembers(ms []Member) {
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].PID != ms[j].PID {
			return ms[i].PID < ms[j].PID
		}
		return ms[i].StartTime < ms[j].StartTime
	})
}
