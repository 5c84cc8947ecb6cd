// Package docker is the provider backed by a Docker engine, through the
// engine's own Go client (github.com/docker/docker/client) with API version
// negotiation, reaching the engine runner/host/engine resolves (unix://, tcp://,
// or ssh:// through a dial-stdio connection helper: NewClient).
//
// Containers are created with host networking or none (never a bridge), no
// init, pid 1 a plain sleep that reaps nothing, the "sandproof" label and
// the owner labels (provider.OwnerLabels), limits (provider.Limits), and
// an engine-side stop after CreateSpec.Expire as a backstop against a host
// that forgets them. Exec runs argv directly with stdout and stderr kept
// apart; Start streams a long-lived command's stdin and stdout; files move
// as tar streams; Volume keeps read-only content-addressed volumes; Changes
// reports the filesystem diff. Every failure of the engine, and every exec
// whose container is no longer running when it returns, is a
// *provider.ProviderError: an exit status read from a dead container proves
// nothing.
package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/sandproof/sandproof/runner/host/hostfile"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sandproof/sandproof/runner/host/engine"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// settle bounds how long an exec that ended by SIGKILL waits to see
// whether its container is stopping too.
const settle = 2 * time.Second

// Provider creates containers through an Engine API client.
type Provider struct {
	Client *client.Client
	// Endpoint is the engine reached (Info.Engine names it).
	Endpoint engine.Endpoint
	// archs is each image id's GOARCH, shared by the provider's sandboxes
	// (an image never changes): one image inspect per image, not per case.
	archs *archCache

	volMu sync.Mutex
	vols  map[string]*volumeFill // key -> the one fill of this process
	imgMu sync.Mutex
	empty string // the volume helpers' image, once made
	fills atomic.Int64
}

// New connects to the engine runner/host/engine resolves (DOCKER_HOST, else
// the docker context, else the default socket: the one the images' docker
// CLI reaches too) and checks that it answers.
func New() (*Provider, error) {
	ep, err := engine.Default()
	if err != nil {
		return nil, provider.Errorf("connect", "", err)
	}
	return NewAt(ep)
}

