package certify

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/provider"
	"golang.org/x/sync/errgroup"
)

// rtKey names a prepared runtime: one per adapter, and per libc for a
// preparer whose runtime depends on it (libc "" otherwise).
type rtKey struct{ adapter, libc string }

// noLibc is the libc of an image with neither loader: a per-platform
// preparer is asked for it and reports the platform it cannot cover.
const noLibc = "none"

// imageLibc finds the image's libc by probing for its dynamic loaders
// (never by its name), in a short-lived sandbox without network.
func (r *runner) imageLibc(ctx context.Context, ref, name string) (string, error) {
	sb, err := r.prov.Create(ctx, provider.CreateSpec{
		Image: ref, Network: provider.NetworkNone, Expire: 5 * time.Minute, Limits: r.opts.Limits,
		Volumes: []provider.VolumeMount{{Volume: r.ownerVol, Target: ownerDir}},
		Labels:  map[string]string{provider.LabelRun: r.runID, "sandproof.case": "libc__" + name},
	})
	if err != nil {
		return "", err
	}
	defer sb.Destroy(context.WithoutCancel(ctx))
	sb = withOwnerDeadline(sb, r.opts.ownerDeadline())
	paths := append(slices.Clone(requirementPaths["glibc"]), requirementPaths["musl"]...)
	s, err := probeRun(ctx, sb, []string{probePath, "snapshot", "--no-exec", "--present", strings.Join(paths, ",")})
	if err != nil {
		return "", err
	}
	for _, libc := range []string{"glibc", "musl"} {
		if slices.ContainsFunc(requirementPaths[libc], func(p string) bool { return imageHas(s, p) }) {
			return libc, nil
		}
	}
	return noLibc, nil
}

// prepareRuntimes prepares every runtime the cases need, side by side (one
// per CPU at most: builds and checksums of cached npm trees), runs the
// version checks they ask for in sandboxes (checkVersions), and fills in
// each case's runtime dir, provenance key and skip reason. A runtime whose
// platform the manifest does not cover, whose source does not answer, or
// whose check cannot start in its image, skips its cases with the reason;
// any other error stops the run.
func (r *runner) prepareRuntimes(ctx context.Context, work, arch string, cases []caseSpec) error {
	if err := r.keyRuntimes(ctx, cases); err != nil {
		return err
	}
	manifests, order := runtimeOrder(cases)
	results, err := prepareAll(ctx, work, arch, manifests, order)
	if err != nil {
		return err
	}
	prepared, skips, err := r.collectRuntimes(manifests, order, results)
	if err != nil {
		return err
	}
	// A runtime the manifest mounts goes into a volume once per engine,
	// and so does one whose version check runs before the cases (in a
	// sandbox, which is where it mounts it).
	r.rtVol = map[rtKey]string{}
	for _, k := range order {
		if err := r.layerVolume(ctx, k, prepared, skips, manifests[k.adapter]); err != nil {
			return err
		}
		if rt := prepared[k]; rt != nil && rt.Dir != "" && (manifests[k.adapter].Runtime.Delivery == adapter.DeliveryMount || rt.VersionCheck != nil) {
			name, err := r.volume(ctx, "runtime-"+k.adapter, rt.Dir)
			if err != nil {
				return err
			}
			r.rtVol[k] = name
		}
	}
	if err := r.checkVersions(ctx, cases, order, manifests, prepared, skips); err != nil {
		return err
	}
	applyRuntimes(cases, prepared, skips)
	return nil
}

// keyRuntimes gives each case its runtime's key and its adapter's
// requirements; a per-platform runtime's key has the image's libc, probed
// once per image.
func (r *runner) keyRuntimes(ctx context.Context, cases []caseSpec) error {
	libcOf := map[string]string{} // image name -> libc, probed when a runtime depends on it
	for i := range cases {
		c := &cases[i]
		c.rt = rtKey{adapter: c.adapter.Name}
		c.requires = slices.Clone(c.adapter.Requires)
		if !c.adapter.PerPlatform() {
			continue
		}
		libc, ok := libcOf[c.image.Name]
		if !ok {
			t := time.Now()
			var err error
			if libc, err = r.imageLibc(ctx, c.image.Ref, c.image.Name); err != nil {
				return fmt.Errorf("certify: find the libc of image %s: %w", c.image.Name, err)
			}
			libcOf[c.image.Name] = libc
			r.progress("image %s: %s (probed in %.1fs)", c.image.Name, libc, time.Since(t).Seconds())
		}
		c.rt.libc = libc
	}
	return nil
}

// runtimeOrder is each adapter's manifest by name and the runtimes the
// cases need, each once, sorted by adapter and libc.
func runtimeOrder(cases []caseSpec) (map[string]*adapter.Manifest, []rtKey) {
	manifests := map[string]*adapter.Manifest{}
	keys := map[rtKey]bool{}
	for _, c := range cases {
		manifests[c.adapter.Name] = c.adapter
		keys[c.rt] = true
	}
	return manifests, slices.SortedFunc(maps.Keys(keys), func(a, b rtKey) int {
		return strings.Compare(a.adapter+"/"+a.libc, b.adapter+"/"+b.libc)
	})
}

