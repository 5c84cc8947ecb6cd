package certify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/session"
	"github.com/sandproof/sandproof/runner/probe"
	"github.com/sandproof/sandproof/runner/witness"
)

// maxDeliverable caps the deliverable's download (the token is short).
const maxDeliverable = 64 << 10

// verifyInput is what the owner's checks after close are judged against:
// the probe's baseline, the paths it looks at, the loop proof and the
// diff's allow-list. Every field is a value the earlier stages returned.
type verifyInput struct {
	before     probe.Snapshot
	allMarkers []string // the markers verify hashes (ownerPaths.allMarkers)
	markers    []string // the four XDG markers
	sessDir    string
	proof      loopProof
	allowed    []string // the fs diff's allow-list (caseRun.allowed)
	scratch    []string // the adapter's scratch (scratch.go)
	// scratchRemoved are the scratch paths close removed, for the detail.
	scratchRemoved []string
	key            string // redacted from the details
	// ownerProcs are the owner's own processes started after the
	// baseline (borrowed's service): not new processes of the harness.
	ownerProcs []witness.ID
	// scenarioPaths are the files the scenario's checks read in the same
	// snapshot (the writer's file, the borrowed state).
	scenarioPaths []string
	// detailUIDs are the uids whose processes the same snapshot gives
	// with their detail (the borrowed service's, its witness).
	detailUIDs []int
	// noDeliverable leaves verify.deliverable out of the checks (the
	// scenario judges it, or does not ask for it); verified still says
	// whether it holds.
	noDeliverable bool
}

// verified is what verify leaves for the scenario's checks: what it read
// after close, the loop proof, and whether the deliverable holds.
type verified struct {
	after     afterClose
	proof     loopProof
	delivered bool
	derived   string // the token the scripted model derived ("" for a real one)
}

// afterClose is what verify read in the sandbox after close: the probe's
// snapshot (markers, the deliverable's hash, the session dir, the
// process table, the tools) and, where the provider can, the
// filesystem's changes outside the allow-list.
type afterClose struct {
	snap    probe.Snapshot
	seen    map[string]probe.Marker // snap.Markers by path
	canDiff bool
	extra   []string // changes outside the allow-list and the scratch
	// scratchLeft are the changes the adapter's scratch matches.
	scratchLeft []string
	diffHow     string
	diffErr     error
}

// readAfterClose takes the probe's snapshot and the filesystem diff side
// by side. Every read happens after close and none depends on another.
// One probe snapshot also hashes the deliverable and looks for the
// session dir, so neither needs a download (each engine round trip costs
// more than the reads themselves).
func readAfterClose(ctx context.Context, sb provider.Sandbox, in verifyInput) (afterClose, error) {
	var (
		wg              sync.WaitGroup
		a               afterClose
		snapErr         error
		differ, canDiff = provider.As[provider.Differ](sb)
	)
	a.canDiff = canDiff
	wg.Add(1)
	go func() {
		defer wg.Done()
		paths := append(slices.Clone(in.allMarkers), Deliverable, in.sessDir)
		a.snap, snapErr = probeSnapshot(ctx, sb, append(paths, in.scenarioPaths...), in.detailUIDs, false)
	}()
	if canDiff {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.extra, a.scratchLeft, a.diffHow, a.diffErr = fsDiff(ctx, differ, in.allowed, in.scratch)
		}()
	}
	wg.Wait()
	if snapErr != nil {
		return a, snapErr
	}
	a.seen = map[string]probe.Marker{}
	for _, m := range a.snap.Markers {
		a.seen[m.Path] = m
	}
	return a, nil
}

// verify runs the owner's checks after close (contract §7.4), each a
// function of its own returning its check, and records them in the
// evidence in their order. Processes come from the probe's process
// table, never from warden. A provider error ends it where it happened,
// with the checks before it recorded.
func (cr *caseRun) verify(ctx context.Context, sb provider.Sandbox, in verifyInput) (verified, error) {
	ev := cr.ev
	v := verified{proof: in.proof}
	after := &reports.After{MarkersKept: []string{}, MarkersLost: []string{}, HarnessProcesses: []reports.Process{}}
	ev.After = after
	var failed bool
	add := func(c reports.Check) {
		ev.Checks = append(ev.Checks, c)
		failed = failed || c.Status == reports.StatusFailed
	}
	a, err := readAfterClose(ctx, sb, in)
	v.after = a
	if err != nil {
		return v, err
	}
	dc, err := checkDeliverable(ctx, sb, a.seen, in.proof, in.key)
	if err != nil {
		return v, err
	}
	after.Deliverable = dc.content
	v.delivered = dc.check.Status == reports.StatusPassed
	if !in.noDeliverable {
		add(dc.check)
	}

	diff := probe.Diff(in.before, a.snap)
	after.Python3, after.Bash = toolText(a.snap.Python3), toolText(a.snap.Bash)
	mc := checkMarkers(in.before, a.snap, in.markers)
	after.MarkersKept, after.MarkersLost = mc.kept, mc.lost
	add(mc.check)

	sc := checkSessionDir(a.seen, in.sessDir)
	ev.AdapterSessionDirRemoved = sc.gone
	add(sc.check)

	diff.NewProcesses = slices.DeleteFunc(diff.NewProcesses, func(p probe.Process) bool { return slices.Contains(in.ownerProcs, p.ID()) })
	pc := checkNewProcesses(diff)
	after.HarnessProcesses = append(after.HarnessProcesses, pc.procs...)
	add(pc.check)

	add(checkTools(diff, after.Python3, after.Bash))

	if a.canDiff && a.diffErr != nil {
		return v, a.diffErr
	}
	if len(in.scratch) > 0 {
		add(checkScratch(a, in.scratch, in.scratchRemoved))
	}
	add(checkFSDiff(a))
	ev.VerifierPassed = !failed
	if failed {
		cr.errType("verify_failed")
	}
	return v, nil
}

