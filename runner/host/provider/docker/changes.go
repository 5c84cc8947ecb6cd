package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/errdefs"
	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/runner/confine"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// How Changes read the filesystem diff.
const (
	// DiffUpperDir: read from the container's overlay2 upper dir on this
	// host (what the engine's native overlay diff reads), reported as the
	// engine's full-tree diff reports it.
	DiffUpperDir = "overlay upper dir"
	// DiffEngine: asked from the engine (`docker diff`).
	DiffEngine = "engine"
)

// ErrDiffTooLarge is a filesystem diff past its bounds (diffLimits): what
// was read is not an answer, and the diff is an error, never a partial
// list.
var ErrDiffTooLarge = errors.New("filesystem diff larger than the owner reads")

// diffLimits bound a diff, read either way: the walk of the upper dir
// (entries read, the length of a path; confine.Walk) and what a diff
// keeps (changes, the bytes of their paths), so neither the owner's time
// nor its memory grows with what the harness made.
type diffLimits struct {
	walk      confine.WalkLimits
	changes   int
	pathBytes int
}

// defaultDiffLimits are far above what a harness's install leaves (an npm
// tree of tens of thousands of files) and far below what holds the
// owner's memory: at most 32 MiB of paths kept.
var defaultDiffLimits = diffLimits{
	walk:      confine.WalkLimits{Entries: 500_000, PathBytes: unix.PathMax},
	changes:   500_000,
	pathBytes: 32 << 20,
}

// Changes returns the container's filesystem changes against its image,
// like `docker diff`, and says how it read them (provider.Differ).
//
// The engine's own diff (ContainerDiff) is the general path. It can cost
// half a second per container: some engines fall back to the "naive" diff,
// which walks the whole image and the container's merged tree side by
// side, and it holds the container's lock meanwhile, so every other
// request for the container waits behind it. When the engine runs on this
// host with overlay2, the changes are all in the container's upper dir,
// and reading it directly costs a few milliseconds. That is only done once
// the upper dir is proved to be this container's (its merged dir is the
// root of the container's pid 1 as this host sees it); anything else (a
// remote engine, another storage driver, a stopped container, a host
// process that may not read the engine's dirs) asks the engine. A test
// shows both paths give the same list.
//
// Both walk a tree the harness wrote, as root, and a process of the
// harness still alive could swap a directory for a link while they do
// (issue 35, class A). The upper dir is read by descriptors only
// (confine.Walk, overlayChanges): a swapped link is met as a link. The
// engine's walk is by path (it followed such a link into the engine's
// host, listing a root-only directory's names as changes), so it is only
// asked with the sandbox frozen (frozenEngineChanges), and never as a
// second try after the upper dir's walk failed: a walk the harness made
// fail (too large, a swap at every look, the owner's deadline) fails the
// diff.
func (s *Sandbox) Changes(ctx context.Context) ([]provider.Change, string, error) {
	c, err := s.client.ContainerInspect(ctx, s.id)
	if err != nil {
		return nil, "", s.transport("diff", err)
	}
	return changesOf(ctx, c, defaultDiffLimits, func(ctx context.Context) ([]provider.Change, error) {
		return s.frozenEngineChanges(ctx, s.client)
	})
}

// changesOf is Changes for the container c: the upper dir's walk when c's
// overlay is this host's and its upper dir opens, else engine's diff
// (engine). The walk's error is the diff's: the engine is not asked in its
// place.
func changesOf(ctx context.Context, c types.ContainerJSON, lim diffLimits, engine func(context.Context) ([]provider.Change, error)) ([]provider.Change, string, error) {
	if upper, lowers, ok := localOverlay(c); ok {
		if top, err := openUpper(upper); err == nil {
			changes, err := overlayChanges(ctx, top, upper, lowers, lim)
			if err != nil {
				return nil, "", err
			}
			return changes, DiffUpperDir, nil
		}
		// An upper dir this process may not open (not root) was never
		// walked: the engine reads it.
	}
	changes, err := engine(ctx)
	if err != nil {
		return nil, "", err
	}
	if err := lim.check(changes); err != nil {
		return nil, "", fmt.Errorf("read the engine's diff: %w", err)
	}
	return changes, DiffEngine, nil
}

// check holds the engine's diff to the bounds of what a diff keeps, as
// the upper dir's walk is held (upperDiff.keep), so the verdict does not
// depend on which way the diff was read.
func (lim diffLimits) check(changes []provider.Change) error {
	if len(changes) > lim.changes {
		return fmt.Errorf("%w: %d changes, over %d", ErrDiffTooLarge, len(changes), lim.changes)
	}
	total := 0
	for _, c := range changes {
		if total += len(c.Path); total > lim.pathBytes {
			return fmt.Errorf("%w: the changes' paths hold over %d bytes", ErrDiffTooLarge, lim.pathBytes)
		}
	}
	return nil
}

