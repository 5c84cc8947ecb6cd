package certify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/images"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// versionProvider makes versionSandboxes and keeps them: the test double
// of the engine for a runtime's version check. run answers the check's
// command (what it prints on stdout and stderr, its status, or a
// transport error); it is given the Start's ctx, so a check that never
// ends can wait for its deadline.
type versionProvider struct {
	mu   sync.Mutex
	made []*versionSandbox
	run  func(ctx context.Context, spec provider.ExecSpec) (stdout, stderr string, code int, err error)
}

func (p *versionProvider) Name() string { return "version-test" }

func (p *versionProvider) Create(_ context.Context, spec provider.CreateSpec) (provider.Sandbox, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sb := &versionSandbox{p: p, spec: spec}
	p.made = append(p.made, sb)
	return sb, nil
}

func (p *versionProvider) Open(context.Context, string) (provider.Sandbox, error) {
	return nil, provider.Errorf("open", "", provider.ErrGone)
}

// versionSandbox records what was asked of it: its dirs, the command it
// started and whether it was destroyed.
type versionSandbox struct {
	p         *versionProvider
	spec      provider.CreateSpec
	dirs      []string // "PATH MODE UID:GID"
	started   []provider.ExecSpec
	stdinShut bool
	destroyed bool
}

func (s *versionSandbox) ID() string { return "version-sandbox" }
func (s *versionSandbox) Exec(context.Context, provider.ExecSpec) (provider.ExecResult, error) {
	return provider.ExecResult{}, errors.New("the version check execs nothing but its Start")
}
func (s *versionSandbox) Upload(context.Context, string, io.Reader, int64, os.FileMode, int, int) error {
	return errors.New("no upload")
}
func (s *versionSandbox) Mkdir(_ context.Context, path string, mode os.FileMode, uid, gid int) error {
	s.dirs = append(s.dirs, fmt.Sprintf("%s %o %d:%d", path, mode, uid, gid))
	return nil
}
func (s *versionSandbox) Download(context.Context, string, string) error {
	return errors.New("no download")
}
func (s *versionSandbox) Fetch(context.Context, string, string, provider.FetchLimits) (provider.Fetched, error) {
	return provider.Fetched{}, errors.New("no fetch")
}
func (s *versionSandbox) Inspect(context.Context) (provider.Info, error) {
	return provider.Info{Exists: !s.destroyed, Running: !s.destroyed}, nil
}
func (s *versionSandbox) Destroy(context.Context) error { s.destroyed = true; return nil }

// Start runs the provider's script: stdout streamed, stderr written.
func (s *versionSandbox) Start(ctx context.Context, spec provider.ExecSpec, stderr io.Writer) (*provider.Process, error) {
	s.started = append(s.started, spec)
	out, errText, code, err := s.p.run(ctx, spec)
	io.WriteString(stderr, errText)
	return &provider.Process{Stdin: closer{&s.stdinShut}, Stdout: strings.NewReader(out), Wait: func() (int, error) { return code, err }}, nil
}

type closer struct{ shut *bool }

func (c closer) Write(p []byte) (int, error) { return len(p), nil }
func (c closer) Close() error                { *c.shut = true; return nil }

// versionRunner is a runner with one prepared runtime of adapter "h" for
// glibc, mounted, with a glibc layer, whose check is bin/tool --version
// wanting 1.2.3 with version_env V=1; its cases run on old-python
// (skipped) then debian-12. The run asks for the host network and set
// limits, which the check must not take and must keep.
func versionRunner(p *versionProvider) (*runner, []caseSpec, []rtKey, map[string]*adapter.Manifest, map[rtKey]*adapter.Prepared, map[rtKey]string) {
	k := rtKey{adapter: "h", libc: "glibc"}
	m := &adapter.Manifest{Name: "h"}
	r := &runner{prov: p, runID: "run1", key: "sk-canary",
		opts:     Options{User: "1000:1000", Network: provider.NetworkHost, Limits: provider.Limits{PidsLimit: 77, MemoryBytes: 99 << 20}},
		rtVol:    map[rtKey]string{k: "vol-rt"},
		layerVol: map[rtKey]string{k: "vol-layer"},
		harness:  map[rtKey]*reports.HarnessRuntime{k: {Package: "@scope/tool", Version: "1.2.3"}},
	}
	cases := []caseSpec{
		{id: "old-python/h", rt: k, adapter: m, image: images.Image{Name: "old-python", Ref: "sandproof/old-python:x"}, skip: "planned skip"},
		{id: "debian-12/h", rt: k, adapter: m, image: images.Image{Name: "debian-12", Ref: "sandproof/debian-12:x"}},
	}
	prepared := map[rtKey]*adapter.Prepared{k: {Dir: "/host/rt", Platform: "linux-x64",
		VersionCheck: &adapter.VersionCheck{Argv: []string{"bin/tool", "--version"}, Env: []string{"V=1"}, Want: "1.2.3"}}}
	return r, cases, []rtKey{k}, map[string]*adapter.Manifest{"h": m}, prepared, map[rtKey]string{}
}

