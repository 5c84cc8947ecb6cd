package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/confine"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// hostOnly makes a host directory only root may read (0700), holding a
// directory named with a fresh marker and a file in it: what a link in
// the upper dir leads to on the host. It returns the directory and the
// marker.
func hostOnly(t *testing.T) (string, string) {
	t.Helper()
	var rb [6]byte
	rand.Read(rb[:])
	marker := "HOSTONLY-" + hex.EncodeToString(rb[:])
	dir := filepath.Join(t.TempDir(), "hostonly")
	if err := os.MkdirAll(filepath.Join(dir, marker), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, marker, "id_rsa"), []byte("not really\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir, marker
}

// swapTree makes, in upper, the red team's pair: tmp/x/d, a directory of
// 64 (so a walk spends time in it), and tmp/x/l, a link to target.
func swapTree(t *testing.T, upper, target string) (d, l string) {
	t.Helper()
	d, l = filepath.Join(upper, "tmp/x/d"), filepath.Join(upper, "tmp/x/l")
	for i := range 64 {
		if err := os.MkdirAll(filepath.Join(d, fmt.Sprintf("sub%02d", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(target, l); err != nil {
		t.Fatal(err)
	}
	return d, l
}

// walkDiff is the upper dir's diff of upper over lowers, within lim.
func walkDiff(ctx context.Context, upper string, lowers []string, lim diffLimits) ([]provider.Change, error) {
	top, err := openUpper(upper)
	if err != nil {
		return nil, err
	}
	return overlayChanges(ctx, top, upper, lowers, lim)
}

// leaked lists the changes whose path holds marker.
func leaked(cs []provider.Change, marker string) []string {
	var out []string
	for _, c := range cs {
		if strings.Contains(c.Path, marker) {
			out = append(out, c.Kind+" "+c.Path)
		}
	}
	return out
}

func hook(t *testing.T, f func(string)) {
	t.Helper()
	confine.StepHook = f
	t.Cleanup(func() { confine.StepHook = nil })
}

// byPathWalk is main's walk of the upper dir (at 9cc136c) as
// filepath.Walk does it: a directory's names are read by opening its path,
// and each is lstat'ed by its path, then, if a directory, walked the same
// way. between runs after an entry's lstat and before its directory is
// opened by path: where the swap lands (filepath.Walk offers no hook
// there, so this is its loop written out). It returns the paths it met,
// relative to upper. It is the positive control that a swap there is live.
func byPathWalk(upper string, between func(rel string)) []string {
	var out []string
	var walk func(rel string)
	walk = func(rel string) {
		f, err := os.Open(filepath.Join(upper, rel))
		if err != nil {
			return
		}
		names, _ := f.Readdirnames(-1)
		f.Close()
		slices.Sort(names)
		for _, n := range names {
			r := filepath.Join(rel, n)
			fi, err := os.Lstat(filepath.Join(upper, r))
			if err != nil {
				continue
			}
			out = append(out, r)
			if fi.IsDir() {
				between(r)
				walk(r)
			}
		}
	}
	walk(".")
	return out
}

// The attack, made deterministic: tmp/x/d (a directory) and
// tmp/x/l (a link to a root-only host directory) are exchanged
// (RENAME_EXCHANGE) between the walk's look at tmp/x/d and its open of it.
// The walk meets the link it now is as a link: no name of the host
// directory is a change, and tmp/x/d is recorded as what it is. Main's
// walk by path, given the same swap at the same moment, lists the host
// directory's names (the positive control).
func TestOverlayWalkMeetsASwappedDirectoryAsALink(t *testing.T) {
	host, marker := hostOnly(t)

	upperMain := t.TempDir()
	d, l := swapTree(t, upperMain, host)
	swapped := 0
	got := byPathWalk(upperMain, func(rel string) {
		if rel == "tmp/x/d" && swapped == 0 {
			if err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, l, unix.RENAME_EXCHANGE); err != nil {
				t.Fatal(err)
			}
			swapped++
		}
	})
	if swapped == 0 || !strings.Contains(strings.Join(got, "\n"), marker) {
		t.Fatalf("positive control: main's walk by path with the swap met no host name (swapped %d): %q", swapped, got)
	}
	t.Logf("positive control: main's walk by path listed %q", leaked(pathChanges(got), marker))

	upper := t.TempDir()
	d, l = swapTree(t, upper, host)
	swapped = 0
	hook(t, func(rel string) {
		if rel == "tmp/x/d" && swapped == 0 {
			if err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, l, unix.RENAME_EXCHANGE); err != nil {
				t.Error(err)
			}
			swapped++
		}
	})
	cs, err := walkDiff(context.Background(), upper, nil, defaultDiffLimits)
	if err != nil {
		t.Fatalf("diff: %v", err)
	}
	if swapped == 0 {
		t.Fatal("the hook never ran: the swap was not made")
	}
	if bad := leaked(cs, marker); len(bad) > 0 {
		t.Errorf("the walk followed the swapped link: %q", bad)
	}
	if !hasChange(cs, provider.ChangeAdded, "/tmp/x/d") || hasPrefix(cs, "/tmp/x/d/") {
		t.Errorf("tmp/x/d, a link since the swap, is not recorded as one entry: %v", cs)
	}
}

func pathChanges(rels []string) []provider.Change {
	var out []provider.Change
	for _, r := range rels {
		out = append(out, provider.Change{Path: "/" + r, Kind: provider.ChangeAdded})
	}
	return out
}

func hasChange(cs []provider.Change, kind, p string) bool {
	for _, c := range cs {
		if c.Path == p && c.Kind == kind {
			return true
		}
	}
	return false
}

func hasPrefix(cs []provider.Change, pre string) bool {
	for _, c := range cs {
		if strings.HasPrefix(c.Path, pre) {
			return true
		}
	}
	return false
}

// The red team's swapper as it ran, a process of its own exchanging the
// two names as fast as it can, while the host reads the upper dir again
// and again: no read lists a name of the host directory. Positive
// control: the swapper swapped while the diffs ran (its count grew from
// the first to the last). On main a read listed one within a few tries.
func TestOverlayWalkWithALiveSwapper(t *testing.T) {
	host, marker := hostOnly(t)
	upper := t.TempDir()
	d, l := swapTree(t, upper, host)
	var swaps atomic.Int64
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, l, unix.RENAME_EXCHANGE); err != nil {
				done <- err
				return
			}
			swaps.Add(1)
		}
	}()
	var first, last int64
	read, failed := 0, 0
	for try := range 1000 {
		if try == 0 {
			first = swaps.Load()
		}
		cs, err := walkDiff(context.Background(), upper, nil, defaultDiffLimits)
		last = swaps.Load()
		if err != nil {
			// A swap at every look of an entry fails the diff: never a
			// host name, never a pass.
			if strings.Contains(err.Error(), marker) {
				t.Fatalf("try %d: the diff's error names the host directory: %v", try, err)
			}
			failed++
			continue
		}
		read++
		if bad := leaked(cs, marker); len(bad) > 0 {
			t.Fatalf("try %d (%d swaps so far): the walk followed a swapped link: %q", try, last, bad)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("the swapper: %v", err)
	}
	if last <= first {
		t.Fatalf("positive control: the swapper did not swap while the diffs ran (%d, then %d)", first, last)
	}
	if read == 0 {
		t.Fatalf("positive control: no diff was read (%d failed)", failed)
	}
	t.Logf("positive control: %d swaps while the diffs ran; %d diffs read, %d failed on a swap", last-first, read, failed)
}

// A walk whose context ends stops there: it reads no entry after, and its
// answer is the context's error, never a partial list. A context already
// ended reads nothing.
func TestOverlayWalkStopsWithItsContext(t *testing.T) {
	upper := t.TempDir()
	for i := range 50 {
		if err := os.MkdirAll(filepath.Join(upper, fmt.Sprintf("d%02d/e", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen, after := 0, 0
	hook(t, func(string) {
		if ctx.Err() != nil {
			after++
			return
		}
		if seen++; seen == 5 {
			cancel()
		}
	})
	cs, err := walkDiff(ctx, upper, nil, defaultDiffLimits)
	if !errors.Is(err, context.Canceled) || cs != nil {
		t.Fatalf("diff after its context ended: %d changes, %v; want none and context.Canceled", len(cs), err)
	}
	if seen != 5 || after != 0 {
		t.Errorf("the walk opened %d directories before the cancel and %d after; want 5 and 0", seen, after)
	}
	// Positive control: the same tree with a live context is read whole.
	confine.StepHook = nil
	if cs, err := walkDiff(context.Background(), upper, nil, defaultDiffLimits); err != nil || len(cs) != 100 {
		t.Fatalf("positive control: the tree holds %d changes (%v), want 100", len(cs), err)
	}
	ended, cancel2 := context.WithCancel(context.Background())
	cancel2()
	opened := 0
	hook(t, func(string) { opened++ })
	if _, err := walkDiff(ended, upper, nil, defaultDiffLimits); !errors.Is(err, context.Canceled) || opened != 0 {
		t.Errorf("a diff with an ended context: %v, %d directories opened; want context.Canceled and none", err, opened)
	}
}

// A diff past any of its bounds (entries walked, a path's length, changes
// kept, the bytes of their paths) is ErrDiffTooLarge, never a partial
// list; the same tree within the bounds is read whole.
func TestOverlayWalkIsBounded(t *testing.T) {
	upper := t.TempDir()
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(upper, fmt.Sprintf("f%02d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	deep := filepath.Join(upper, strings.Repeat("n", 200), strings.Repeat("n", 200))
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	cs, err := walkDiff(context.Background(), upper, nil, defaultDiffLimits)
	if err != nil || len(cs) != 22 {
		t.Fatalf("positive control: %d changes (%v), want 22", len(cs), err)
	}
	for name, lim := range map[string]diffLimits{
		"entries":    {walk: confine.WalkLimits{Entries: 10}, changes: 100, pathBytes: 1 << 20},
		"path":       {walk: confine.WalkLimits{PathBytes: 300}, changes: 100, pathBytes: 1 << 20},
		"changes":    {changes: 10, pathBytes: 1 << 20},
		"path bytes": {changes: 100, pathBytes: 500},
	} {
		cs, err := walkDiff(context.Background(), upper, nil, lim)
		if !errors.Is(err, ErrDiffTooLarge) || cs != nil {
			t.Errorf("%s: %d changes, %v; want none and ErrDiffTooLarge", name, len(cs), err)
		}
	}
	// The engine's diff is held to the same bounds.
	engine := func(context.Context) ([]provider.Change, error) { return cs, nil }
	if _, _, err := changesOf(context.Background(), types.ContainerJSON{}, diffLimits{changes: 10, pathBytes: 1 << 20}, engine); !errors.Is(err, ErrDiffTooLarge) {
		t.Errorf("the engine's diff of 22 changes, at most 10 kept: %v; want ErrDiffTooLarge", err)
	}
	if got, how, err := changesOf(context.Background(), types.ContainerJSON{}, defaultDiffLimits, engine); err != nil || how != DiffEngine || len(got) != 22 {
		t.Errorf("positive control: the engine's diff within the bounds: %d changes by %q, %v", len(got), how, err)
	}
}

// localHere is a container whose overlay is this host's: this process
// stands in for its pid 1 (root "/"), upper is its upper dir.
func localHere(upper string) types.ContainerJSON {
	return types.ContainerJSON{ContainerJSONBase: &types.ContainerJSONBase{
		State:       &types.ContainerState{Running: true, Pid: os.Getpid()},
		GraphDriver: types.GraphDriverData{Name: "overlay2", Data: map[string]string{"UpperDir": upper, "MergedDir": "/"}},
	}}
}

// When the upper dir can be walked, its walk is the only diff: a walk that
// fails (here past its bounds, as a harness can make it) is the diff's
// error, and the engine, whose walk is by path, is never asked in its
// place. Where the upper dir cannot be opened the engine is asked (the
// positive control that the engine is reachable from here).
func TestUpperDirWalkHasNoEngineFallback(t *testing.T) {
	upper := t.TempDir()
	for i := range 20 {
		os.WriteFile(filepath.Join(upper, fmt.Sprintf("f%02d", i)), nil, 0o644)
	}
	asked := 0
	engine := func(context.Context) ([]provider.Change, error) {
		asked++
		return nil, nil
	}
	lim := diffLimits{walk: confine.WalkLimits{Entries: 10}, changes: 100, pathBytes: 1 << 20}
	cs, how, err := changesOf(context.Background(), localHere(upper), lim, engine)
	if !errors.Is(err, ErrDiffTooLarge) || cs != nil || asked != 0 {
		t.Errorf("a walk past its bounds: %d changes by %q, %v, the engine asked %d times; want ErrDiffTooLarge and no engine", len(cs), how, err, asked)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := changesOf(ctx, localHere(upper), defaultDiffLimits, engine); !errors.Is(err, context.Canceled) || asked != 0 {
		t.Errorf("a walk whose context ended: %v, the engine asked %d times; want context.Canceled and no engine", err, asked)
	}
	if cs, how, err := changesOf(context.Background(), localHere(upper), defaultDiffLimits, engine); err != nil || how != DiffUpperDir || len(cs) != 20 {
		t.Errorf("positive control: the walk within its bounds: %d changes by %q, %v", len(cs), how, err)
	}
	file := filepath.Join(upper, "f00") // localOverlay holds only for a directory
	_, how, err = changesOf(context.Background(), localHere(file), defaultDiffLimits, engine)
	if err != nil || how != DiffEngine || asked != 1 {
		t.Errorf("positive control: no upper dir to walk: read by %q, %v, the engine asked %d times; want once", how, err, asked)
	}
}

// fakeDiffAPI records the engine calls of a frozen diff, and whether an
// exec could have been made during the diff. The container is c; its one
// exec (when c lists it) has started once it was asked about starting
// times. A container whose state says paused answers every pause "is
// already paused"; stalePause and staleUnpause are how many pauses and
// unpauses first answer as a late event's flag makes the engine answer.
type fakeDiffAPI struct {
	sb           *Sandbox
	c            types.ContainerJSON
	starting     int
	calls        []string
	pauseErr     error
	stalePause   int
	staleUnpause int
	execDuring   bool
}

func (f *fakeDiffAPI) ContainerInspect(context.Context, string) (types.ContainerJSON, error) {
	f.calls = append(f.calls, "inspect")
	return f.c, nil
}

func (f *fakeDiffAPI) ContainerExecInspect(context.Context, string) (container.ExecInspect, error) {
	f.calls = append(f.calls, "exec")
	if f.starting > 0 {
		f.starting--
		return container.ExecInspect{Running: true}, nil
	}
	return container.ExecInspect{Running: true, Pid: 42}, nil
}

func (f *fakeDiffAPI) ContainerPause(context.Context, string) error {
	f.calls = append(f.calls, "pause")
	if f.c.State.Paused || f.stalePause > 0 {
		f.stalePause--
		return errors.New("Error response from daemon: Container c1 is already paused")
	}
	return f.pauseErr
}

func (f *fakeDiffAPI) ContainerUnpause(context.Context, string) error {
	f.calls = append(f.calls, "unpause")
	if f.staleUnpause > 0 {
		f.staleUnpause--
		return errors.New("Error response from daemon: Container c1 is not paused")
	}
	return nil
}

func (f *fakeDiffAPI) ContainerDiff(context.Context, string) ([]container.FilesystemChange, error) {
	f.calls = append(f.calls, "diff")
	if f.sb.gate.TryRLock() {
		f.execDuring = true
		f.sb.gate.RUnlock()
	}
	return []container.FilesystemChange{{Kind: container.ChangeAdd, Path: "/x"}}, nil
}

// The engine's diff walks by path, so it is read only with the container
// frozen: pause, diff, unpause, with no exec made meanwhile, and the
// pause only once an exec the engine was asked to start has started (its
// pid; the engine answers the start before it makes the process, and
// fails one made while frozen); a container not running is read as it is
// (nothing in it runs); an engine that will not freeze it gives no diff,
// and one that keeps saying it is already paused is not read on its word.
// A pause or unpause the engine refuses on a stale paused flag (a late
// event's, pausedflag.go) is asked again.
func TestEngineDiffIsReadFrozen(t *testing.T) {
	defer func(b time.Duration) { staleFlagBound = b }(staleFlagBound)
	staleFlagBound = 50 * time.Millisecond
	state := func(running, paused bool, execs ...string) types.ContainerJSON {
		return types.ContainerJSON{ContainerJSONBase: &types.ContainerJSONBase{State: &types.ContainerState{Running: running, Paused: paused}, ExecIDs: execs}}
	}
	for _, tc := range []struct {
		name                     string
		c                        types.ContainerJSON
		starting                 int
		stalePause, staleUnpause int
		want                     string
		pause                    error
	}{
		{"running", state(true, false), 0, 0, 0, "inspect pause diff unpause", nil},
		{"an exec running", state(true, false, "e1"), 0, 0, 0, "inspect exec pause diff unpause", nil},
		{"an exec starting", state(true, false, "e1"), 2, 0, 0, "inspect exec inspect exec inspect exec pause diff unpause", nil},
		{"a stale paused flag", state(true, false), 0, 2, 0, "inspect pause pause pause diff unpause", nil},
		{"a stale thawed flag", state(true, false), 0, 0, 3, "inspect pause diff unpause unpause unpause unpause", nil},
		{"stopped", state(false, false), 0, 0, 0, "inspect diff", nil},
		{"no freezer", state(true, false), 0, 0, 0, "inspect pause", errors.New("cgroups: freezer not supported")},
		{"paused, and the engine keeps saying so", state(true, true), 0, 0, 0, "inspect pause pause", errors.New("is already paused")},
	} {
		sb := &Sandbox{id: "c1"}
		api := &fakeDiffAPI{sb: sb, c: tc.c, starting: tc.starting, pauseErr: tc.pause, stalePause: tc.stalePause, staleUnpause: tc.staleUnpause}
		cs, err := sb.frozenEngineChanges(context.Background(), api)
		got := strings.Join(api.calls, " ")
		if strings.HasSuffix(tc.name, "keeps saying so") {
			// Asked again until the bound: how many times is the clock's.
			if !strings.HasPrefix(got, tc.want) || strings.Contains(got, "diff") {
				t.Errorf("%s: engine calls %q, want %q and more pauses, no diff", tc.name, got, tc.want)
			}
		} else if got != tc.want {
			t.Errorf("%s: engine calls %q, want %q", tc.name, got, tc.want)
		}
		if api.execDuring {
			t.Errorf("%s: an exec could be made while the engine read the diff", tc.name)
		}
		if tc.pause != nil {
			if err == nil || cs != nil {
				t.Errorf("%s: %v, %v; want no diff and an error", tc.name, cs, err)
			}
			continue
		}
		if err != nil || len(cs) != 1 {
			t.Errorf("%s: %v, %v; want the engine's one change", tc.name, cs, err)
		}
	}
	// Positive control: outside a frozen diff an exec may be made.
	sb := &Sandbox{}
	if !sb.gate.TryRLock() {
		t.Fatal("positive control: the exec gate is held with no diff running")
	}
	sb.gate.RUnlock()
}

// The walk reports what the engine's full-tree diff reports, with every
// lookup in the lower dirs made following no link: an added file, a
// modified one (mode), a whiteout, an opaque directory and what it hid,
// and, where a lower dir holds a link (lnk to a host dir, lnk2 to a host
// file, lnk3 to a host dir), the upper dir's lnk/marker is added, its
// file lnk2 and its directory lnk3 modified (over a link), none compared
// with what a link leads to on the host (the same bytes, mode and times:
// by path, no change). Needs root (a whiteout is a 0:0 character device, opacity a
// trusted.* attribute).
func TestOverlayWalkSemantics(t *testing.T) {
	upper, lower := t.TempDir(), t.TempDir()
	host := t.TempDir()
	mk := func(dir, p, what string) {
		t.Helper()
		full := filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		var err error
		switch what {
		case "dir":
			err = os.MkdirAll(full, 0o755)
		case "whiteout":
			err = unix.Mknod(full, unix.S_IFCHR|0o000, 0)
		default:
			err = os.WriteFile(full, []byte(what), 0o644)
		}
		if err != nil {
			testenv.Missing(t, fmt.Sprintf("make %s %s: %v", what, p, err), "run the tests as root")
		}
	}
	mk(host, "marker", "host")
	mk(host, "d", "dir")
	mk(lower, "etc/keep", "k")
	mk(lower, "etc/mode", "m")
	mk(lower, "etc/gone", "g")
	mk(lower, "srv/opq/one", "1")
	mk(lower, "srv/opq/two", "2")
	for link, target := range map[string]string{"lnk": host, "lnk2": filepath.Join(host, "marker"), "lnk3": filepath.Join(host, "d")} {
		if err := os.Symlink(target, filepath.Join(lower, link)); err != nil {
			t.Fatal(err)
		}
	}
	mk(upper, "etc/new", "n")
	mk(upper, "etc/mode", "m")
	os.Chmod(filepath.Join(upper, "etc/mode"), 0o600)
	mk(upper, "etc/gone", "whiteout")
	mk(upper, "srv/opq/two", "2 again")
	if err := unix.Setxattr(filepath.Join(upper, "srv/opq"), "trusted.overlay.opaque", []byte("y"), 0); err != nil {
		testenv.Missing(t, fmt.Sprintf("set trusted.overlay.opaque: %v", err), "run the tests as root on a filesystem with trusted.* attributes")
	}
	// The host's file the lower link leads to, copied with its times: by
	// path the upper's lnk/marker would be the same file, unchanged.
	mk(upper, "lnk/marker", "host")
	mk(upper, "lnk2", "host")
	mk(upper, "lnk3", "dir")
	fi, _ := os.Stat(filepath.Join(host, "marker"))
	for _, p := range []string{"lnk/marker", "lnk2"} {
		os.Chtimes(filepath.Join(upper, p), fi.ModTime(), fi.ModTime())
	}
	for _, d := range []string{"etc", "srv", "srv/opq", "lnk", "lnk3", filepath.Join(host, "d")} {
		if !filepath.IsAbs(d) {
			d = filepath.Join(upper, d)
		}
		os.Chmod(d, 0o755)
	}
	cs, err := walkDiff(context.Background(), upper, []string{lower}, defaultDiffLimits)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.Kind+" "+c.Path)
	}
	want := []string{"C /etc", "D /etc/gone", "C /etc/mode", "A /etc/new", "C /lnk", "A /lnk/marker", "C /lnk2", "C /lnk3", "C /srv", "C /srv/opq", "D /srv/opq/one", "C /srv/opq/two"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("diff:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// gateCheck is an engine transport that, at each request, notes whether
// the exec gate was free to freeze the container: it must not be while an
// exec is being made.
type gateCheck struct {
	sb       *Sandbox
	requests int
	free     int
}

func (g *gateCheck) RoundTrip(*http.Request) (*http.Response, error) {
	g.requests++
	if g.sb.gate.TryLock() {
		g.free++
		g.sb.gate.Unlock()
	}
	return nil, errors.New("no engine here")
}

// An exec is made under the gate a frozen diff takes: while the exec is
// being created and started, the engine's diff cannot freeze the
// container (an exec the engine is asked for while it is frozen is
// refused). The request is answered with an error; it is its moment that
// counts.
func TestExecWaitsForAFrozenDiff(t *testing.T) {
	sb := &Sandbox{id: "c1"}
	g := &gateCheck{sb: sb}
	c, err := client.NewClientWithOpts(client.WithHost("http://engine.invalid"), client.WithHTTPClient(&http.Client{Transport: g}), client.WithVersion("1.41"))
	if err != nil {
		t.Fatal(err)
	}
	sb.client = c
	if _, err := sb.Exec(context.Background(), provider.ExecSpec{Argv: []string{"true"}}); err == nil {
		t.Fatal("an exec with no engine succeeded")
	}
	if g.requests == 0 {
		t.Fatal("positive control: the exec asked the engine nothing")
	}
	if g.free > 0 {
		t.Errorf("%d of %d exec requests were made with the gate free: a frozen diff could start under them", g.free, g.requests)
	}
}
