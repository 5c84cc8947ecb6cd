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
	if err := r.runtimeVolumes(ctx, order, manifests, prepared, skips); err != nil {
		return err
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

// runtimeResult is one runtime's preparation, as long as it took, and
// its provenance (the tree hashed), as long as that took.
type runtimeResult struct {
	rt     *adapter.Prepared
	err    error
	took   time.Duration
	prov   *reports.HarnessRuntime
	hashed time.Duration
}

// prepareAll prepares the runtimes of order side by side, one per CPU at
// most, each result at its key's index, and hashes each prepared tree for
// its provenance in the same goroutine (a tree of 40,000 files takes a
// second or more: one after another they were a tenth of the run's
// start). A runtime that cannot be made for any reason but its platform
// or its source's absence stops the run: it cancels the others at once.
func prepareAll(ctx context.Context, work, arch string, manifests map[string]*adapter.Manifest, order []rtKey) ([]runtimeResult, error) {
	results := make([]runtimeResult, len(order))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, runtime.NumCPU()))
	for i, k := range order {
		g.Go(func() error {
			t := time.Now()
			m := manifests[k.adapter]
			rt, err := m.PrepareFor(gctx, work, arch, k.libc)
			res := runtimeResult{rt: rt, err: err, took: time.Since(t)}
			defer func() { results[i] = res }()
			if err != nil && !errors.Is(err, adapter.ErrPlatform) && !errors.Is(err, adapter.ErrUnavailable) {
				return fmt.Errorf("certify: %w", err)
			}
			if err != nil {
				return nil
			}
			t = time.Now()
			if res.prov, err = runtimeProvenance(m, rt); err != nil {
				return fmt.Errorf("certify: adapter %s: %w", k.adapter, err)
			}
			res.hashed = time.Since(t)
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
			h := res.prov
			r.harness[k] = h
			r.progress("adapter %s: runtime tree %s (%d files) hashed in %.1fs", name, h.TreeSHA256, h.TreeFiles, res.hashed.Seconds())
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

// volumeJob is one volume a runtime needs: its glibc layer's (layer) or
// its tree's.
type volumeJob struct {
	k     rtKey
	layer bool
	kind  string
	dir   string
	name  string
}

// runtimeVolumes makes the volumes the prepared runtimes need, side by
// side (each hashes its tree first: a second or more for 40,000 files):
// a runtime's glibc layer (its glibc/ dir) in a volume of its own, mounted
// at adapter.GlibcLayerMountDir, the short path its executables'
// interpreter names; and the runtime's tree, for one the manifest mounts
// or whose version check runs before the cases (in a sandbox, which is
// where it mounts it). Only a mounted runtime can have a glibc layer: an
// uploaded runtime lives in the session dir, whose path is too long for a
// PT_INTERP, and its cases are skipped, named.
func (r *runner) runtimeVolumes(ctx context.Context, order []rtKey, manifests map[string]*adapter.Manifest, prepared map[rtKey]*adapter.Prepared, skips map[rtKey]string) error {
	r.rtVol, r.layerVol = map[rtKey]string{}, map[rtKey]string{}
	var jobs []*volumeJob
	for _, k := range order {
		m, rt := manifests[k.adapter], prepared[k]
		if rt != nil && rt.GlibcLayer != nil {
			if m.Runtime.Delivery != adapter.DeliveryMount {
				delete(prepared, k)
				skips[k] = "runtime not prepared: a glibc layer needs runtime.delivery: mount"
				r.progress("adapter %s: %s", k.adapter, skips[k])
				continue
			}
			jobs = append(jobs, &volumeJob{k: k, layer: true, kind: "glibc-" + k.adapter, dir: filepath.Join(rt.Dir, path.Dir(rt.GlibcLayer.Files[0].Path))})
		}
		if rt != nil && rt.Dir != "" && (m.Runtime.Delivery == adapter.DeliveryMount || rt.VersionCheck != nil) {
			jobs = append(jobs, &volumeJob{k: k, kind: "runtime-" + k.adapter, dir: rt.Dir})
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, runtime.NumCPU()))
	for _, j := range jobs {
		g.Go(func() (err error) {
			j.name, err = r.volume(gctx, j.kind, j.dir)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, j := range jobs {
		if !j.layer {
			r.rtVol[j.k] = j.name
			continue
		}
		r.layerVol[j.k] = j.name
		rt := prepared[j.k]
		r.progress("adapter %s: glibc layer (%d files) for %s", j.k.adapter, len(rt.GlibcLayer.Files), rt.Platform)
	}
	return nil
}
