package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/errdefs"

	"github.com/sandproof/sandproof/runner/host/provider"
)

// Volumes (provider.VolumeMaker).
//
// A volume is named volumePrefix+key and labelled LabelKey and
// LabelVolumeKey. It is filled once, from a tar stream of the host tree,
// through a helper container that mounts it and is created but never
// started (the engine unpacks archives into a stopped container's
// volumes). Volume knows no image to make that container from, so it uses
// HelperImage: an image with an empty root filesystem, imported once per
// engine from an empty tar (no registry needed), labelled sandproof. The
// fill ends with a marker entry (VolumeMarker, holding the key) at the
// volume's root: a volume without it is half-filled and is removed and
// filled again, never returned.
//
// Within a process, concurrent callers for one key share one fill. Across
// processes, a fill holds a lock: a container named volumeLockPrefix+key
// (names are unique per engine), created before and removed after the
// fill, carrying the owner labels; a lock whose owner died on this host
// is removed by the next caller (and by `sandproof clean`, like any
// sandbox of a dead owner).
const (
	volumePrefix     = "sandproof-vol-"
	volumeLockPrefix = "sandproof-vollock-"
	// LabelVolumeKey is the label holding a volume's key.
	LabelVolumeKey = "sandproof.volume.key"
	// VolumeMarker is the last entry a fill writes at the volume's root.
	VolumeMarker = ".sandproof-volume-complete"
	// HelperImage is the empty image the volume helpers are made from.
	HelperImage = "sandproof/volume-helper:1"
	// helperMount is where helpers mount the volume.
	helperMount = "/v"
)

// validKey: a key becomes part of volume and container names.
var validKey = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,99}$`)

// volumeFill is one fill of a key in this process; done closes when it
// ended, with err its outcome.
type volumeFill struct {
	done chan struct{}
	err  error
}

// Volume returns the name of the volume holding the host tree dir (see the
// comment on volumePrefix). Names found are remembered by the Provider.
func (p *Provider) Volume(ctx context.Context, key, dir string) (string, error) {
	if !validKey.MatchString(key) {
		return "", fmt.Errorf("volume: key %q: want 1-100 of [a-zA-Z0-9_.-], not starting with '.', '_' or '-'", key)
	}
	if fi, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("volume %q: %w", key, err)
	} else if !fi.IsDir() {
		return "", fmt.Errorf("volume %q: host path %q: not a directory", key, dir)
	}
	name := volumePrefix + key
	p.volMu.Lock()
	if p.vols == nil {
		p.vols = map[string]*volumeFill{}
	}
	f, shared := p.vols[key]
	if !shared {
		f = &volumeFill{done: make(chan struct{})}
		p.vols[key] = f
	}
	p.volMu.Unlock()
	if !shared {
		f.err = p.fillVolume(ctx, key, dir, name)
		if f.err != nil {
			// A failed fill is not remembered: the next call tries again.
			p.volMu.Lock()
			delete(p.vols, key)
			p.volMu.Unlock()
		}
		close(f.done)
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		return "", provider.Errorf("volume", "", ctx.Err())
	}
	if f.err != nil {
		return "", f.err
	}
	return name, nil
}

// fillVolume makes sure volume name is complete: found so, or (re)filled
// under the engine-wide lock.
func (p *Provider) fillVolume(ctx context.Context, key, dir, name string) error {
	img, err := p.helperImage(ctx)
	if err != nil {
		return err
	}
	for {
		if ok, err := p.volumeComplete(ctx, img, name, key); err != nil || ok {
			return err
		}
		unlock, err := p.lockVolume(ctx, img, key)
		if err != nil {
			return err
		}
		if unlock == nil {
			continue // another fill ended meanwhile: look again
		}
		err = p.refillVolume(ctx, img, key, dir, name)
		unlock()
		return err
	}
}

// helperImage returns HelperImage, importing it from an empty tar the
// first time on an engine.
func (p *Provider) helperImage(ctx context.Context) (string, error) {
	p.imgMu.Lock()
	defer p.imgMu.Unlock()
	if p.empty != "" {
		return p.empty, nil
	}
	if _, _, err := p.Client.ImageInspectWithRaw(ctx, HelperImage); err == nil {
		p.empty = HelperImage
		return p.empty, nil
	} else if !errdefs.IsNotFound(err) {
		return "", provider.Errorf("volume", "", fmt.Errorf("inspect image %q: %w", HelperImage, err))
	}
	var empty bytes.Buffer
	if err := tar.NewWriter(&empty).Close(); err != nil {
		return "", err
	}
	rc, err := p.Client.ImageImport(ctx, image.ImportSource{Source: &empty, SourceName: "-"}, HelperImage,
		image.ImportOptions{Changes: []string{"LABEL " + provider.LabelKey + "=1"}, Message: "sandproof: empty image for volume helpers"})
	if err != nil {
		return "", provider.Errorf("volume", "", fmt.Errorf("import the empty image %q: %w", HelperImage, err))
	}
	defer rc.Close()
	if err := jsonStreamErr(rc); err != nil {
		return "", provider.Errorf("volume", "", fmt.Errorf("import the empty image %q: %w", HelperImage, err))
	}
	p.empty = HelperImage
	return p.empty, nil
}

// jsonStreamErr reads an engine's JSON progress stream to its end and
// returns the error it reports, if any.
func jsonStreamErr(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Error       string
			ErrorDetail struct{ Message string } `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
	}
}