// openUpper opens the upper dir the engine named (its own path, nothing
// the harness wrote is above it), following no link at its last
// component.
func openUpper(upper string) (int, error) {
	fd, err := unix.Open(upper, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the overlay upper dir %q: %w", upper, err)
	}
	return fd, nil
}

// diffAPI is what the engine's diff needs of the engine's client.
type diffAPI interface {
	ContainerInspect(ctx context.Context, id string) (types.ContainerJSON, error)
	ContainerExecInspect(ctx context.Context, id string) (container.ExecInspect, error)
	ContainerPause(ctx context.Context, id string) error
	ContainerUnpause(ctx context.Context, id string) error
	ContainerDiff(ctx context.Context, id string) ([]container.FilesystemChange, error)
}

// unpauseTimeout bounds the thaw after a frozen diff, which runs whatever
// the diff's context says (a sandbox left frozen fails every exec after).
const unpauseTimeout = 30 * time.Second

// execSettle is how long a frozen diff waits before it asks again whether
// an exec it found starting has started.
const execSettle = 5 * time.Millisecond

// frozenEngineChanges is the engine's diff of the container, read while
// the container is frozen (`docker pause`: the cgroup freezer stops every
// process in it, so nothing of the harness can swap a directory for a
// link during the engine's walk, which is by path). One that does not run
// has no process to swap anything. A container the engine says is already
// paused is asked again past a stale flag (pausedflag.go); if the engine
// keeps saying so, that is its refusal. The engine's refusal to freeze it is an error:
// a diff that could be led outside the container is not read. No exec
// starts while the container is frozen (the engine would fail it, exit
// 126): new ones wait on Sandbox.gate, and the freeze waits for those
// already asked for to start (settledState).
func (s *Sandbox) frozenEngineChanges(ctx context.Context, api diffAPI) (_ []provider.Change, ferr error) {
	s.gate.Lock()
	defer s.gate.Unlock()
	st, err := s.settledState(ctx, api)
	if err != nil {
		return nil, err
	}
	if st != nil && st.Running {
		// Paused or not by the engine's flag, the pause is asked: the flag
		// may be a late event's (pausedflag.go), and a container the
		// engine keeps saying is paused is not read on its word.
		err := askPastStaleFlag(ctx, saysAlreadyPaused, func() error { return api.ContainerPause(ctx, s.id) })
		if err != nil {
			return nil, s.transport("diff", fmt.Errorf("freeze the sandbox for the engine's diff (its walk by path could be led through a link a process swaps in): %w", err))
		}
		defer func() {
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unpauseTimeout)
			defer cancel()
			err := askPastStaleFlag(uctx, saysNotPaused, func() error { return api.ContainerUnpause(uctx, s.id) })
			if err != nil && ferr == nil {
				ferr = s.transport("diff", fmt.Errorf("thaw the sandbox after the engine's diff: %w", err))
			}
		}()
	}
	return s.engineChanges(ctx, api)
}

// settledState returns the container's state once every exec of it has
// started or failed to: the engine answers an exec's start request before
// it makes the process (so an exec this sandbox just made may still be
// starting), and one made while the container is frozen fails. An exec
// not started yet has no pid and no exit code.
func (s *Sandbox) settledState(ctx context.Context, api diffAPI) (*types.ContainerState, error) {
	for {
		c, err := api.ContainerInspect(ctx, s.id)
		if err != nil {
			return nil, s.transport("diff", err)
		}
		pending := ""
		for _, id := range c.ExecIDs {
			ins, err := api.ContainerExecInspect(ctx, id)
			if errdefs.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, s.transport("diff", err)
			}
			if ins.Pid == 0 && ins.ExitCode == 0 {
				pending = id
				break
			}
		}
		if pending == "" {
			if c.ContainerJSONBase == nil {
				return nil, nil
			}
			return c.State, nil
		}
		t := time.NewTimer(execSettle)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, s.transport("diff", fmt.Errorf("wait for exec %s to start before freezing the sandbox: %w", shortID(pending), ctx.Err()))
		case <-t.C:
		}
	}
}

// EngineChanges is the engine's diff alone, as the engine reads it (not
// frozen: tests compare it with the upper dir's walk), sorted by
// SortChanges.
func (s *Sandbox) EngineChanges(ctx context.Context) ([]provider.Change, error) {
	return s.engineChanges(ctx, s.client)
}