// A runtime's version check runs in a sandbox made for it (the first
// image its cases run on, no network whatever the run's, the run's
// limits, its label), as the task user in a fresh HOME of its own, with
// the runtime and its layer mounted where cases mount them and the
// layer's LD_LIBRARY_PATH; its answer reaches the evidence's
// harness_runtime, and the sandbox is destroyed.
func TestVersionCheckRunsInASandboxOfItsImage(t *testing.T) {
	p := &versionProvider{run: func(context.Context, provider.ExecSpec) (string, string, int, error) {
		return "tool 1.2.3 (sandbox)\nmore\n", "a warning\n", 0, nil
	}}
	r, cases, order, ms, prepared, skips := versionRunner(p)
	if err := r.checkVersions(context.Background(), cases, order, ms, prepared, skips); err != nil {
		t.Fatalf("check: %v", err)
	}
	k := order[0]
	if h := r.harness[k]; !h.VersionChecked || h.VersionOutput != "tool 1.2.3 (sandbox)" {
		t.Fatalf("harness_runtime: checked %v, output %q; want the check's first line", h.VersionChecked, h.VersionOutput)
	}
	if len(p.made) != 1 || prepared[k] == nil || len(skips) != 0 {
		t.Fatalf("%d sandboxes, prepared %v, skips %v: want one, the runtime kept", len(p.made), prepared[k], skips)
	}
	sb := p.made[0]
	cs := sb.spec
	rtDir := adapter.RuntimeMountDir("h")
	if cs.Image != "sandproof/debian-12:x" || cs.Network != provider.NetworkNone || cs.Limits != r.opts.Limits {
		t.Errorf("sandbox: image %q, network %q, limits %+v; want debian-12's, none, the run's %+v", cs.Image, cs.Network, cs.Limits, r.opts.Limits)
	}
	if cs.Labels[provider.LabelRun] != "run1" || !strings.HasPrefix(cs.Labels["sandproof.case"], "version__h") {
		t.Errorf("labels %v: want the run's and the check's", cs.Labels)
	}
	wantVols := []provider.VolumeMount{{Volume: "vol-rt", Target: rtDir}, {Volume: "vol-layer", Target: adapter.GlibcLayerMountDir}}
	if !slices.Equal(cs.Volumes, wantVols) {
		t.Errorf("volumes %+v, want %+v", cs.Volumes, wantVols)
	}
	if len(sb.started) != 1 {
		t.Fatalf("started %d commands, want 1", len(sb.started))
	}
	es := sb.started[0]
	if strings.Join(es.Argv, " ") != rtDir+"/bin/tool --version" || es.User != "1000:1000" || es.Workdir != versionHome {
		t.Errorf("command %q as %q in %q: want the runtime's bin/tool --version as the task user in %s", es.Argv, es.User, es.Workdir, versionHome)
	}
	for _, want := range []string{"HOME=" + versionHome, "LD_LIBRARY_PATH=" + adapter.GlibcLayerMountDir, "V=1", "PATH=" + rtDir + "/bin:/usr/local/bin:/usr/bin:/bin"} {
		if !slices.Contains(es.Env, want) {
			t.Errorf("env %q lacks %q", es.Env, want)
		}
	}
	if !slices.Equal(sb.dirs, []string{versionHome + " 700 1000:1000"}) || !sb.stdinShut || !sb.destroyed {
		t.Errorf("dirs %q, stdin closed %v, destroyed %v: want the task user's home, EOF on stdin, the sandbox gone", sb.dirs, sb.stdinShut, sb.destroyed)
	}
}