// verifyCheck is one verify check's verdict, passed or failed.
func verifyCheck(id string, ok bool, detail string, args ...any) reports.Check {
	st := reports.StatusPassed
	if !ok {
		st = reports.StatusFailed
	}
	return reports.Check{ID: id, Status: st, Clause: clauseVerify, Detail: fmt.Sprintf(detail, args...)}
}

// deliverableCheck is verify.deliverable and what the file held.
type deliverableCheck struct {
	check   reports.Check
	content string
}

// checkDeliverable is verify.deliverable: the deliverable's sha256
// against the content the model's write call carried; only a mismatch (or
// a shell write, whose content is somewhere in its command) is
// downloaded, so the evidence can say what the file held; one the probe
// found over its cap is neither hashed nor downloaded (it is larger than
// the download's cap too), and never delivered. It returns an error only
// for a provider error on that download.
func checkDeliverable(ctx context.Context, sb provider.Sandbox, seen map[string]probe.Marker, proof loopProof, key string) (deliverableCheck, error) {
	var out deliverableCheck
	want := sha256.Sum256([]byte(proof.want))
	dm, ok := seen[Deliverable]
	present := ok && !dm.Missing && dm.Error == ""
	delivered := present && proof.want != "" && dm.SameContent(probe.Marker{SHA256: hex.EncodeToString(want[:])})
	var detailErr error
	switch {
	case delivered:
		out.content = proof.want
	case dm.OverCap:
		detailErr = fmt.Errorf("the probe found %d bytes, over its cap: not hashed, not downloaded", dm.Size)
	default:
		// A no-follow, capped read: a link is named, never followed.
		got, err := provider.DownloadFile(ctx, sb, Deliverable, maxDeliverable)
		if provider.IsProviderError(err) {
			return out, err
		}
		out.content, detailErr = string(got), err
		// A shell write: the file's content, at least 8 bytes, is in the
		// command the model issued.
		if present && err == nil && proof.want == "" && proof.wantIn != "" && len(got) >= 8 && strings.Contains(proof.wantIn, string(got)) {
			delivered = true
		}
	}
	wantText := fmt.Sprintf("the content of the write call (%q)", truncate(proof.want, 80))
	switch {
	case proof.want == "" && proof.wantIn != "":
		wantText = "content found in the write call's command"
	case proof.want == "":
		wantText = "the content of a write call, but the transcript holds none"
	}
	out.check = verifyCheck("verify.deliverable", delivered,
		"%s holds %q, want %s (%s)", Deliverable, truncate(out.content, 80), wantText, errText(detailErr, key))
	return out, nil
}

// markersCheck is verify.markers and the markers kept and lost.
type markersCheck struct {
	check      reports.Check
	kept, lost []string
}

// checkMarkers is verify.markers: every XDG marker the owner wrote is
// there after close with the content it had in the baseline; one the
// snapshot does not report, could not read, or found over its cap (not
// hashed: probe.Marker.SameContent) is not kept.
func checkMarkers(before, after probe.Snapshot, markers []string) markersCheck {
	out := markersCheck{kept: []string{}, lost: []string{}}
	beforeMarkers := map[string]probe.Marker{}
	for _, m := range before.Markers {
		beforeMarkers[m.Path] = m
	}
	var why []string
	for _, m := range after.Markers {
		if !slices.Contains(markers, m.Path) {
			continue
		}
		if b := beforeMarkers[m.Path]; b.SameContent(m) {
			out.kept = append(out.kept, m.Path)
		} else {
			out.lost = append(out.lost, m.Path)
			why = append(why, fmt.Sprintf("%s (%s)", m.Path, lostWhy(m)))
		}
	}
	out.check = verifyCheck("verify.markers", len(out.kept) == len(markers) && len(out.lost) == 0,
		"%d of %d XDG markers kept unchanged; lost: %v", len(out.kept), len(markers), why)
	return out
}

// lostWhy says why a marker is not kept, in sandproof's words only (a
// read error may quote a link's target, which the harness chose).
func lostWhy(m probe.Marker) string {
	switch {
	case m.Missing:
		return "missing"
	case m.Error != "":
		return "not read: a link, not a regular file, or unreadable"
	case m.OverCap:
		return fmt.Sprintf("%d bytes, over the probe's cap: not hashed", m.Size)
	}
	return "content changed"
}