// NewAt connects to the engine at ep and checks that it answers (the
// version negotiation happens here).
func NewAt(ep engine.Endpoint) (*Provider, error) {
	c, err := NewClient(ep)
	if err != nil {
		return nil, provider.Errorf("connect", "", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ping, err := c.Ping(ctx)
	if err != nil {
		c.Close()
		return nil, provider.Errorf("connect", "", fmt.Errorf("ping engine %s: %w", ep, err))
	}
	// The engine's answer says its API version: negotiated here, with no
	// second request.
	c.NegotiateAPIVersionPing(ping)
	return &Provider{Client: c, Endpoint: ep, archs: &archCache{m: map[string]string{}}}, nil
}

type archCache struct {
	mu sync.Mutex
	m  map[string]string
}

// ImageID returns the id of the image ref names (provider.ImageFinder).
func (p *Provider) ImageID(ctx context.Context, ref string) (string, error) {
	img, _, err := p.Client.ImageInspectWithRaw(ctx, ref)
	if err != nil {
		return "", provider.Errorf("inspect image", "", fmt.Errorf("image %q: %w", ref, err))
	}
	return img.ID, nil
}

func (p *Provider) Name() string { return "docker" }

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
func ApplyLimits(hc *container.HostConfig, l provider.Limits) {
	pids := l.PidsLimit
	hc.PidsLimit = &pids
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
	network, err := provider.Network(spec.Network)
	if err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	limits := spec.Limits.Or(provider.DefaultLimits)
	if err := limits.Check(); err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	labels, err := Labels(spec.Labels)
	if err != nil {
		return nil, fmt.Errorf("create sandbox: %w", err)
	}
	var mounts []mount.Mount
	for _, v := range spec.Volumes {
		if !strings.HasPrefix(v.Target, "/") || !isVolumeName(v.Volume) {
			return nil, fmt.Errorf("create sandbox: volume %q -> %q: want a name Volume returned and an absolute target", v.Volume, v.Target)
		}
		mounts = append(mounts, mount.Mount{Type: mount.TypeVolume, Source: v.Volume, Target: v.Target, ReadOnly: true,
			VolumeOptions: &mount.VolumeOptions{NoCopy: true}})
	}
	cmd := spec.Command
	if cmd == nil {
		cmd = provider.DefaultCommand
	}
	hc := &container.HostConfig{
		NetworkMode:   container.NetworkMode(network),
		Mounts:        mounts,
		AutoRemove:    false,
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
	}
	noInit := false
	hc.Init = &noInit
	ApplyLimits(hc, limits)
	created, err := p.Client.ContainerCreate(ctx, &container.Config{
		Image: spec.Image,
		Env:   spec.Env,
		// The entrypoint is replaced too: an image's own entrypoint
		// would otherwise become pid 1 with our command as arguments.
		Entrypoint: cmd[:1],
		Cmd:        cmd[1:],
		Labels:     labels,
		User:       spec.User,
		// The expiry below is a stop request sent right after start, and
		// its signal reaches pid 1 at once. Until runc's init has exec'd
		// the command, pid 1 is runc init, a Go program, which exits 2 on
		// a TERM (the engine reported "container stopped" to the case's
		// first exec, 1 case in 24 on a loaded host). SIGWINCH is one that
		// neither it nor the sleep acts on, so the expiry's only effect is
		// its SIGKILL at the deadline.
		StopSignal: expireSignal,
	}, hc, nil, nil, "")
	if err != nil {
		return nil, provider.Errorf("create", "", fmt.Errorf("run image %q: %w", spec.Image, err))
	}
	if err := p.Client.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		// A container that never ran is nobody's: remove it at once.
		p.Client.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		return nil, provider.Errorf("create", created.ID, fmt.Errorf("start container of image %q: %w", spec.Image, err))
	}
	expire := spec.Expire
	if expire <= 0 {
		expire = time.Hour
	}
	p.expire(created.ID, expire)
	return &Sandbox{client: p.Client, id: created.ID, engine: p.Endpoint.Host, archs: p.archs, watch: watchEngine(p.Client)}, nil
}

// expireSignal is the container's stop signal (see Create).
const expireSignal = "SIGWINCH"

// expire asks the engine to stop the container after d: a stop whose grace
// period is d (pid 1 ignores the SIGTERM, so the SIGKILL comes at d). The
// request returns early when the container goes first.
func (p *Provider) expire(id string, d time.Duration) {
	secs := int(d / time.Second)
	if secs < 1 {
		secs = 1
	}
	go p.Client.ContainerStop(context.Background(), id, container.StopOptions{Timeout: &secs})
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
	s := &Sandbox{client: p.Client, id: id, engine: p.Endpoint.Host, archs: p.archs}
	info, err := s.Inspect(ctx)
	if err != nil {
		return nil, err
	}
	if !info.Exists || !info.Running {
		return nil, provider.Errorf("open", id, provider.ErrGone)
	}
	s.id = info.ID
	s.watch = watchEngine(p.Client)
	return s, nil
}

// Sandbox is one container.
type Sandbox struct {
	client *client.Client
	id     string
	engine string     // the engine's address, for Info.Engine
	archs  *archCache // image id -> GOARCH, the provider's
	// watch is the engine's event stream held from the sandbox's
	// creation (or opening) to its removal, for EngineFault; nil for a
	// sandbox made otherwise (then only the ping and the inspect witness).
	watch *engineWatch
	// gate holds execs back while the engine's diff has the container
	// frozen (frozenEngineChanges): an exec is made under its read lock,
	// the frozen diff holds its write lock.
	gate sync.RWMutex
}

func (s *Sandbox) ID() string { return s.id }

// transport maps an engine error to a ProviderError, with ErrGone for a
// container that no longer exists or no longer runs (the engine answers
// 404 for the one and 409 for the other; both are checked against the
// container's state, since an exec id can be missing too).
func (s *Sandbox) transport(op string, err error) error {
	if errdefs.IsNotFound(err) || errdefs.IsConflict(err) {
		if running, ierr := s.running(context.Background()); ierr == nil && !running {
			err = fmt.Errorf("%w: %v", provider.ErrGone, err)
		}
	}
	return provider.Errorf(op, s.id, err)
}

// execOptions is the engine's exec request for spec, stdout and stderr
// always attached (never a TTY: the two stay apart).
func execOptions(spec provider.ExecSpec, stdin bool) container.ExecOptions {
	return container.ExecOptions{
		Cmd:          spec.Argv,
		Env:          spec.Env,
		User:         spec.User,
		WorkingDir:   spec.Workdir,
		AttachStdin:  stdin,
		AttachStdout: true,
		AttachStderr: true,
	}
}

// attach creates the exec and attaches to it; the connection is closed
// when ctx ends, which ends the streams.
func (s *Sandbox) attach(ctx context.Context, spec provider.ExecSpec, stdin bool) (string, *hijacked, error) {
	s.gate.RLock()
	defer s.gate.RUnlock()
	// Under the gate's read lock nothing of sandproof's has the container
	// paused, so an engine that says it is paused says so on a late
	// event (pausedflag.go).
	var ex types.IDResponse
	err := askPastStaleFlag(ctx, saysExecPaused, func() (err error) {
		ex, err = s.client.ContainerExecCreate(ctx, s.id, execOptions(spec, stdin))
		return err
	})
	if err != nil {
		return "", nil, s.transport("exec", err)
	}
	var hj types.HijackedResponse
	err = askPastStaleFlag(ctx, saysExecPaused, func() (err error) {
		hj, err = s.client.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
		return err
	})
	if err != nil {
		return "", nil, s.transport("exec", err)
	}
	h := &hijacked{conn: hj.Conn, r: hj.Reader}
	h.stop = context.AfterFunc(ctx, func() { hj.Close() })
	h.close = hj.Close
	h.closeWrite = hj.CloseWrite
	return ex.ID, h, nil
}

// hijacked is an attached exec's connection.
type hijacked struct {
	conn       io.Writer
	r          io.Reader
	stop       func() bool
	close      func()
	closeWrite func() error
}

func (h *hijacked) Close() {
	h.stop()
	h.close()
}

// Exec runs argv in the container and waits for it. The container is
// inspected after the command returns: if it stopped meanwhile, the exit
// status is not trusted and a ProviderError is returned.
func (s *Sandbox) Exec(ctx context.Context, spec provider.ExecSpec) (provider.ExecResult, error) {
	if len(spec.Argv) == 0 {
		return provider.ExecResult{}, fmt.Errorf("exec: empty argv")
	}
	execID, h, err := s.attach(ctx, spec, spec.Stdin != nil)
	if err != nil {
		return provider.ExecResult{}, err
	}
	defer h.Close()
	if spec.Stdin != nil {
		go func() {
			// The command's stdin ends with ours; a command that exits
			// first makes this copy fail, which is no concern of the
			// result.
			io.Copy(h.conn, spec.Stdin)
			h.closeWrite()
		}()
	}
	var out, errb bytes.Buffer
	_, err = stdcopy.StdCopy(&out, &errb, h.r)
	res := provider.ExecResult{Stdout: out.Bytes(), Stderr: errb.Bytes()}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return res, s.transport("exec", err)
	}
	code, err := s.finish(ctx, execID, spec.Argv[0], out.Bytes())
	res.ExitCode = code
	return res, err
}