// helper creates a container from img that is never started, mounting the
// volume at helperMount (read-only when ro), with name ("" = the engine's
// choice) and the owner labels plus extra.
func (p *Provider) helper(ctx context.Context, img, name, vol string, ro bool, extra map[string]string) (string, error) {
	labels, err := Labels(extra)
	if err != nil {
		return "", err
	}
	hc := &container.HostConfig{NetworkMode: container.NetworkMode(provider.NetworkNone)}
	if vol != "" {
		hc.Mounts = []mount.Mount{{Type: mount.TypeVolume, Source: vol, Target: helperMount, ReadOnly: ro,
			VolumeOptions: &mount.VolumeOptions{NoCopy: true}}}
	}
	c, err := p.Client.ContainerCreate(ctx, &container.Config{
		Image: img,
		// Never run: an empty image has nothing to run anyway.
		Cmd:    []string{"/sandproof-volume-helper-never-started"},
		Labels: labels,
	}, hc, nil, nil, name)
	if err != nil {
		return "", err
	}
	return c.ID, nil
}

func (p *Provider) removeHelper(id string) {
	p.Client.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true})
}

// volumeComplete reports whether volume name exists with its marker
// holding key.
func (p *Provider) volumeComplete(ctx context.Context, img, name, key string) (bool, error) {
	if _, err := p.Client.VolumeInspect(ctx, name); errdefs.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, provider.Errorf("volume", "", fmt.Errorf("inspect volume %q: %w", name, err))
	}
	id, err := p.helper(ctx, img, "", name, true, map[string]string{LabelVolumeKey: key})
	if err != nil {
		return false, provider.Errorf("volume", "", fmt.Errorf("check volume %q: %w", name, err))
	}
	defer p.removeHelper(id)
	rc, _, err := p.Client.CopyFromContainer(ctx, id, helperMount+"/"+VolumeMarker)
	if errdefs.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, provider.Errorf("volume", id, fmt.Errorf("check volume %q: %w", name, err))
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	if _, err := tr.Next(); err != nil {
		return false, provider.Errorf("volume", id, fmt.Errorf("check volume %q: read marker: %w", name, err))
	}
	b, err := io.ReadAll(io.LimitReader(tr, 1<<10))
	if err != nil {
		return false, provider.Errorf("volume", id, fmt.Errorf("check volume %q: read marker: %w", name, err))
	}
	return string(b) == key, nil
}

// lockVolume takes the engine-wide lock of key. It returns nil and no
// error when it waited for another holder to let go (the caller looks at
// the volume again before trying).
func (p *Provider) lockVolume(ctx context.Context, img, key string) (func(), error) {
	name := volumeLockPrefix + key
	id, err := p.helper(ctx, img, name, "", false, map[string]string{LabelVolumeKey: key})
	if err == nil {
		return func() { p.removeHelper(id) }, nil
	}
	if !errdefs.IsConflict(err) {
		return nil, provider.Errorf("volume", "", fmt.Errorf("lock volume %q: %w", key, err))
	}
	// Held: wait for the holder to end, or remove a lock whose holder
	// died on this host (a dead process never lets go).
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := p.Client.ContainerInspect(ctx, name)
		if errdefs.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, provider.Errorf("volume", "", fmt.Errorf("lock volume %q: %w", key, err))
		}
		if c.Config != nil {
			if remove, _ := (provider.CleanScope{}).Judge(c.Config.Labels); remove {
				p.removeHelper(c.ID)
				return nil, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, provider.Errorf("volume", "", fmt.Errorf("lock volume %q: held by container %.12s: %w", key, c.ID, ctx.Err()))
		case <-tick.C:
		}
	}
}