func (s *Sandbox) engineChanges(ctx context.Context, api diffAPI) ([]provider.Change, error) {
	cs, err := api.ContainerDiff(ctx, s.id)
	if err != nil {
		return nil, s.transport("diff", err)
	}
	out := make([]provider.Change, 0, len(cs))
	for _, c := range cs {
		var kind string
		switch c.Kind {
		case container.ChangeAdd:
			kind = provider.ChangeAdded
		case container.ChangeModify:
			kind = provider.ChangeModified
		case container.ChangeDelete:
			kind = provider.ChangeDeleted
		default:
			return nil, provider.Errorf("diff", s.id, fmt.Errorf("engine diff: change kind %d of %q unknown", c.Kind, c.Path))
		}
		out = append(out, provider.Change{Path: c.Path, Kind: kind})
	}
	SortChanges(out)
	return out, nil
}

// localOverlay returns the container's overlay2 upper dir and lower dirs
// (top first) when they are this host's paths for this very container.
func localOverlay(c types.ContainerJSON) (upper string, lowers []string, ok bool) {
	if c.ContainerJSONBase == nil || c.State == nil {
		return "", nil, false
	}
	g := c.GraphDriver
	if g.Name != "overlay2" || !c.State.Running || c.State.Pid <= 0 {
		return "", nil, false
	}
	upper, merged, lower := g.Data["UpperDir"], g.Data["MergedDir"], g.Data["LowerDir"]
	if upper == "" || merged == "" {
		return "", nil, false
	}
	// The merged dir is the overlay's root; the container's pid 1 has that
	// same root when the engine's paths and pids are this host's.
	var root, m unix.Stat_t
	if unix.Stat("/proc/"+strconv.Itoa(c.State.Pid)+"/root", &root) != nil || unix.Stat(merged, &m) != nil {
		return "", nil, false
	}
	if root.Dev != m.Dev || root.Ino != m.Ino {
		return "", nil, false
	}
	if fi, err := os.Lstat(upper); err != nil || !fi.IsDir() {
		return "", nil, false
	}
	if lower != "" {
		lowers = strings.Split(lower, ":")
	}
	return upper, lowers, true
}

// overlayChanges walks an overlay upper dir (top, opened from the path
// upper; lowers are the lower dirs, top first) and reports what the
// engine's full-tree ("naive") diff reports, the one engines fall back to
// and the one that reads every change whatever the overlay options:
//   - a whiteout (a 0:0 character device) is a deletion;
//   - an entry no lower layer has is an addition;
//   - an entry a lower layer has is a modification when its type, mode,
//     owner, device or file capabilities differ, or, for a non-directory,
//     its size or mtime;
//   - an opaque directory (one removed and made again) is compared the
//     same way, and each entry of the hidden one that it lacks is a
//     deletion (the native overlay diff would call the directory deleted);
//   - every directory (but /) holding a change is a modification.
//
// The harness wrote the upper dir, and this runs as root on the host: it
// is read by descriptors only (confine.Walk: every entry relative to its
// parent's descriptor, never following a link, a directory swapped for a
// link met as the link), and so is every lookup in the lower dirs (each
// opened once, a path in it resolved following no link: lowerDirs). It is
// bounded by lim (ErrDiffTooLarge) and by ctx: it ends when ctx does. It
// closes top.
func overlayChanges(ctx context.Context, top int, upper string, lowers []string, lim diffLimits) ([]provider.Change, error) {
	defer unix.Close(top)
	ls, err := openLowers(lowers)
	if err != nil {
		return nil, err
	}
	defer ls.close()
	d := &upperDiff{lowers: ls, lim: lim, kinds: map[string]string{}}
	err = confine.Walk(ctx, top, lim.walk, d.entry)
	if errors.Is(err, confine.ErrTooManyEntries) || errors.Is(err, confine.ErrPathTooLong) || errors.Is(err, confine.ErrTooDeep) {
		err = fmt.Errorf("%w: %w", ErrDiffTooLarge, err)
	}
	if err != nil {
		return nil, fmt.Errorf("read overlay upper dir %q: %w", upper, err)
	}
	for p := range d.kinds {
		for dir := path.Dir(p); dir != "/"; dir = path.Dir(dir) {
			if _, ok := d.kinds[dir]; ok {
				break
			}
			if err := d.keep(dir, provider.ChangeModified); err != nil {
				return nil, fmt.Errorf("read overlay upper dir %q: %w", upper, err)
			}
		}
	}
	changes := make([]provider.Change, 0, len(d.kinds))
	for p, k := range d.kinds {
		changes = append(changes, provider.Change{Path: p, Kind: k})
	}
	SortChanges(changes)
	return changes, nil
}