// finish reads an exec's status once its streams ended, and trusts it
// only if the container still runs (see killedLikeContainer, startFailed).
func (s *Sandbox) finish(ctx context.Context, execID, argv0 string, stdout []byte) (int, error) {
	ins, err := s.client.ContainerExecInspect(ctx, execID)
	if err != nil {
		return 0, s.transport("exec", err)
	}
	if ins.Running {
		return 0, provider.Errorf("exec", s.id, fmt.Errorf("exec %q: stream ended while the command still runs", argv0))
	}
	if killedLikeContainer(ins.ExitCode) || startFailed(ins.ExitCode, stdout) {
		// A SIGKILL may be the container dying under the exec: the
		// engine marks it stopped a moment after its processes are
		// killed. Wait briefly for that before trusting the status.
		wctx, cancel := context.WithTimeout(ctx, settle)
		okc, errc := s.client.ContainerWait(wctx, s.id, container.WaitConditionNotRunning)
		stopped := false
		select {
		case <-okc:
			stopped = true
		case err := <-errc:
			// A container already removed is stopped too.
			stopped = errdefs.IsNotFound(err)
		}
		cancel()
		if stopped {
			return 0, provider.Errorf("exec", s.id, fmt.Errorf("exec %q: container stopped: %w", argv0, provider.ErrGone))
		}
	}
	running, err := s.running(ctx)
	if err != nil {
		return 0, err
	}
	if !running {
		return 0, provider.Errorf("exec", s.id, fmt.Errorf("exec %q: container stopped: %w", argv0, provider.ErrGone))
	}
	return ins.ExitCode, nil
}

