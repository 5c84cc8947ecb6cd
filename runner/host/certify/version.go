package certify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/hostfile"
	"github.com/sandproof/sandproof/runner/host/images"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// versionCheckDeadline bounds a runtime's version check, its sandbox
// included: the deadline the host's check had (a variable for the tests).
var versionCheckDeadline = 2 * time.Minute

// versionCheckOutput is what is kept of each of the check's streams; the
// rest is read and dropped, so the command never stalls on a full pipe.
const versionCheckOutput = 4 << 10

// versionHome is the check's HOME, TMPDIR and working dir: a fresh dir
// of the task user's (harnesses create their state dirs even for
// --version).
const versionHome = "/tmp/sandproof-version"

// versionRun is one runtime's version check and where it runs: a sandbox
// of image with the runtime's volumes mounted where its cases mount them.
type versionRun struct {
	key      rtKey
	image    images.Image
	platform string
	check    adapter.VersionCheck
	vols     []provider.VolumeMount
	dir      string   // the runtime's dir in the sandbox
	env      []string // the runtime's own env (a glibc layer's LD_LIBRARY_PATH)
}

// checkVersions runs the version check of every prepared runtime that
// asks for one (adapter.Prepared.VersionCheck), side by side, one per CPU
// at most, before any case. The check starts the harness's own code,
// which never runs on the host (docs/threat-model.md, "Host-side readers
// of harness artifacts"): each runs in a throwaway sandbox of the first
// image its cases run on (runVersion). A check that answers marks the
// runtime's provenance (harness_runtime.version_checked and
// version_output); one that cannot start in the image skips the
// runtime's cases, named, as a platform not covered (it is dropped from
// prepared); any other failure stops the run.
func (r *runner) checkVersions(ctx context.Context, cases []caseSpec, order []rtKey, manifests map[string]*adapter.Manifest, prepared map[rtKey]*adapter.Prepared, skips map[rtKey]string) error {
	var runs []versionRun
	for _, k := range order {
		if v, ok := r.versionRunFor(k, cases, manifests[k.adapter], prepared[k]); ok {
			runs = append(runs, v)
		}
	}
	outs := make([]string, len(runs))
	errs := make([]error, len(runs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, runtime.NumCPU()))
	for i, v := range runs {
		g.Go(func() error {
			t := time.Now()
			outs[i], errs[i] = r.runVersion(gctx, v)
			if errs[i] != nil && !errors.Is(errs[i], adapter.ErrPlatform) {
				return fmt.Errorf("certify: adapter %s (%s): %w", v.key.adapter, v.platform, errs[i])
			}
			r.progress("adapter %s: version check in %s took %.1fs", v.key.adapter, v.image.Name, time.Since(t).Seconds())
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for i, v := range runs {
		if errs[i] != nil {
			delete(prepared, v.key)
			skips[v.key] = "runtime not prepared: " + errs[i].Error()
			r.progress("adapter %s: %s", v.key.adapter, skips[v.key])
			continue
		}
		if h := r.harness[v.key]; h != nil {
			h.VersionChecked, h.VersionOutput = true, outs[i]
		}
	}
	return nil
}

// versionRunFor is the check of k's runtime, in the image of the first of
// its cases that will run, with the volumes its cases mount; false when
// it asks for none or none of its cases runs.
func (r *runner) versionRunFor(k rtKey, cases []caseSpec, m *adapter.Manifest, rt *adapter.Prepared) (versionRun, bool) {
	if rt == nil || rt.VersionCheck == nil || r.rtVol[k] == "" {
		return versionRun{}, false
	}
	v := versionRun{key: k, platform: rt.Platform, check: *rt.VersionCheck, dir: adapter.RuntimeMountDir(m.Name)}
	found := false
	for _, c := range cases {
		if c.rt == k && c.skip == "" {
			v.image, found = c.image, true
			break
		}
	}
	v.vols = []provider.VolumeMount{{Volume: r.rtVol[k], Target: v.dir}}
	if l := r.layerVol[k]; l != "" {
		v.vols = append(v.vols, provider.VolumeMount{Volume: l, Target: adapter.GlibcLayerMountDir})
		v.env = []string{"LD_LIBRARY_PATH=" + adapter.GlibcLayerMountDir}
	}
	return v, found
}

// runVersion runs v in a sandbox made for it alone: no network, the
// run's limits, as the task user, its output bounded, under the check's
// deadline; the sandbox is destroyed after (it carries the run's label:
// `sandproof clean` finds one left by a crash). It returns the first line
// the check printed. A check that could not start there (exit 126 or
// 127: the loader or the kernel could not, e.g. a library its build
// needs is not in the image) is adapter.ErrPlatform; a provider error is
// the engine's; anything else is adapter.ErrVersion.
func (r *runner) runVersion(ctx context.Context, v versionRun) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, versionCheckDeadline)
	defer cancel()
	sb, err := r.prov.Create(cctx, provider.CreateSpec{
		Image: v.image.Ref, Network: provider.NetworkNone, Volumes: v.vols, Expire: 10 * time.Minute, Limits: r.opts.Limits,
		Labels: map[string]string{provider.LabelRun: r.runID, "sandproof.case": "version__" + caseDirName(v.key.adapter+"/"+v.platform)},
	})
	if err != nil {
		return "", err
	}
	defer sb.Destroy(context.WithoutCancel(ctx))
	code, out, err := r.execVersion(cctx, sb, v)
	argv := strings.Join(v.check.ArgvIn(v.dir), " ")
	switch {
	case cctx.Err() != nil && ctx.Err() == nil:
		return "", fmt.Errorf("%w: %s in image %s did not end within %s: %q", adapter.ErrVersion, argv, v.image.Name, versionCheckDeadline, clipVersion(out))
	case err != nil:
		return "", err
	case code == 126 || code == 127:
		return "", fmt.Errorf("%w: platform %s: its version check cannot start in image %s (%s: exit %d: %q)", adapter.ErrPlatform, v.platform, v.image.Name, argv, code, clipVersion(out))
	case code != 0:
		return "", fmt.Errorf("%w: %s in image %s: exit %d: %q", adapter.ErrVersion, argv, v.image.Name, code, clipVersion(out))
	case !strings.Contains(out, v.check.Want):
		return "", fmt.Errorf("%w: %s in image %s printed %q, want %s", adapter.ErrVersion, argv, v.image.Name, clipVersion(out), v.check.Want)
	}
	line, _, _ := strings.Cut(out, "\n")
	return truncate(redact(strings.TrimSpace(line), r.key), 200), nil
}

// execVersion starts the check in sb as the task user in a fresh HOME
// and reads at most versionCheckOutput bytes of each stream; it returns
// the exit status and what was kept, stdout first.
func (r *runner) execVersion(ctx context.Context, sb provider.Sandbox, v versionRun) (int, string, error) {
	owner := ownerPathsFor(r.opts, nil)
	if err := sb.Mkdir(ctx, versionHome, 0o700, owner.uid, owner.gid); err != nil {
		return 0, "", err
	}
	st, ok := provider.As[provider.Streamer](sb)
	if !ok {
		return 0, "", fmt.Errorf("version check: the %T sandbox cannot bound a command's output (no provider.Streamer)", sb)
	}
	env := append([]string{
		"HOME=" + versionHome, "PATH=" + v.dir + "/bin:/usr/local/bin:/usr/bin:/bin",
		"XDG_CONFIG_HOME=" + versionHome + "/config", "XDG_DATA_HOME=" + versionHome + "/data",
		"XDG_CACHE_HOME=" + versionHome + "/cache", "XDG_STATE_HOME=" + versionHome + "/state", "TMPDIR=" + versionHome,
	}, v.env...)
	env = append(env, v.check.Env...)
	stdout, stderr := &hostfile.HeadBuffer{Max: versionCheckOutput}, &hostfile.HeadBuffer{Max: versionCheckOutput}
	proc, err := st.Start(ctx, provider.ExecSpec{Argv: v.check.ArgvIn(v.dir), User: r.opts.User, Env: env, Workdir: versionHome}, stderr)
	if err != nil {
		return 0, "", err
	}
	proc.Stdin.Close()
	io.Copy(stdout, proc.Stdout)
	code, err := proc.Wait()
	return code, strings.TrimSpace(stdout.String() + "\n" + stderr.String()), err
}

// clipVersion quotes at most 300 bytes of a check's output in an error.
func clipVersion(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}
