package certify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/probe"
)

// ScenarioBorrowed is borrowed (contract §7.6 scenarios): the sandbox is
// one a task environment lent, with a service and task state of the
// owner's own started before the launch, outside the harness's tree; the
// harness must leave both as they were. The owner's part is here: the
// service and state before the seed (borrow), and scenario.borrowed_kept
// after close.
const ScenarioBorrowed = "borrowed"

func init() {
	register(Scenario{Name: ScenarioBorrowed, Order: 60,
		beforeSeed: func(cr *caseRun, ctx context.Context, bx sandboxed) (sandboxed, error) { return cr.borrow(ctx, bx) },
		reads: func(taskUID int) ([]string, []int) {
			return []string{borrowedState}, []int{serviceUID(taskUID)}
		},
		verify: func(cr *caseRun, _ context.Context, in scenarioInput) error {
			cr.ev.Checks = append(cr.ev.Checks, borrowedCheck(borrowedAfter(cr.borrowed, in.v.after)))
			return nil
		},
	})
}

// borrowedState is the task state the owner of a borrowed sandbox writes
// before the launch; borrowedService is its service's command, a process
// with no children (so the owner's process table stays still).
const (
	borrowedState   = TaskDir + "/owner-service.state"
	borrowedSeconds = 1799
)

// serviceUID is the uid and gid the owner's service and state run as: not
// the task user's, so the harness (the task user) can neither signal nor
// ptrace the service (the kernel allows both only to the same uid, or to
// CAP_KILL and CAP_SYS_PTRACE, which it has not). 65534 (nobody, in every
// image; a uid needs no passwd entry for an engine exec), or 65533 when
// the task user is 65534. A variable so an engine test can give the
// service the task user's uid (the identity before, which the harness
// could hijack) and show borrowed_kept catch what the identity now
// prevents.
var serviceUID = func(taskUID int) int {
	if taskUID == 65534 {
		return 65533
	}
	return 65534
}