// Start starts a long-lived command with streamed stdin and stdout (see
// provider.Streamer). The caller reads Process.Stdout to its end before
// Wait, which then reads the status as Exec does. Ending ctx closes the
// streams.
func (s *Sandbox) Start(ctx context.Context, spec provider.ExecSpec, stderr io.Writer) (*provider.Process, error) {
	if len(spec.Argv) == 0 {
		return nil, fmt.Errorf("start: empty argv")
	}
	spec.Stdin = nil
	execID, h, err := s.attach(ctx, spec, true)
	if err != nil {
		return nil, err
	}
	if stderr == nil {
		stderr = io.Discard
	}
	pr, pw := io.Pipe()
	head := &hostfile.HeadBuffer{Max: 4 << 10}
	done := make(chan error, 1)
	go func() {
		// A caller that closed Stdout wants no more of it: the rest is
		// read and dropped, so the command ends and Wait reports its
		// status, not the closed pipe.
		_, err := stdcopy.StdCopy(io.MultiWriter(&dropWhenClosed{w: pw}, head), stderr, h.r)
		pw.CloseWithError(err)
		done <- err
	}()
	var once sync.Once
	var code int
	var werr error
	wait := func() (int, error) {
		once.Do(func() {
			err := <-done
			h.Close()
			if err != nil {
				if ctx.Err() != nil {
					err = fmt.Errorf("%w (%v)", ctx.Err(), err)
				}
				werr = s.transport("exec", err)
				return
			}
			code, werr = s.finish(context.WithoutCancel(ctx), execID, spec.Argv[0], head.Bytes())
		})
		return code, werr
	}
	return &provider.Process{Stdin: &execStdin{h: h}, Stdout: pr, Wait: wait}, nil
}

// dropWhenClosed writes to w until its reader is closed, then drops.
type dropWhenClosed struct {
	w      io.Writer
	closed bool
}

func (d *dropWhenClosed) Write(p []byte) (int, error) {
	if d.closed {
		return len(p), nil
	}
	if _, err := d.w.Write(p); err != nil {
		if !errors.Is(err, io.ErrClosedPipe) {
			return 0, err
		}
		d.closed = true
	}
	return len(p), nil
}

// execStdin is a streamed command's stdin: Close half-closes the
// connection, which the engine passes on as EOF.
type execStdin struct {
	h    *hijacked
	once sync.Once
}

func (w *execStdin) Write(p []byte) (int, error) { return w.h.conn.Write(p) }

func (w *execStdin) Close() error {
	var err error
	w.once.Do(func() { err = w.h.closeWrite() })
	return err
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
	if err := s.client.CopyToContainer(ctx, s.id, "/", r, container.CopyToContainerOptions{}); err != nil {
		return s.transport(op, err)
	}
	return nil
}

// Download is Fetch with default limits.
func (s *Sandbox) Download(ctx context.Context, path, hostPath string) error {
	_, err := s.Fetch(ctx, path, hostPath, provider.FetchLimits{})
	return err
}

// readErrs remembers the first failure of the engine's stream, so that an
// unpack that failed because the stream broke is reported as a transport
// failure and one that failed on its own (a cap, a bad entry) is not.
type readErrs struct {
	r   io.Reader
	err error
}

func (r *readErrs) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	return n, err
}

