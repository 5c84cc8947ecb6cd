package certify

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/probe"
	"github.com/sandproof/sandproof/runner/witness"
)

// The witness reads (docs/threat-model.md, "Witnesses"): a positive
// control reads a witness the harness cannot write. The scenario checks
// take theirs from here, and so should the next scenario's:
//
//   - the probe's view of /proc, as root, through an engine exec of the
//     owner's (witnessSnapshot): which process runs what command line and
//     executable, as which uid, in which state, traced by whom;
//   - warden's receipt, written by root while the harness runs as the
//     task user (reachedBy): which processes the stop reached;
//   - the relay's record of the model calls (the loop proof, proof.go).
//
// A file under the task dir is the harness's to write: it may show how
// something ran, never that it ran; the writer's file is judged by the
// owner's own looks at it as it grows (writer_witness.go).

// witnessSnapshot is a probe snapshot taken for a witness: run as root by
// an engine exec of the owner's, giving the processes of uids with their
// probe.Detail, the markers hashed, and no tool run (it may be taken
// while the harness runs).
func witnessSnapshot(ctx context.Context, sb provider.Sandbox, uids []int, markers []string) (probe.Snapshot, error) {
	return probeSnapshot(ctx, sb, markers, uids, true)
}

// probeSnapshot is the probe's snapshot as root with the markers hashed,
// the processes of uids detailed, and the tools run unless noExec.
func probeSnapshot(ctx context.Context, sb provider.Sandbox, markers []string, uids []int, noExec bool) (probe.Snapshot, error) {
	argv := []string{probePath, "snapshot"}
	if noExec {
		argv = append(argv, "--no-exec")
	}
	if len(uids) > 0 {
		ids := make([]string, len(uids))
		for i, u := range uids {
			ids[i] = strconv.Itoa(u)
		}
		argv = append(argv, "--detail-uids", strings.Join(ids, ","))
	}
	if len(markers) > 0 {
		argv = append(argv, "--markers", strings.Join(markers, ","))
	}
	return probeRun(ctx, sb, argv)
}

// reachedBy lists the processes a receipt says the stop reached: warden's
// record, written as root, of what it found in the harness's tree.
func reachedBy(rec *reports.Receipt) ([]witness.Member, error) {
	if rec == nil {
		return nil, fmt.Errorf("no receipt")
	}
	raw, ok := rec.Extra["reached"]
	if !ok {
		return nil, fmt.Errorf("the receipt has no reached list")
	}
	var ms []witness.Member
	if err := json.Unmarshal(raw, &ms); err != nil {
		return nil, fmt.Errorf("read the receipt's reached list: %w", err)
	}
	return ms, nil
}

// keptAsStarted compares a process the owner keeps with how the probe saw
// it when the owner started it: nothing, when it is the same process
// (pid and start time), alive and not stopped (T, t), running the same
// executable and command line as the same uid, with no tracer. Otherwise
// what differs, each read as root by the probe; a detail the probe could
// not read differs too.
func keptAsStarted(was probe.Process, now []probe.Process) []string {
	i := slices.IndexFunc(now, func(p probe.Process) bool { return p.ID() == was.ID() })
	if i < 0 {
		return []string{"gone"}
	}
	p := now[i]
	var bad []string
	if p.Dead() {
		bad = append(bad, fmt.Sprintf("dead (state %s)", p.State))
	}
	if p.State == "T" || p.State == "t" {
		bad = append(bad, fmt.Sprintf("stopped (state %s)", p.State))
	}
	if p.UID != was.UID {
		bad = append(bad, fmt.Sprintf("uid %d, was %d", p.UID, was.UID))
	}
	d, w := p.Detail, was.Detail
	if d == nil || w == nil {
		return append(bad, "its executable, command line and tracer were not read")
	}
	if d.Exe == "" || d.Exe != w.Exe {
		bad = append(bad, fmt.Sprintf("executable %q, was %q", d.Exe, w.Exe))
	}
	if d.CmdlineCut || !slices.Equal(d.Cmdline, w.Cmdline) {
		bad = append(bad, fmt.Sprintf("command line %q, was %q", truncate(strings.Join(d.Cmdline, " "), 80), truncate(strings.Join(w.Cmdline, " "), 80)))
	}
	if d.TracerPID != 0 {
		bad = append(bad, fmt.Sprintf("traced (TracerPid %d)", d.TracerPID))
	}
	if d.Error != "" {
		bad = append(bad, "unread: "+d.Error)
	}
	return bad
}

// fileKept is how the file a look found now differs from the one it found
// before (the probe's fstat, as root): another owner, another mode, or
// another file (inode or device: deleted and put back, whatever it
// holds). A look that did not read it is not shown kept.
func fileKept(was, now *probe.FileID) []string {
	if was == nil || now == nil {
		return []string{"which file it is was not read"}
	}
	var bad []string
	if now.UID != was.UID || now.GID != was.GID {
		bad = append(bad, fmt.Sprintf("owner %d:%d, was %d:%d", now.UID, now.GID, was.UID, was.GID))
	}
	if now.Mode != was.Mode {
		bad = append(bad, fmt.Sprintf("mode %o, was %o", now.Mode, was.Mode))
	}
	if now.Inode != was.Inode || now.Dev != was.Dev {
		bad = append(bad, fmt.Sprintf("another file (inode %d on device %d, was %d on %d): replaced", now.Inode, now.Dev, was.Inode, was.Dev))
	}
	return bad
}