// borrow is borrowed's step before the seed (owner): it starts a task
// service of its own through an engine exec, in a session of its own
// (outside the harness's tree, as an environment server's services
// are), as serviceUID (so the harness cannot stop, kill or hijack it),
// writes task state, and finds the service in the process table with
// its executable and command line. A failure is the failed check
// setup.borrowed; the case stops there.
func (cr *caseRun) borrow(ctx context.Context, bx sandboxed) (sandboxed, error) {
	uid := serviceUID(cr.owner.uid)
	state := []byte("owner task state " + randomHex(8) + "\n")
	sum := sha256.Sum256(state)
	cr.borrowed = borrowedSeen{stateBefore: hex.EncodeToString(sum[:])}
	err := provider.UploadBytes(ctx, bx.sb, state, borrowedState, 0o644, uid, uid)
	var res provider.ExecResult
	if err == nil {
		res, err = bx.sb.Exec(ctx, provider.ExecSpec{User: fmt.Sprintf("%d:%d", uid, uid),
			Argv: []string{"/bin/sh", "-c", fmt.Sprintf("setsid sleep %d </dev/null >/dev/null 2>&1 &", borrowedSeconds)}})
	}
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("start the owner's service: exit %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	var svc probe.Process
	var look probe.Marker
	if err == nil {
		svc, look, err = cr.findService(ctx, bx, uid)
	}
	if err == nil {
		err = stateAsWritten(look, cr.borrowed.stateBefore, uid)
	}
	if err == nil {
		bx.ownerProcs = append(bx.ownerProcs, svc.ID())
		cr.borrowed.started, cr.borrowed.stateWas = svc, look.File
		cr.borrowed.service = fmt.Sprintf("%d/%d %s, uid %d, %s", svc.PID, svc.StartTime, svc.Comm, svc.UID, svc.Detail.Exe)
	}
	err = cr.witness("setup.borrowed", err)
	cr.checkErr("setup.borrowed", clauseScenario, err, "the owner's task service (%s, a session of its own) and task state %s: %s",
		pick(cr.borrowed.service == "", fmt.Sprintf("uid %d", uid), cr.borrowed.service), borrowedState, errText(err, cr.r.key))
	if stopsCase(err) && infraCause(err) == "" {
		cr.errType("provider_error")
	}
	return bx, err
}

// findService waits (bounded) for the owner's service to show in the
// probe's process table: the one new sleep of uid, once the probe could
// read its executable and command line (the sleep's own, `sleep N`). The
// same snapshot looks at the task state: which file it is and whose
// (probe.Marker.File), what borrowed_kept compares after close.
func (cr *caseRun) findService(ctx context.Context, bx sandboxed, uid int) (probe.Process, probe.Marker, error) {
	deadline := time.Now().Add(10 * time.Second)
	want := []string{"sleep", strconv.Itoa(borrowedSeconds)}
	for {
		s, err := witnessSnapshot(ctx, bx.sb, []int{uid}, []string{borrowedState})
		if err != nil {
			return probe.Process{}, probe.Marker{}, err
		}
		for _, p := range probe.Diff(bx.before, s).NewProcesses {
			if p.Comm == "sleep" && p.UID == uid && p.Detail != nil && p.Detail.Exe != "" && p.Detail.TracerPID == 0 && slices.Equal(p.Detail.Cmdline, want) {
				i := slices.IndexFunc(s.Markers, func(m probe.Marker) bool { return m.Path == borrowedState })
				if i < 0 {
					return p, probe.Marker{}, fmt.Errorf("the probe did not look at the owner's task state %s", borrowedState)
				}
				return p, s.Markers[i], nil
			}
		}
		if time.Now().After(deadline) {
			return probe.Process{}, probe.Marker{}, fmt.Errorf("the owner's service (uid %d, %q, its executable read) is not in the process table 10 s after its start", uid, strings.Join(want, " "))
		}
		select {
		case <-ctx.Done():
			return probe.Process{}, probe.Marker{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stateAsWritten is the positive control of the owner's task state before
// the launch: the probe read it, as written (sum), a regular file 0644 of
// the owner's uid and gid, so what borrowed_kept compares after close is
// a file the harness could neither write nor chmod.
func stateAsWritten(m probe.Marker, sum string, uid int) error {
	f := m.File
	if m.Missing || m.Error != "" || m.SHA256 != sum || f == nil || f.UID != uint32(uid) || f.GID != uint32(uid) || f.Mode != syscall.S_IFREG|0o644 {
		return fmt.Errorf("the owner's task state %s is not as written (sha256 %s, a regular file 0644 of %d:%d): %s, %v", borrowedState, short(sum), uid, uid, m.State(), f)
	}
	return nil
}

// borrowedAfter is b with what verify's snapshot (which details the
// service's uid, scenario.detailUIDs) found after close: how the service
// differs from how it started (keptAsStarted), the state's hash and
// which file it is, whose (probe.Marker.File).
func borrowedAfter(b borrowedSeen, a afterClose) borrowedSeen {
	m, ok := a.seen[borrowedState]
	b.stateMissing = !ok || m.Missing || m.Error != ""
	b.stateAfter, b.stateNow = m.SHA256, m.File
	if b.started.PID != 0 {
		b.changed = keptAsStarted(b.started, a.snap.Processes)
	}
	return b
}

// borrowedSeen is what the owner found of its own service and state after
// close.
type borrowedSeen struct {
	service string // "PID/STARTTIME comm, uid U, EXE" as started
	// started is the service as the probe listed it once started, with
	// its detail; changed is what keptAsStarted found different after
	// close (empty: kept).
	started      probe.Process
	changed      []string
	stateBefore  string // sha256 of the task state as written
	stateAfter   string
	stateMissing bool
	// stateWas and stateNow are which file the task state was, and
	// whose, as the probe read it (as root) before the launch and after
	// close; nil when it did not read it.
	stateWas, stateNow *probe.FileID
}

// borrowedCheck is scenario.borrowed_kept: the owner's task service,
// started before the launch outside the harness's tree as a uid the
// harness can neither signal nor trace, is after close the process it
// was (pid and start time), alive, not stopped, untraced, running the
// executable and command line it ran (keptAsStarted, the probe's reading
// as root); and the task state it wrote is there unchanged: the same
// bytes, and the same file with the same owner and mode (fileKept: the
// harness may write /task, so it can delete the state and put a copy of
// its own back, bytes and all, but not as the owner's uid).
func borrowedCheck(b borrowedSeen) reports.Check {
	var fileChanged []string
	if !b.stateMissing {
		fileChanged = fileKept(b.stateWas, b.stateNow)
	}
	intact := !b.stateMissing && b.stateBefore != "" && b.stateAfter == b.stateBefore && len(fileChanged) == 0
	kept := b.started.PID != 0 && len(b.changed) == 0
	return scenarioCheck("scenario.borrowed_kept", kept && intact,
		"owner's service %s kept after close: %t%s; task state %s unchanged: %t (sha256 %s -> %s%s)",
		b.service, kept, pick(kept, "", " ("+strings.Join(b.changed, "; ")+")"), borrowedState, intact, short(b.stateBefore),
		pick(b.stateMissing, "missing", short(b.stateAfter)), pick(len(fileChanged) == 0, "", "; "+strings.Join(fileChanged, "; ")))
}