// Fetch fetches path as a tar stream and unpacks it at hostPath within lim
// (see untarTo); a confined read (lim.Confined) is refused with
// provider.ErrUnconfined. The engine answers 404 both for a missing path and for a
// missing container; the container is inspected to tell them apart. A
// download stopped at the read cap is not an error: what was written stays,
// and the answer records where it stopped.
func (s *Sandbox) Fetch(ctx context.Context, path, hostPath string, lim provider.FetchLimits) (provider.Fetched, error) {
	if lim.Confined {
		// The engine resolves the path in the container's root following
		// every link above its last component, and reads as root: it
		// cannot be told not to. Refused, never followed.
		return provider.Fetched{}, fmt.Errorf("download %q: %w (the engine's archive follows links above the path and reads as root; a confined read goes over the session agent)", path, provider.ErrUnconfined)
	}
	// Ending the request is what stops the engine's stream: closing a
	// response body may drain it first, which for a huge file would
	// read all of it.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	rc, _, err := s.client.CopyFromContainer(sctx, s.id, path)
	if err != nil {
		if errdefs.IsNotFound(err) {
			if running, ierr := s.running(ctx); ierr == nil && running {
				return provider.Fetched{}, fmt.Errorf("download %q: %w", path, provider.ErrPathNotFound)
			}
		}
		return provider.Fetched{}, s.transport("download", err)
	}
	defer func() {
		stop()
		rc.Close()
	}()
	src := &readErrs{r: rc}
	got, err := untarTo(src, hostPath, path, lim)
	if err == nil {
		// Whatever follows the end of the archive (padding).
		io.Copy(io.Discard, io.LimitReader(src, 1<<20))
	}
	switch {
	case errors.Is(err, errReadCap):
		return got, nil
	case src.err != nil:
		if ctx.Err() != nil {
			return got, s.transport("download", fmt.Errorf("%w (%v)", ctx.Err(), src.err))
		}
		return got, s.transport("download", src.err)
	case err != nil:
		return got, fmt.Errorf("download %q: %w", path, err)
	}
	return got, nil
}

// Inspect asks the engine; a container it does not know is Exists false.
func (s *Sandbox) Inspect(ctx context.Context) (provider.Info, error) {
	c, err := s.client.ContainerInspect(ctx, s.id)
	if errdefs.IsNotFound(err) {
		return provider.Info{ID: s.id}, nil
	}
	if err != nil {
		return provider.Info{}, provider.Errorf("inspect", s.id, err)
	}
	info := provider.Info{ID: c.ID, Exists: true, Running: c.State != nil && c.State.Running, ImageID: c.Image, Engine: s.engine}
	if hc := c.HostConfig; hc != nil {
		info.Network = string(hc.NetworkMode)
		l := provider.Limits{MemoryBytes: hc.Memory, CPUShares: hc.CPUShares, OOMScoreAdj: hc.OomScoreAdj}
		if hc.PidsLimit != nil {
			l.PidsLimit = *hc.PidsLimit
		}
		info.Limits = &l
	}
	if s.archs == nil {
		s.archs = &archCache{m: map[string]string{}}
	}
	s.archs.mu.Lock()
	arch, ok := s.archs.m[c.Image]
	s.archs.mu.Unlock()
	if !ok {
		img, _, err := s.client.ImageInspectWithRaw(ctx, c.Image)
		if err != nil {
			return provider.Info{}, provider.Errorf("inspect", s.id, fmt.Errorf("inspect image %q: %w", c.Image, err))
		}
		arch = img.Architecture
		s.archs.mu.Lock()
		s.archs.m[c.Image] = arch
		s.archs.mu.Unlock()
	}
	info.Arch = arch
	return info, nil
}

// running asks the engine whether the container runs: one request, for
// the checks after every exec and download.
func (s *Sandbox) running(ctx context.Context) (bool, error) {
	c, err := s.client.ContainerInspect(ctx, s.id)
	if errdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, provider.Errorf("inspect", s.id, err)
	}
	return c.State != nil && c.State.Running, nil
}

// Destroy removes the container and its anonymous volumes.
func (s *Sandbox) Destroy(ctx context.Context) error {
	s.watch.stop()
	err := s.client.ContainerRemove(ctx, s.id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !errdefs.IsNotFound(err) {
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
