// Package docker is the provider backed by a Docker engine, through
// ory/dockertest's Pool (whose Client is go-dockerclient).
//
// Containers are created with host networking or none (never a bridge), no
// init, pid 1 a plain sleep that reaps nothing, the "sandproof" label and
// the owner labels (provider.OwnerLabels), limits (provider.Limits), and
// an engine-side stop after CreateSpec.Expire as a backstop against a host
// that forgets them. Exec runs argv directly with stdout and stderr kept
// apart; files move as tar streams. Every failure of the engine, and every
// exec whose container is no longer running when it returns, is a
// *provider.ProviderError: an exit status read from a dead container proves
// nothing.
package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/sandproof/sandproof/runner/engine"
	"github.com/sandproof/sandproof/runner/provider"
)

// settle bounds how long an exec that ended by SIGKILL waits to see
// whether its container is stopping too.
const settle = 2 * time.Second

// Provider creates containers through a dockertest Pool.
type Provider struct {
	Pool *dockertest.Pool
}

// New connects to the engine runner/engine resolves (DOCKER_HOST, else
// the docker context, else the default socket: the one the images' docker
// CLI reaches too) and checks that it answers.
func New() (*Provider, error) {
	ep, err := engine.Default()
	if err != nil {
		return nil, provider.Errorf("connect", "", err)
	}
	pool, err := dockertest.NewPool(ep.Host)
	if err != nil {
		return nil, provider.Errorf("connect", "", err)
	}
	if err := pool.Client.Ping(); err != nil {
		return nil, provider.Errorf("connect", "", fmt.Errorf("ping engine: %w", err))
	}
	return &Provider{Pool: pool}, nil
}

func (p *Provider) Name() string { return "docker" }

// splitRef splits a reference at its last ':' after the last '/', which
// dockertest joins back unchanged: "repo:tag", "sha256:ID" and
// "repo@sha256:D" all survive the round trip.
func splitRef(ref string) (repo, tag string) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return ref, "latest"
	}
	return ref[:i], ref[i+1:]
}

// Labels returns the labels of a new container: extra, then the owner
// labels of this process over them (provider.OwnerLabels), with this
// process's provider.DefaultRun when extra names no run.
func Labels(extra map[string]string) (map[string]string, error) {
	run := extra[provider.LabelRun]
	if run == "" {
		var err error
		if run, err = provider.DefaultRun(); err != nil {
			return nil, err
		}
	}
	own, err := provider.OwnerLabels(run)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{}
	for k, v := range extra {
		labels[k] = v
	}
	for k, v := range own {
		labels[k] = v
	}
	return labels, nil
}

// ApplyLimits sets l on a container's host config: memory+swap equal to
// memory (no swap beyond the limit).
func ApplyLimits(hc *dc.HostConfig, l provider.Limits) {
	hc.PidsLimit = l.PidsLimit
	hc.Memory = l.MemoryBytes
	hc.MemorySwap = l.MemoryBytes
	hc.CPUShares = l.CPUShares
	hc.OomScoreAdj = l.OOMScoreAdj
}

// Create starts a container with the owner labels and spec.Limits.
func (p *Provider) Create(ctx context.Context, spec provider.CreateSpec) (provider.Sandbox, error) {
	if spec.Image == "" {
		return nil, fmt.Errorf("create sandbox: empty image reference")
	}
	network := spec.Network
	switch network {
	case "":
		network = provider.NetworkNone
	case provider.NetworkNone, provider.NetworkHost:
	default:
		return nil, fmt.Errorf("create sandbox: network %q: want %q or %q", spec.Network, provider.NetworkNone, provider.NetworkHost)
	}
	limits := spec.Limits.Or(provider.DefaultLimits)
	if err := limits.Check(); err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	labels, err := Labels(spec.Labels)
	if err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	var binds []string
	for _, m := range spec.Mounts {
		if !strings.HasPrefix(m.Target, "/") || strings.Contains(m.Source+m.Target, ":") {
			return nil, fmt.Errorf("create sandbox: mount %q -> %q: want absolute paths without ':'", m.Source, m.Target)
		}
		binds = append(binds, m.Source+":"+m.Target+":ro")
	}
	cmd := spec.Command
	if cmd == nil {
		cmd = provider.DefaultCommand
	}
	repo, tag := splitRef(spec.Image)
	res, err := p.Pool.RunWithOptions(&dockertest.RunOptions{
		Repository: repo,
		Tag:        tag,
		Env:        spec.Env,
		// The entrypoint is replaced too: an image's own entrypoint
		// would otherwise become pid 1 with our command as arguments.
		Entrypoint: cmd[:1],
		Cmd:        cmd[1:],
		Labels:     labels,
		User:       spec.User,
	}, func(hc *dc.HostConfig) {
		hc.NetworkMode = network
		hc.Binds = binds
		hc.Init = false
		hc.AutoRemove = false
		hc.PublishAllPorts = false
		hc.RestartPolicy = dc.RestartPolicy{Name: "no"}
		ApplyLimits(hc, limits)
	})
	if err != nil {
		return nil, provider.Errorf("create", "", fmt.Errorf("run image %q: %w", spec.Image, err))
	}
	expire := spec.Expire
	if expire <= 0 {
		expire = time.Hour
	}
	res.Expire(uint(expire / time.Second))
	return &Sandbox{client: p.Pool.Client, id: res.Container.ID}, nil
}

