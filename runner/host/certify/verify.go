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
)

// maxDeliverable caps the deliverable's download (the token is short).
const maxDeliverable = 64 << 10

// verify runs the owner's checks after close (contract §7.4).
// Processes come from the probe's process table, never from warden.
func (cr *caseRun) verify(ctx context.Context, sb provider.Sandbox, before probe.Snapshot, allMarkers, markers []string, proof loopProof, sessDir string) error {
	ev, key := cr.ev, cr.r.key
	after := &reports.After{MarkersKept: []string{}, MarkersLost: []string{}, HarnessProcesses: []reports.Process{}}
	ev.After = after
	var failed bool
	check := func(id string, ok bool, detail string, args ...any) {
		if !cr.check(id, clauseVerify, ok, detail, args...) {
			failed = true
		}
	}

	// Every read below happens after close and none depends on another.
	// One probe snapshot also hashes the deliverable and looks for the
	// session dir, so neither needs a download (each engine round trip
	// costs more than the reads themselves); the filesystem diff runs
	// beside it.
	var (
		wg               sync.WaitGroup
		snap             probe.Snapshot
		snapErr, diffErr error
		extra            []string
		diffHow          string
		differ, canDiff  = provider.As[provider.Differ](sb)
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		snap, snapErr = snapshot(ctx, sb, append(slices.Clone(allMarkers), Deliverable, sessDir))
	}()
	if canDiff {
		wg.Add(1)
		go func() {
			defer wg.Done()
			extra, diffHow, diffErr = fsDiff(ctx, differ, cr.allowed())
		}()
	}
	wg.Wait()
	if snapErr != nil {
		return snapErr
	}
	seen := map[string]probe.Marker{}
	for _, m := range snap.Markers {
		seen[m.Path] = m
	}

	// The deliverable: its sha256 against the content the model's write
	// call carried; only a mismatch (or a shell write, whose content is
	// somewhere in its command) is downloaded, so the evidence can say
	// what the file held.
	want := sha256.Sum256([]byte(proof.want))
	dm, ok := seen[Deliverable]
	present := ok && !dm.Missing && dm.Error == ""
	delivered := present && proof.want != "" && dm.SHA256 == hex.EncodeToString(want[:])
	var detailErr error
	if delivered {
		after.Deliverable = proof.want
	} else {
		// A no-follow, capped read: a link is named, never followed.
		got, err := provider.DownloadFile(ctx, sb, Deliverable, maxDeliverable)
		if provider.IsProviderError(err) {
			return err
		}
		after.Deliverable, detailErr = string(got), err
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
	check("verify.deliverable", delivered,
		"%s holds %q, want %s (%s)", Deliverable, truncate(after.Deliverable, 80), wantText, errText(detailErr, key))

	diff := probe.Diff(before, snap)
	after.Python3, after.Bash = toolText(snap.Python3), toolText(snap.Bash)
	beforeMarkers := map[string]probe.Marker{}
	for _, m := range before.Markers {
		beforeMarkers[m.Path] = m
	}
	for _, m := range snap.Markers {
		if !slices.Contains(markers, m.Path) {
			continue
		}
		b := beforeMarkers[m.Path]
		if !m.Missing && m.Error == "" && m.SHA256 == b.SHA256 && !b.Missing {
			after.MarkersKept = append(after.MarkersKept, m.Path)
		} else {
			after.MarkersLost = append(after.MarkersLost, m.Path)
		}
	}
	check("verify.markers", len(after.MarkersKept) == len(markers) && len(after.MarkersLost) == 0,
		"%d of %d XDG markers kept unchanged; lost: %v", len(after.MarkersKept), len(markers), after.MarkersLost)

	// The session dir.
	sm, ok := seen[sessDir]
	gone := ok && sm.Missing
	ev.AdapterSessionDirRemoved = gone
	check("verify.session_dir_removed", gone, "%s gone after close: %t", sessDir, gone)

	// No process that was not in the baseline.
	for _, p := range diff.NewProcesses {
		after.HarnessProcesses = append(after.HarnessProcesses, reports.Process{PID: p.PID, StartTime: p.StartTime, Comm: p.Comm})
	}
	var zombies []string
	for _, z := range diff.NewZombies {
		zombies = append(zombies, fmt.Sprintf("%d %s", z.PID, z.Comm))
	}
	check("verify.no_new_processes", len(diff.NewProcesses) == 0,
		"probe process table: %d process(es) alive that were not in the baseline %v; new zombies (dead): %v",
		len(diff.NewProcesses), procNames(diff.NewProcesses), zombies)

	// python3 and bash.
	var toolChanges []string
	for _, c := range diff.Changes {
		if c.What == "python3" || c.What == "bash" || c.What == "os" {
			toolChanges = append(toolChanges, fmt.Sprintf("%s: %s -> %s", c.What, c.Before, c.After))
		}
	}
	check("verify.tools_unchanged", len(toolChanges) == 0, "python3 %s, bash %s; changes: %v", after.Python3, after.Bash, toolChanges)

	// The filesystem diff.
	if canDiff {
		if diffErr != nil {
			return diffErr
		}
		check("verify.fs_diff", len(extra) == 0, "container filesystem changes outside /task, %s and the allow-list (diff read from the %s): %v", BaseDir, diffHow, truncList(extra, 20))
	} else {
		// A diff nobody read proves nothing either way: the case cannot
		// pass on the other checks alone.
		ev.Checks = append(ev.Checks, reports.Check{ID: "verify.fs_diff", Status: reports.StatusUnknown, Clause: clauseVerify,
			Detail: "the provider cannot report the sandbox's filesystem changes (no provider.Differ)"})
	}
	ev.VerifierPassed = !failed
	if failed {
		cr.errType("verify_failed")
	}
	return nil
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
// a child is added), and how the diff was read.
func fsDiff(ctx context.Context, d provider.Differ, allowed []string) ([]string, string, error) {
	changes, how, err := d.Changes(ctx)
	if err != nil {
		return nil, "", err
	}
	var out []string
	for _, c := range changes {
		// A deleted ancestor is never "on the way": only paths under an
		// allowed one may be deleted.
		if isAllowed(c.Path, allowed, c.Kind != provider.ChangeDeleted) {
			continue
		}
		out = append(out, c.Kind+" "+c.Path)
	}
	slices.Sort(out)
	return out, how, nil
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