// upperDiff is one walk of an upper dir: the lower dirs it compares with
// and the changes it keeps, within its bounds.
type upperDiff struct {
	lowers lowerDirs
	lim    diffLimits
	kinds  map[string]string // sandbox path -> provider.Change* kind
	bytes  int               // of the paths in kinds
}

// keep records p's change, within the bounds of what a diff keeps.
func (d *upperDiff) keep(p, kind string) error {
	if _, ok := d.kinds[p]; !ok {
		if len(d.kinds) >= d.lim.changes {
			return fmt.Errorf("%w: over %d changes", ErrDiffTooLarge, d.lim.changes)
		}
		if d.bytes += len(p); d.bytes > d.lim.pathBytes {
			return fmt.Errorf("%w: the changes' paths hold over %d bytes", ErrDiffTooLarge, d.lim.pathBytes)
		}
	}
	d.kinds[p] = kind
	return nil
}

// entry is one entry of the upper dir (confine.Walk's callback).
func (d *upperDiff) entry(e *confine.Entry) error {
	p := "/" + e.Rel
	if isWhiteout(&e.Stat) {
		return d.keep(p, provider.ChangeDeleted)
	}
	low, err := d.lowers.find(e.Rel)
	if err != nil {
		return err
	}
	if low == nil {
		return d.keep(p, provider.ChangeAdded)
	}
	defer unix.Close(low.dir)
	if e.IsDir() && isDir(&low.st) {
		opaque, err := isOpaque(e.FD, p)
		if err != nil {
			return err
		}
		if opaque {
			hidden, err := d.lowers.hidden(e.FD, e.Rel)
			if err != nil {
				return err
			}
			for _, h := range hidden {
				if err := d.keep(h, provider.ChangeDeleted); err != nil {
					return err
				}
			}
		}
	}
	changed, err := modified(e, low)
	if err != nil || !changed {
		return err
	}
	return d.keep(p, provider.ChangeModified)
}

// lowerEntry is an entry of a lower dir: its directory's descriptor
// (O_PATH, the caller's to close), its name there, what it is.
type lowerEntry struct {
	dir  int
	name string
	st   unix.Stat_t
}

// modified compares an upper entry with the lower one it covers, as the
// full-tree diff compares them.
func modified(e *confine.Entry, low *lowerEntry) (bool, error) {
	a, b := &e.Stat, &low.st
	if a.Mode != b.Mode || a.Uid != b.Uid || a.Gid != b.Gid || a.Rdev != b.Rdev {
		return true, nil
	}
	if !isDir(a) && (a.Size != b.Size || !sameTimespec(a.Mtim, b.Mtim)) {
		return true, nil
	}
	ca, err := capability(e.Dir, e.Name, a, "/"+e.Rel)
	if err != nil {
		return false, err
	}
	cb, err := capability(low.dir, low.name, b, "/"+e.Rel+" (lower)")
	if err != nil {
		return false, err
	}
	return ca != cb, nil
}

// capability reads the security.capability attribute ("" if none) of
// name in dir, whose stat is st: only a regular file holds one (the
// kernel refuses it on anything else), read through a descriptor opened
// relative to dir without following a link, and only if it is still the
// file st describes (one swapped since reads as changed: "?").
func capability(dir int, name string, st *unix.Stat_t, p string) (string, error) {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", nil
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENXIO) {
		return "?", nil
	}
	if err != nil {
		return "", fmt.Errorf("open %q for its security.capability: %w", p, err)
	}
	defer unix.Close(fd)
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil {
		return "", fmt.Errorf("stat %q: %w", p, err)
	}
	if now.Dev != st.Dev || now.Ino != st.Ino {
		return "?", nil
	}
	buf := make([]byte, 128)
	n, err := unix.Fgetxattr(fd, "security.capability", buf)
	switch {
	case err == nil:
		return string(buf[:n]), nil
	case errors.Is(err, unix.ENODATA), errors.Is(err, unix.ENOTSUP):
		return "", nil
	}
	return "", fmt.Errorf("read security.capability of %q: %w", p, err)
}

// sameTimespec treats times as equal when one side lost its nanoseconds
// (as tar does), like the engine.
func sameTimespec(a, b unix.Timespec) bool {
	return a.Sec == b.Sec && (a.Nsec == b.Nsec || a.Nsec == 0 || b.Nsec == 0)
}

// lowerDirs are the lower dirs' descriptors, top first, each opened once
// from the path the engine named.
type lowerDirs []int