// killedLikeContainer reports whether an exec's status could come from its
// container dying under it. However the container dies (docker kill or
// stop reaching pid 1, rm -f, the OOM killer), the kernel ends every other
// process of its pid namespace with SIGKILL, so an exec killed that way
// ends with 128+9, never another 128+N: a command that died of SIGTERM,
// SIGSEGV or SIGABRT, or that exited 130 on its own, is trusted at once
// (after the running check every exec gets) instead of waiting out settle.
// A status the engine could not read (negative) is treated as a kill.
func killedLikeContainer(code int) bool {
	return code == 128+9 || code < 0 || code > 255
}

// startFailed: the engine could not start the exec's process (status 126
// with the OCI runtime's own message), which is also what an exec that
// races the container's death gets; like a KILL, it is checked against the
// container's state before the status is trusted. A program that is not
// there is the command's own failure and is reported at once.
func startFailed(code int, stdout []byte) bool {
	return code == 126 && bytes.Contains(stdout, []byte("OCI runtime exec failed")) &&
		!bytes.Contains(stdout, []byte("not found")) && !bytes.Contains(stdout, []byte("no such file"))
}

// Open returns a handle on an existing running container.
func (p *Provider) Open(ctx context.Context, id string) (provider.Sandbox, error) {
	s := &Sandbox{client: p.Pool.Client, id: id}
	info, err := s.Inspect(ctx)
	if err != nil {
		return nil, err
	}
	if !info.Exists || !info.Running {
		return nil, provider.Errorf("open", id, provider.ErrGone)
	}
	s.id = info.ID
	return s, nil
}

// Sandbox is one container.
type Sandbox struct {
	client *dc.Client
	id     string

	mu    sync.Mutex
	archs map[string]string // image id -> GOARCH: an image never changes
}

func (s *Sandbox) ID() string { return s.id }

// transport maps an engine error to a ProviderError, with ErrGone for a
// container that no longer exists or no longer runs.
func (s *Sandbox) transport(op string, err error) error {
	var nsc *dc.NoSuchContainer
	var cnr *dc.ContainerNotRunning
	var de *dc.Error
	switch {
	case errors.As(err, &nsc), errors.As(err, &cnr):
		err = fmt.Errorf("%w: %v", provider.ErrGone, err)
	case errors.As(err, &de) && (de.Status == http.StatusNotFound || de.Status == http.StatusConflict):
		if running, ierr := s.running(context.Background()); ierr == nil && !running {
			err = fmt.Errorf("%w: %v", provider.ErrGone, err)
		}
	}
	return provider.Errorf(op, s.id, err)
}