// sessionDirCheck is verify.session_dir_removed and its finding.
type sessionDirCheck struct {
	check reports.Check
	gone  bool
}

// checkSessionDir is verify.session_dir_removed: the probe reported the
// session dir, and missing.
func checkSessionDir(seen map[string]probe.Marker, sessDir string) sessionDirCheck {
	sm, ok := seen[sessDir]
	gone := ok && sm.Missing
	return sessionDirCheck{gone: gone, check: verifyCheck("verify.session_dir_removed", gone, "%s gone after close: %t", sessDir, gone)}
}

// processesCheck is verify.no_new_processes and the processes it found.
type processesCheck struct {
	check reports.Check
	procs []reports.Process
}

// checkNewProcesses is verify.no_new_processes: no live process that was
// not in the baseline (a new zombie is dead: named, not failed).
func checkNewProcesses(diff probe.Report) processesCheck {
	var out processesCheck
	for _, p := range diff.NewProcesses {
		out.procs = append(out.procs, reports.Process{PID: p.PID, StartTime: p.StartTime, Comm: p.Comm})
	}
	var zombies []string
	for _, z := range diff.NewZombies {
		zombies = append(zombies, fmt.Sprintf("%d %s", z.PID, z.Comm))
	}
	out.check = verifyCheck("verify.no_new_processes", len(diff.NewProcesses) == 0,
		"probe process table: %d process(es) alive that were not in the baseline %v; new zombies (dead): %v",
		len(diff.NewProcesses), procNames(diff.NewProcesses), zombies)
	return out
}

// checkTools is verify.tools_unchanged: python3, bash and the os-release
// as the baseline found them.
func checkTools(diff probe.Report, python3, bash string) reports.Check {
	var toolChanges []string
	for _, c := range diff.Changes {
		if c.What == "python3" || c.What == "bash" || c.What == "os" {
			toolChanges = append(toolChanges, fmt.Sprintf("%s: %s -> %s", c.What, c.Before, c.After))
		}
	}
	return verifyCheck("verify.tools_unchanged", len(toolChanges) == 0, "python3 %s, bash %s; changes: %v", python3, bash, toolChanges)
}

// checkFSDiff is verify.fs_diff: no filesystem change outside the
// allow-list. A diff nobody read proves nothing either way: without a
// provider.Differ it is unknown, so the case cannot pass on the other
// checks alone.
func checkFSDiff(a afterClose) reports.Check {
	if !a.canDiff {
		return reports.Check{ID: "verify.fs_diff", Status: reports.StatusUnknown, Clause: clauseVerify,
			Detail: "the provider cannot report the sandbox's filesystem changes (no provider.Differ)"}
	}
	return verifyCheck("verify.fs_diff", len(a.extra) == 0, "container filesystem changes outside /task, %s and the allow-list (diff read from the %s): %v", BaseDir, a.diffHow, truncList(a.extra, 20))
}

func procNames(ps []probe.Process) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%d/%d %s", p.PID, p.StartTime, p.Comm))
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func truncList(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("... %d more", len(s)-n))
	}
	return s
}

// allowed lists the paths the diff may hold, with everything below them:
// the task dir, the session dirs' parent, the owner's marker dirs, and the
// run's extra allow-list.
func (cr *caseRun) allowed() []string {
	home := cr.r.opts.TaskHome
	a := []string{TaskDir, BaseDir}
	a = append(a, session.OwnerMarkerDirs(home)...)
	return append(a, cr.r.opts.DiffAllow...)
}

// fsDiff returns the container's filesystem changes that are neither under
// an allowed path nor a directory on the way to one (a parent changes when
// a child is added) nor the adapter's scratch, the changes its scratch
// matches (scratchOf), and how the diff was read.
func fsDiff(ctx context.Context, d provider.Differ, allowed, scratch []string) ([]string, []string, string, error) {
	changes, how, err := d.Changes(ctx)
	if err != nil {
		return nil, nil, "", err
	}
	left, rest := scratchOf(changes, scratch)
	var out, leftText []string
	for _, c := range left {
		leftText = append(leftText, c.Kind+" "+c.Path)
	}
	slices.Sort(leftText)
	for _, c := range rest {
		// A deleted ancestor is never "on the way": only paths under an
		// allowed one may be deleted.
		if isAllowed(c.Path, allowed, c.Kind != provider.ChangeDeleted) {
			continue
		}
		out = append(out, c.Kind+" "+c.Path)
	}
	slices.Sort(out)
	return out, leftText, how, nil
}

func isAllowed(p string, allowed []string, ancestors bool) bool {
	p = path.Clean(p)
	for _, a := range allowed {
		if p == a || strings.HasPrefix(p, a+"/") || ancestors && (p == "/" || strings.HasPrefix(a, p+"/")) {
			return true
		}
	}
	return false
}