func openLowers(lowers []string) (lowerDirs, error) {
	var ls lowerDirs
	for _, l := range lowers {
		fd, err := confine.OpenRoot(l)
		if err != nil {
			ls.close()
			return nil, fmt.Errorf("open a lower dir: %w", err)
		}
		ls = append(ls, fd)
	}
	return ls, nil
}

func (ls lowerDirs) close() {
	for _, fd := range ls {
		unix.Close(fd)
	}
}

// find looks rel up in the lower dirs, top first, following no link at
// any component (confine.OpenParent) and returns it (nil when none shows
// it). A layer where it is missing leaves the next to look; a layer where
// a component on the way is not a directory (a link, a file, a whiteout)
// or where it is a whiteout hides it from every layer below, as the
// overlay does.
func (ls lowerDirs) find(rel string) (*lowerEntry, error) {
	for _, l := range ls {
		dir, name, err := confine.OpenParent(l, rel)
		var link *confine.LinkError
		switch {
		case errors.Is(err, unix.ENOENT):
			continue
		case errors.As(err, &link) || errors.Is(err, unix.ENOTDIR):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("look up %q in a lower dir: %w", "/"+rel, err)
		}
		e := &lowerEntry{dir: dir, name: name}
		err = unix.Fstatat(dir, name, &e.st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case err == nil && isWhiteout(&e.st):
			unix.Close(dir)
			return nil, nil
		case err == nil:
			return e, nil
		case errors.Is(err, unix.ENOENT):
			unix.Close(dir)
			continue
		}
		unix.Close(dir)
		return nil, fmt.Errorf("look up %q in a lower dir: %w", "/"+rel, err)
	}
	return nil, nil
}

// hidden lists, as sandbox paths, the entries the lower dirs show under
// dir rel that the opaque upper dir (descriptor upperFD) lacks: each
// lower dir opened following no link, its names read and looked at
// relative to it, each looked for in the upper dir relative to upperFD.
func (ls lowerDirs) hidden(upperFD int, rel string) ([]string, error) {
	seen := map[string]bool{} // name -> visible in the lower view
	for _, l := range ls {
		fd, err := confine.OpenDir(l, rel)
		var link *confine.LinkError
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if errors.As(err, &link) || errors.Is(err, unix.ENOTDIR) {
			break // a non-directory here hides every layer below
		}
		if err != nil {
			return nil, fmt.Errorf("open %q in a lower dir: %w", "/"+rel, err)
		}
		opaque, err := lowerNames(fd, rel, seen)
		if err != nil {
			return nil, err
		}
		if opaque {
			break
		}
	}
	var out []string
	for name, visible := range seen {
		if !visible {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(upperFD, name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
			out = append(out, path.Join("/", rel, name))
		} else if err != nil {
			return nil, fmt.Errorf("stat %q: %w", path.Join("/", rel, name), err)
		}
	}
	slices.Sort(out)
	return out, nil
}

// lowerNames adds the names of the lower directory fd (rel) that seen
// lacks, visible unless a whiteout, and says whether the directory is
// opaque. It closes fd.
func lowerNames(fd int, rel string, seen map[string]bool) (bool, error) {
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	for {
		names, err := f.Readdirnames(256)
		for _, n := range names {
			if _, ok := seen[n]; ok {
				continue
			}
			var st unix.Stat_t
			if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return false, fmt.Errorf("stat %q in a lower dir: %w", path.Join("/", rel, n), err)
			}
			seen[n] = !isWhiteout(&st)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return false, fmt.Errorf("read %q in a lower dir: %w", "/"+rel, err)
		}
	}
	return isOpaque(fd, "/"+rel+" (lower)")
}

func isDir(st *unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFDIR }

// isWhiteout reports whether an overlay entry marks a deletion.
func isWhiteout(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && unix.Major(st.Rdev) == 0 && unix.Minor(st.Rdev) == 0
}

// isOpaque reports whether an overlay directory (its descriptor fd, p its
// path for messages) hides the ones below it.
func isOpaque(fd int, p string) (bool, error) {
	for _, attr := range []string{"trusted.overlay.opaque", "user.overlay.opaque"} {
		buf := make([]byte, 8)
		n, err := unix.Fgetxattr(fd, attr, buf)
		if err == nil && n == 1 && buf[0] == 'y' {
			return true, nil
		}
		if err != nil && !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.ENOTSUP) {
			return false, fmt.Errorf("read %s of %q: %w", attr, p, err)
		}
	}
	return false, nil
}

// SortChanges orders changes by path, then kind, for comparison.
func SortChanges(cs []provider.Change) {
	slices.SortFunc(cs, func(a, b provider.Change) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Kind, b.Kind)
	})
}