// Exec runs argv in the container and waits for it. The container is
// inspected after the command returns: if it stopped meanwhile, the exit
// status is not trusted and a ProviderError is returned.
func (s *Sandbox) Exec(ctx context.Context, spec provider.ExecSpec) (provider.ExecResult, error) {
	if len(spec.Argv) == 0 {
		return provider.ExecResult{}, fmt.Errorf("exec: empty argv")
	}
	if spec.Workdir != "" {
		// go-dockerclient's CreateExecOptions has no WorkingDir in the
		// version dockertest pins; warden run's params carry a cwd.
		return provider.ExecResult{}, fmt.Errorf("exec %q: workdir %q: not supported by the docker provider", spec.Argv[0], spec.Workdir)
	}
	ex, err := s.client.CreateExec(dc.CreateExecOptions{
		Container:    s.id,
		Cmd:          spec.Argv,
		Env:          spec.Env,
		User:         spec.User,
		AttachStdin:  spec.Stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
		Context:      ctx,
	})
	if err != nil {
		return provider.ExecResult{}, s.transport("exec", err)
	}
	var out, errb bytes.Buffer
	err = s.client.StartExec(ex.ID, dc.StartExecOptions{
		InputStream:  spec.Stdin,
		OutputStream: &out,
		ErrorStream:  &errb,
		Context:      ctx,
	})
	res := provider.ExecResult{Stdout: out.Bytes(), Stderr: errb.Bytes()}
	if err != nil {
		return res, s.transport("exec", err)
	}
	ins, err := s.client.InspectExec(ex.ID)
	if err != nil {
		return res, s.transport("exec", err)
	}
	if ins.Running {
		return res, provider.Errorf("exec", s.id, fmt.Errorf("exec %q: stream ended while the command still runs", spec.Argv[0]))
	}
	if killedLikeContainer(ins.ExitCode) || startFailed(ins.ExitCode, out.Bytes()) {
		// A SIGKILL may be the container dying under the exec: the
		// engine marks it stopped a moment after its processes are
		// killed. Wait briefly for that before trusting the status.
		wctx, cancel := context.WithTimeout(ctx, settle)
		_, werr := s.client.WaitContainerWithContext(s.id, wctx)
		cancel()
		if werr == nil {
			return res, provider.Errorf("exec", s.id, fmt.Errorf("exec %q: container stopped: %w", spec.Argv[0], provider.ErrGone))
		}
	}
	running, err := s.running(ctx)
	if err != nil {
		return res, err
	}
	if !running {
		return res, provider.Errorf("exec", s.id, fmt.Errorf("exec %q: container stopped: %w", spec.Argv[0], provider.ErrGone))
	}
	res.ExitCode = ins.ExitCode
	return res, nil
}

// Upload extracts a one-file tar at "/": the engine creates missing parent
// directories (0755, root) and leaves existing ones untouched.
func (s *Sandbox) Upload(ctx context.Context, path string, data io.Reader, size int64, mode os.FileMode, uid, gid int) error {
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("upload: sandbox path %q: not absolute", path)
	}
	return s.untar(ctx, "upload", tarFile(path, data, size, mode, uid, gid))
}

// Put extracts one tar holding every entry, in order: one request for a
// whole tree of directories and files.
func (s *Sandbox) Put(ctx context.Context, entries []provider.Entry) error {
	for _, e := range entries {
		if !strings.HasPrefix(e.Path, "/") {
			return fmt.Errorf("put: sandbox path %q: not absolute", e.Path)
		}
		if !e.Dir && e.Data == nil && e.HostPath != "" {
			// A host-side problem is the caller's, not the engine's:
			// found here, it is not mistaken for a transport failure.
			if fi, err := os.Stat(e.HostPath); err != nil {
				return fmt.Errorf("put %q: %w", e.Path, err)
			} else if !fi.Mode().IsRegular() {
				return fmt.Errorf("put %q: host file %q: not a regular file", e.Path, e.HostPath)
			}
		}
	}
	return s.untar(ctx, "put", tarEntries(entries))
}

// Mkdir extracts a tar holding one directory entry.
func (s *Sandbox) Mkdir(ctx context.Context, path string, mode os.FileMode, uid, gid int) error {
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("mkdir: sandbox path %q: not absolute", path)
	}
	return s.untar(ctx, "mkdir", tarDir(path, mode, uid, gid))
}

func (s *Sandbox) untar(ctx context.Context, op string, r *io.PipeReader) error {
	defer r.Close()
	err := s.client.UploadToContainer(s.id, dc.UploadToContainerOptions{
		InputStream: r,
		Path:        "/",
		Context:     ctx,
	})
	if err != nil {
		return s.transport(op, err)
	}
	return nil
}

// Download is Fetch with default limits.
func (s *Sandbox) Download(ctx context.Context, path, hostPath string) error {
	_, err := s.Fetch(ctx, path, hostPath, provider.FetchLimits{})
	return err
}

