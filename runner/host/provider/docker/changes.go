package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"golang.org/x/sys/unix"

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
// remote engine, another storage driver, a stopped container) asks the
// engine. A test shows both paths give the same list.
func (s *Sandbox) Changes(ctx context.Context) ([]provider.Change, string, error) {
	c, err := s.client.ContainerInspect(ctx, s.id)
	if err != nil {
		return nil, "", s.transport("diff", err)
	}
	if upper, lowers, ok := localOverlay(c); ok {
		changes, err := overlayChanges(upper, lowers)
		if err == nil {
			return changes, DiffUpperDir, nil
		}
		// An unreadable upper dir is not a verdict: the engine decides.
	}
	changes, err := s.EngineChanges(ctx)
	if err != nil {
		return nil, "", err
	}
	return changes, DiffEngine, nil
}

// EngineChanges is the engine's diff alone (the general path of Changes),
// sorted by SortChanges.
func (s *Sandbox) EngineChanges(ctx context.Context) ([]provider.Change, error) {
	cs, err := s.client.ContainerDiff(ctx, s.id)
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

// overlayChanges walks an overlay upper dir and reports what the engine's
// full-tree ("naive") diff reports, the one engines fall back to and the
// one that reads every change whatever the overlay options:
//   - a whiteout (a 0:0 character device) is a deletion;
//   - an entry no lower layer has is an addition;
//   - an entry a lower layer has is a modification when its type, mode,
//     owner, device or file capabilities differ, or, for a non-directory,
//     its size or mtime;
//   - an opaque directory (one removed and made again) is compared the
//     same way, and each entry of the hidden one that it lacks is a
//     deletion (the native overlay diff would call the directory deleted);
//   - every directory (but /) holding a change is a modification.
func overlayChanges(upper string, lowers []string) ([]provider.Change, error) {
	kinds := map[string]string{}
	err := filepath.Walk(upper, func(hostPath string, f fs.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(upper, hostPath)
		if err != nil {
			return err
		}
		p := path.Join("/", filepath.ToSlash(rel))
		if p == "/" {
			return nil
		}
		if isWhiteout(f) {
			kinds[p] = provider.ChangeDeleted
			return nil
		}
		st, layer, err := inLower(lowers, p)
		if err != nil {
			return err
		}
		if layer == "" {
			kinds[p] = provider.ChangeAdded
			return nil
		}
		if f.IsDir() && st.IsDir() {
			if opaque, err := isOpaque(hostPath, f); err != nil {
				return err
			} else if opaque {
				hidden, err := hiddenEntries(hostPath, lowers, p)
				if err != nil {
					return err
				}
				for _, h := range hidden {
					kinds[h] = provider.ChangeDeleted
				}
			}
		}
		changed, err := modified(hostPath, f, filepath.Join(layer, p), st)
		if err != nil {
			return err
		}
		if changed {
			kinds[p] = provider.ChangeModified
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read overlay upper dir %q: %w", upper, err)
	}
	for p := range kinds {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := kinds[d]; ok {
				break
			}
			kinds[d] = provider.ChangeModified
		}
	}
	changes := make([]provider.Change, 0, len(kinds))
	for p, k := range kinds {
		changes = append(changes, provider.Change{Path: p, Kind: k})
	}
	SortChanges(changes)
	return changes, nil
}

// modified compares an upper entry with the lower one it covers, as the
// full-tree diff compares them.
func modified(upperPath string, f fs.FileInfo, lowerPath string, l fs.FileInfo) (bool, error) {
	a, ok1 := f.Sys().(*syscall.Stat_t)
	b, ok2 := l.Sys().(*syscall.Stat_t)
	if !ok1 || !ok2 {
		return true, nil
	}
	if a.Mode != b.Mode || a.Uid != b.Uid || a.Gid != b.Gid || a.Rdev != b.Rdev {
		return true, nil
	}
	if !f.IsDir() && (a.Size != b.Size || !sameTimespec(a.Mtim, b.Mtim)) {
		return true, nil
	}
	ca, err := capability(upperPath)
	if err != nil {
		return false, err
	}
	cb, err := capability(lowerPath)
	if err != nil {
		return false, err
	}
	return ca != cb, nil
}

// capability reads a file's security.capability attribute ("" if none).
func capability(p string) (string, error) {
	buf := make([]byte, 128)
	n, err := unix.Lgetxattr(p, "security.capability", buf)
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
func sameTimespec(a, b syscall.Timespec) bool {
	return a.Sec == b.Sec && (a.Nsec == b.Nsec || a.Nsec == 0 || b.Nsec == 0)
}

// inLower looks a path up in the lower layers, top first, and returns
// what it is and the layer that shows it ("" when none does, a whiteout
// included).
func inLower(lowers []string, p string) (fs.FileInfo, string, error) {
	for _, l := range lowers {
		fi, err := os.Lstat(filepath.Join(l, p))
		switch {
		case err == nil && isWhiteout(fi):
			return nil, "", nil
		case err == nil:
			return fi, l, nil
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTDIR):
			return nil, "", err
		}
	}
	return nil, "", nil
}

// hiddenEntries lists, as sandbox paths, the entries the lower layers show
// under dir p that the opaque upper dir at hostPath lacks.
func hiddenEntries(hostPath string, lowers []string, p string) ([]string, error) {
	seen := map[string]bool{} // name -> visible in the lower view
	for _, l := range lowers {
		d := filepath.Join(l, p)
		ents, err := os.ReadDir(d)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if _, ok := seen[e.Name()]; ok {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				return nil, err
			}
			seen[e.Name()] = !isWhiteout(fi)
		}
		fi, err := os.Lstat(d)
		if err != nil {
			return nil, err
		}
		if opaque, err := isOpaque(d, fi); err != nil {
			return nil, err
		} else if opaque {
			break
		}
	}
	var out []string
	for name, visible := range seen {
		if !visible {
			continue
		}
		if _, err := os.Lstat(filepath.Join(hostPath, name)); errors.Is(err, fs.ErrNotExist) {
			out = append(out, path.Join(p, name))
		} else if err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}

// isWhiteout reports whether an overlay entry marks a deletion.
func isWhiteout(f fs.FileInfo) bool {
	if f.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	st, ok := f.Sys().(*syscall.Stat_t)
	return ok && unix.Major(uint64(st.Rdev)) == 0 && unix.Minor(uint64(st.Rdev)) == 0
}

// isOpaque reports whether an overlay directory hides the ones below it.
func isOpaque(hostPath string, f fs.FileInfo) (bool, error) {
	if !f.IsDir() {
		return false, nil
	}
	for _, attr := range []string{"trusted.overlay.opaque", "user.overlay.opaque"} {
		buf := make([]byte, 8)
		n, err := unix.Lgetxattr(hostPath, attr, buf)
		if err == nil && n == 1 && buf[0] == 'y' {
			return true, nil
		}
		if err != nil && !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.ENOTSUP) {
			return false, fmt.Errorf("read %s of %q: %w", attr, hostPath, err)
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