// A check that fails stops the run (adapter.ErrVersion), one that cannot
// start in the image skips the runtime's cases naming why, a transport
// failure is the engine's; every sandbox is destroyed, and nothing is
// marked checked.
func TestVersionCheckFailuresStopTheRunOrSkipThePlatform(t *testing.T) {
	defer func(d time.Duration) { versionCheckDeadline = d }(versionCheckDeadline)
	versionCheckDeadline = 200 * time.Millisecond
	big := strings.Repeat("x", 1<<20)
	for _, c := range []struct {
		name           string
		out, errText   string
		code           int
		err            error
		block          bool
		want, wantSkip string
	}{
		{name: "exit 3", out: "tool 1.2.3", code: 3, want: "exit 3"},
		{name: "another version", out: "tool 1.2.4", want: `printed "tool 1.2.4", want 1.2.3`},
		{name: "version past the output cap", out: big + " tool 1.2.3", errText: big, want: "want 1.2.3"},
		{name: "never ends", block: true, want: "did not end within"},
		{name: "exit 127", errText: "Error loading shared library libstdc++.so.6", code: 127, wantSkip: "its version check cannot start in image debian-12"},
		{name: "exit 126", errText: "exec format error", code: 126, wantSkip: "cannot start in image debian-12"},
		{name: "engine", err: provider.Errorf("exec", "x", provider.ErrGone), want: "sandbox gone"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &versionProvider{run: func(ctx context.Context, _ provider.ExecSpec) (string, string, int, error) {
				if c.block {
					// The check's deadline ends it; the guard only keeps a
					// check without one from hanging the test.
					select {
					case <-ctx.Done():
						return "", "", -1, provider.Errorf("exec", "x", ctx.Err())
					case <-time.After(10 * time.Second):
						return "", "", -1, provider.Errorf("exec", "x", errors.New("no deadline ended the check"))
					}
				}
				return c.out, c.errText, c.code, c.err
			}}
			r, cases, order, ms, prepared, skips := versionRunner(p)
			k := order[0]
			err := r.checkVersions(context.Background(), cases, order, ms, prepared, skips)
			if len(p.made) != 1 || !p.made[0].destroyed {
				t.Fatalf("sandboxes %d, destroyed %v: want one, destroyed", len(p.made), len(p.made) == 1 && p.made[0].destroyed)
			}
			if r.harness[k].VersionChecked || r.harness[k].VersionOutput != "" {
				t.Errorf("marked checked: %+v", r.harness[k])
			}
			if c.wantSkip != "" {
				if err != nil || prepared[k] != nil || !strings.Contains(skips[k], c.wantSkip) || !strings.Contains(skips[k], "platform not covered") {
					t.Fatalf("err %v, prepared %v, skip %q: want the runtime's cases skipped naming %q", err, prepared[k], skips[k], c.wantSkip)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || len(skips) != 0 {
				t.Fatalf("err %v, skips %v: want the run stopped naming %q", err, skips, c.want)
			}
			if isEngine := c.err != nil; errors.Is(err, adapter.ErrVersion) == isEngine || provider.IsProviderError(err) != isEngine {
				t.Errorf("err %v: ErrVersion %v, provider error %v; want the engine's failure only from the engine", err, errors.Is(err, adapter.ErrVersion), provider.IsProviderError(err))
			}
		})
	}
}

// A runtime with no check, or whose cases are all skipped, gets no
// sandbox and is not marked checked.
func TestVersionCheckOnlyWhenAskedAndRun(t *testing.T) {
	p := &versionProvider{run: func(context.Context, provider.ExecSpec) (string, string, int, error) {
		return "tool 1.2.3", "", 0, nil
	}}
	r, cases, order, ms, prepared, skips := versionRunner(p)
	k := order[0]
	cases[1].skip = "planned skip"
	if err := r.checkVersions(context.Background(), cases, order, ms, prepared, skips); err != nil || len(p.made) != 0 {
		t.Fatalf("every case skipped: err %v, %d sandboxes", err, len(p.made))
	}
	cases[1].skip = ""
	prepared[k].VersionCheck = nil
	if err := r.checkVersions(context.Background(), cases, order, ms, prepared, skips); err != nil || len(p.made) != 0 || r.harness[k].VersionChecked {
		t.Fatalf("no check asked: err %v, %d sandboxes, checked %v", err, len(p.made), r.harness[k].VersionChecked)
	}
}