// refillVolume (re)makes volume name from dir, under the lock.
func (p *Provider) refillVolume(ctx context.Context, img, key, dir, name string) error {
	if ok, err := p.volumeComplete(ctx, img, name, key); err != nil || ok {
		return err // filled by the holder we waited for
	}
	// A half-filled volume (its filler died) goes: no sandbox uses it,
	// since it was never returned, but another process's check (outside
	// the lock) may hold it for a moment.
	for tries := 0; ; tries++ {
		err := p.Client.VolumeRemove(ctx, name, false)
		if err == nil || errdefs.IsNotFound(err) {
			break
		}
		if !errdefs.IsConflict(err) || tries >= 100 {
			return provider.Errorf("volume", "", fmt.Errorf("remove half-filled volume %q: %w", name, err))
		}
		select {
		case <-ctx.Done():
			return provider.Errorf("volume", "", fmt.Errorf("remove half-filled volume %q: %w", name, ctx.Err()))
		case <-time.After(100 * time.Millisecond):
		}
	}
	p.fills.Add(1)
	if _, err := p.Client.VolumeCreate(ctx, volume.CreateOptions{Name: name,
		Labels: map[string]string{provider.LabelKey: "1", LabelVolumeKey: key}}); err != nil {
		return provider.Errorf("volume", "", fmt.Errorf("create volume %q: %w", name, err))
	}
	id, err := p.helper(ctx, img, "", name, false, map[string]string{LabelVolumeKey: key})
	if err != nil {
		return provider.Errorf("volume", "", fmt.Errorf("fill volume %q: %w", name, err))
	}
	defer p.removeHelper(id)
	tree, errc := tarTree(dir)
	err = p.Client.CopyToContainer(ctx, id, helperMount, tree, container.CopyToContainerOptions{})
	tree.Close()
	if terr := <-errc; terr != nil && !errors.Is(terr, io.ErrClosedPipe) {
		// The host tree's own fault (the engine saw a broken stream).
		return fmt.Errorf("fill volume %q from %q: %w", name, dir, terr)
	}
	if err != nil {
		return provider.Errorf("volume", id, fmt.Errorf("fill volume %q: %w", name, err))
	}
	var marker bytes.Buffer
	tw := tar.NewWriter(&marker)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: VolumeMarker, Mode: 0o444, Size: int64(len(key)), ModTime: time.Now(), Format: tar.FormatPAX})
	tw.Write([]byte(key))
	tw.Close()
	if err := p.Client.CopyToContainer(ctx, id, helperMount, &marker, container.CopyToContainerOptions{}); err != nil {
		return provider.Errorf("volume", id, fmt.Errorf("mark volume %q complete: %w", name, err))
	}
	return nil
}

// tarTree streams the tree under dir as a tar with names relative to it:
// directories, regular files and symbolic links, with their modes, owners
// and times. Links are stored as links, never followed, so nothing
// outside the tree is read; any other kind of file is an error. The
// channel gets the walk's outcome once the stream ended.
func tarTree(dir string) (*io.PipeReader, <-chan error) {
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		tw := tar.NewWriter(pw)
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil || rel == "." {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			link := ""
			switch {
			case fi.Mode()&fs.ModeSymlink != 0:
				if link, err = os.Readlink(p); err != nil {
					return err
				}
			case fi.IsDir(), fi.Mode().IsRegular():
			default:
				return fmt.Errorf("%q: a %s, want directories, regular files and links only", p, fi.Mode().Type())
			}
			h, err := tar.FileInfoHeader(fi, link)
			if err != nil {
				return fmt.Errorf("%q: %w", p, err)
			}
			h.Name = filepath.ToSlash(rel)
			if fi.IsDir() {
				h.Name += "/"
			}
			h.Uname, h.Gname = "", "" // numeric owners only
			h.Format = tar.FormatPAX
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if !fi.Mode().IsRegular() {
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if n, err := io.Copy(tw, f); err != nil {
				return fmt.Errorf("%q: %w", p, err)
			} else if n != fi.Size() {
				return fmt.Errorf("%q: changed while read (%d bytes, want %d)", p, n, fi.Size())
			}
			return nil
		})
		if err == nil {
			err = tw.Close()
		}
		errc <- err
		pw.CloseWithError(err)
	}()
	return pr, errc
}

// isVolumeName reports whether v is a name Volume returns.
func isVolumeName(v string) bool {
	return strings.HasPrefix(v, volumePrefix) && validKey.MatchString(strings.TrimPrefix(v, volumePrefix))
}
