package certify

import (
	"path"
	"slices"
	"strings"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// An adapter's scratch (adapter.Manifest.Scratch) are the paths outside
// its session dir the harness writes and the adapter owns: close removes
// them, verify.adapter_scratch_removed finds none of them in the
// filesystem diff, and verify.fs_diff judges the rest. A scratch path
// deleted from the image is no scratch of the harness's: fs_diff still
// judges it.

// scratchOf sorts the diff's changes: those a scratch pattern matches
// (the path or an ancestor of it), which verify.adapter_scratch_removed
// judges; a change to a scratch pattern's directory or above it, which
// removing its entries makes (a directory modified, never added or
// deleted), which nobody need judge; and the rest.
func scratchOf(changes []provider.Change, scratch []string) (left, rest []provider.Change) {
	for _, c := range changes {
		p := path.Clean(c.Path)
		switch {
		case len(scratch) == 0:
			rest = append(rest, c)
		case c.Kind != provider.ChangeDeleted && slices.ContainsFunc(scratch, func(pat string) bool { return scratchMatch(pat, p) }):
			left = append(left, c)
		case c.Kind == provider.ChangeModified && slices.ContainsFunc(scratch, func(pat string) bool { return onTheWay(pat, p) }):
		default:
			rest = append(rest, c)
		}
	}
	return left, rest
}

// scratchMatch reports whether p is a match of pat (a glob only in its
// last element) or below one.
func scratchMatch(pat, p string) bool {
	dir, last := path.Split(pat)
	rel, ok := strings.CutPrefix(p, dir)
	if !ok || rel == "" {
		return false
	}
	first, _, _ := strings.Cut(rel, "/")
	m, _ := path.Match(last, first)
	return m
}

// onTheWay reports whether p is pat's directory or one above it.
func onTheWay(pat, p string) bool {
	dir := path.Dir(pat)
	return p == dir || p == "/" || strings.HasPrefix(dir, p+"/")
}

// checkScratch is verify.adapter_scratch_removed: nothing a scratch
// pattern matches is in the filesystem diff after close. Without a diff
// it is unknown, as verify.fs_diff is.
func checkScratch(a afterClose, scratch, removed []string) reports.Check {
	if !a.canDiff {
		return reports.Check{ID: "verify.adapter_scratch_removed", Status: reports.StatusUnknown, Clause: clauseVerify,
			Detail: "the provider cannot report the sandbox's filesystem changes (no provider.Differ)"}
	}
	return verifyCheck("verify.adapter_scratch_removed", len(a.scratchLeft) == 0,
		"the adapter's scratch %q gone after close (diff read from the %s); close removed %q; left: %v",
		scratch, a.diffHow, truncList(removed, 20), truncList(a.scratchLeft, 20))
}