// runtimeResult is one runtime's preparation, as long as it took.
type runtimeResult struct {
	rt   *adapter.Prepared
	err  error
	took time.Duration
}

// prepareAll prepares the runtimes of order side by side, one per CPU at
// most, each result at its key's index. A runtime that cannot be made for
// any reason but its platform or its source's absence stops the run: it
// cancels the others at once.
func prepareAll(ctx context.Context, work, arch string, manifests map[string]*adapter.Manifest, order []rtKey) ([]runtimeResult, error) {
	results := make([]runtimeResult, len(order))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, runtime.NumCPU()))
	for i, k := range order {
		g.Go(func() error {
			t := time.Now()
			rt, err := manifests[k.adapter].PrepareFor(gctx, work, arch, k.libc)
			results[i] = runtimeResult{rt, err, time.Since(t)}
			if err != nil && !errors.Is(err, adapter.ErrPlatform) && !errors.Is(err, adapter.ErrUnavailable) {
				return fmt.Errorf("certify: %w", err)
			}
			return nil
		})
	}
	return results, g.Wait()
}

// collectRuntimes sorts the results, in order, into the runtimes prepared
// (each with its provenance in r.harness) and the skip reasons of those
// whose platform is not covered or whose source did not answer.
func (r *runner) collectRuntimes(manifests map[string]*adapter.Manifest, order []rtKey, results []runtimeResult) (map[rtKey]*adapter.Prepared, map[rtKey]string, error) {
	ready := map[rtKey]*adapter.Prepared{}
	skips := map[rtKey]string{}
	r.harness = map[rtKey]*reports.HarnessRuntime{}
	for i, k := range order {
		res := results[i]
		switch {
		case res.err == nil:
			ready[k] = res.rt
			name := k.adapter
			if res.rt.Platform != "" {
				name += " (" + res.rt.Platform + ")"
			}
			r.progress("adapter %s: runtime prepared in %.1fs", name, res.took.Seconds())
			t := time.Now()
			h, err := runtimeProvenance(manifests[k.adapter], res.rt)
			if err != nil {
				return nil, nil, fmt.Errorf("certify: adapter %s: %w", k.adapter, err)
			}
			r.harness[k] = h
			r.progress("adapter %s: runtime tree %s (%d files) hashed in %.1fs", name, h.TreeSHA256, h.TreeFiles, time.Since(t).Seconds())
		case errors.Is(res.err, adapter.ErrPlatform), errors.Is(res.err, adapter.ErrUnavailable):
			skips[k] = "runtime not prepared: " + res.err.Error()
			r.progress("adapter %s: %s", k.adapter, skips[k])
		default:
			return nil, nil, fmt.Errorf("certify: %w", res.err)
		}
	}
	return ready, skips, nil
}

// applyRuntimes gives each case its runtime's dir, the requirements its
// runtime adds (each once, after the adapter's) and its skip reason.
func applyRuntimes(cases []caseSpec, ready map[rtKey]*adapter.Prepared, skips map[rtKey]string) {
	for i := range cases {
		c := &cases[i]
		if rt := ready[c.rt]; rt != nil {
			c.runtime = rt.Dir
			for _, q := range rt.Requires {
				if !slices.Contains(c.requires, q) {
					c.requires = append(c.requires, q)
				}
			}
			c.requires = slices.DeleteFunc(c.requires, func(q string) bool { return slices.Contains(rt.Provides, q) })
		}
		c.skip = joinSkip(c.skip, skips[c.rt])
	}
}

// layerVolume puts a runtime's glibc layer (its glibc/ dir) into a volume
// of its own, mounted at adapter.GlibcLayerMountDir, the short path its
// executables' interpreter names. Only a mounted runtime can have one: an
// uploaded runtime lives in the session dir, whose path is too long for a
// PT_INTERP, and its cases are skipped, named.
func (r *runner) layerVolume(ctx context.Context, k rtKey, prepared map[rtKey]*adapter.Prepared, skips map[rtKey]string, m *adapter.Manifest) error {
	rt := prepared[k]
	if rt == nil || rt.GlibcLayer == nil {
		return nil
	}
	if r.layerVol == nil {
		r.layerVol = map[rtKey]string{}
	}
	if m.Runtime.Delivery != adapter.DeliveryMount {
		delete(prepared, k)
		skips[k] = "runtime not prepared: a glibc layer needs runtime.delivery: mount"
		r.progress("adapter %s: %s", k.adapter, skips[k])
		return nil
	}
	name, err := r.volume(ctx, "glibc-"+k.adapter, filepath.Join(rt.Dir, path.Dir(rt.GlibcLayer.Files[0].Path)))
	if err != nil {
		return err
	}
	r.layerVol[k] = name
	r.progress("adapter %s: glibc layer (%d files) for %s", k.adapter, len(rt.GlibcLayer.Files), rt.Platform)
	return nil
}