// Fetch fetches path as a tar stream and unpacks it at hostPath within lim
// (see untarTo). The engine answers 404 both for a missing path and for a
// missing container; the container is inspected to tell them apart. A
// download stopped at the read cap is not an error: what was written stays,
// and the answer records where it stopped.
func (s *Sandbox) Fetch(ctx context.Context, path, hostPath string, lim provider.FetchLimits) (provider.Fetched, error) {
	pr, pw := io.Pipe()
	// Ending the request is what stops the engine's stream: the client
	// drains a response body it closes, which for a huge file would read
	// all of it.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	type unpacked struct {
		got   provider.Fetched
		err   error
		early bool // the unpack ended before the engine's answer did
	}
	var answered atomic.Bool
	done := make(chan unpacked, 1)
	go func() {
		got, err := untarTo(pr, hostPath, path, lim)
		if err == nil {
			// Whatever follows the end of the archive (padding).
			io.Copy(io.Discard, io.LimitReader(pr, 1<<20))
		}
		early := err != nil && !answered.Load()
		if early {
			stop()
		}
		pr.CloseWithError(errors.New("unpack ended"))
		done <- unpacked{got, err, early}
	}()
	err := s.client.DownloadFromContainer(s.id, dc.DownloadFromContainerOptions{
		OutputStream: pw,
		Path:         path,
		Context:      sctx,
	})
	answered.Store(true)
	pw.CloseWithError(err)
	u := <-done
	if errors.Is(u.err, errReadCap) {
		return u.got, nil
	}
	if u.early && ctx.Err() == nil {
		// The unpack failed and stopped the stream: its error is the
		// cause.
		return u.got, fmt.Errorf("download %q: %w", path, u.err)
	}
	if err != nil {
		var de *dc.Error
		if errors.As(err, &de) && de.Status == http.StatusNotFound {
			if running, ierr := s.running(ctx); ierr == nil && running {
				return u.got, fmt.Errorf("download %q: %w", path, provider.ErrPathNotFound)
			}
		}
		return u.got, s.transport("download", err)
	}
	if u.err != nil {
		return u.got, fmt.Errorf("download %q: %w", path, u.err)
	}
	return u.got, nil
}

// Inspect asks the engine; a container it does not know is Exists false.
func (s *Sandbox) Inspect(ctx context.Context) (provider.Info, error) {
	c, err := s.client.InspectContainerWithContext(s.id, ctx)
	var nsc *dc.NoSuchContainer
	if errors.As(err, &nsc) {
		return provider.Info{ID: s.id}, nil
	}
	if err != nil {
		return provider.Info{}, provider.Errorf("inspect", s.id, err)
	}
	info := provider.Info{ID: c.ID, Exists: true, Running: c.State.Running, ImageID: c.Image}
	if hc := c.HostConfig; hc != nil {
		info.Limits = &provider.Limits{PidsLimit: hc.PidsLimit, MemoryBytes: hc.Memory, CPUShares: hc.CPUShares, OOMScoreAdj: hc.OomScoreAdj}
	}
	s.mu.Lock()
	arch, ok := s.archs[c.Image]
	s.mu.Unlock()
	if !ok {
		img, err := s.client.InspectImage(c.Image)
		if err != nil {
			return provider.Info{}, provider.Errorf("inspect", s.id, fmt.Errorf("inspect image %q: %w", c.Image, err))
		}
		arch = img.Architecture
		s.mu.Lock()
		if s.archs == nil {
			s.archs = map[string]string{}
		}
		s.archs[c.Image] = arch
		s.mu.Unlock()
	}
	info.Arch = arch
	return info, nil
}

// running asks the engine whether the container runs: one request, for
// the checks after every exec and download.
func (s *Sandbox) running(ctx context.Context) (bool, error) {
	c, err := s.client.InspectContainerWithContext(s.id, ctx)
	var nsc *dc.NoSuchContainer
	if errors.As(err, &nsc) {
		return false, nil
	}
	if err != nil {
		return false, provider.Errorf("inspect", s.id, err)
	}
	return c.State.Running, nil
}

// Destroy removes the container and its anonymous volumes.
func (s *Sandbox) Destroy(ctx context.Context) error {
	err := s.client.RemoveContainer(dc.RemoveContainerOptions{ID: s.id, Force: true, RemoveVolumes: true, Context: ctx})
	var nsc *dc.NoSuchContainer
	if err != nil && !errors.As(err, &nsc) {
		return provider.Errorf("destroy", s.id, err)
	}
	return nil
}

// RunArgs returns the `docker run` options that give a container made with
// the docker CLI what Create gives its own: the owner labels over extra
// (Labels) and the limits l (zero fields: provider.DefaultLimits').
func RunArgs(extra map[string]string, l provider.Limits) ([]string, error) {
	labels, err := Labels(extra)
	if err != nil {
		return nil, err
	}
	l = l.Or(provider.DefaultLimits)
	if err := l.Check(); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var args []string
	for _, k := range keys {
		args = append(args, "--label", k+"="+labels[k])
	}
	return append(args,
		"--pids-limit", strconv.FormatInt(l.PidsLimit, 10),
		"--memory", strconv.FormatInt(l.MemoryBytes, 10),
		"--memory-swap", strconv.FormatInt(l.MemoryBytes, 10),
		"--cpu-shares", strconv.FormatInt(l.CPUShares, 10),
		"--oom-score-adj", strconv.Itoa(l.OOMScoreAdj)), nil
}
