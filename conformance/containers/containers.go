// Package containers runs conformance specs inside real containers of the
// test images: it starts a container whose pid 1 is the image's plain sleep
// (no init, no bridge), uploads files, runs commands with `docker exec`
// (blocking, in the background, or detached), reads files and the
// container's own /proc, and plants a tripwire: recording stand-ins for the
// tools a supervisor must never call.
//
// It talks to the engine through ory/dockertest directly rather than
// runner/host/provider: the specs need the exec's id and host pid (to KILL the
// exec's process group as a provider would), which the provider hides.
package containers

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/provider/docker"
	"github.com/sandproof/sandproof/runner/witness"
)

// ExecTimeout bounds every blocking exec, so a hung command fails its spec
// instead of the suite.
const ExecTimeout = 90 * time.Second

// Expire is the engine-side backstop, in seconds, for a container whose
// spec process died before its cleanup ran.
const Expire = 900

// Label is added to every container started here (besides "sandproof=1"),
// so a leftover can be told from other engineers' containers.
const Label = "sandproof.suite"

var (
	poolOnce sync.Once
	pool     *dockertest.Pool
	poolErr  error
)

// Pool connects once per test process (NewPool) and shares the client.
func Pool() (*dockertest.Pool, error) {
	poolOnce.Do(func() { pool, poolErr = NewPool() })
	return pool, poolErr
}

// NewPool connects to the engine named by DOCKER_HOST (or the default
// socket), learns the engine's API version and checks that it answers.
//
// dockertest makes its client with the server version check skipped, yet
// go-dockerclient gates some requests on the server's version (CreateExec
// refuses Env below API 1.25) and records that version only as a side
// effect of a few calls (a StartContainer through the pool, say). So
// whether an exec with Env worked depended on which spec this process ran
// before. With the check on, the first request (the Ping here) asks the
// engine's /version and every later request is made at that version.
func NewPool() (*dockertest.Pool, error) {
	p, err := dockertest.NewPool("")
	if err != nil {
		return nil, fmt.Errorf("connect to the docker engine: %w", err)
	}
	p.MaxWait = 30 * time.Second
	p.Client.SkipServerVersionCheck = false
	if err := p.Client.Ping(); err != nil {
		return nil, fmt.Errorf("ping the docker engine at %s: %w", p.Client.Endpoint(), err)
	}
	return p, nil
}

// Sandbox is one running container.
type Sandbox struct {
	Pool *dockertest.Pool
	Res  *dockertest.Resource
	// ID is the container's full id.
	ID string
	// Ref is the image reference it was started from.
	Ref string
	// PATH is the image's own PATH, from its configuration.
	PATH string
}

// Start runs a container of ref with pid 1 the image's own command (the
// plain `sleep infinity` of the test images), network "none", no init, the
// provider's default limits and owner labels, and registers its removal
// (by id) right away.
func Start(ref string) *Sandbox {
	ginkgo.GinkgoHelper()
	return StartLimited(ref, provider.DefaultLimits)
}

// StartLimited is Start with the given limits (a small pids limit for a
// fork bomb, say) instead of the provider's defaults.
func StartLimited(ref string, limits provider.Limits) *Sandbox {
	ginkgo.GinkgoHelper()
	return StartWith(ref, Options{Limits: limits})
}

// Options are what StartWith may change of Start's container.
type Options struct {
	// Limits are the container's; the zero value sets none (Start
	// passes provider.DefaultLimits).
	Limits provider.Limits
	// Binds are host directories mounted in the container, in the
	// engine's "HOST:CONTAINER[:ro]" spelling; nil mounts nothing.
	Binds []string
}

// StartWith is Start with o's limits and mounts.
func StartWith(ref string, o Options) *Sandbox {
	ginkgo.GinkgoHelper()
	limits := o.Limits
	p, err := Pool()
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "no docker engine answers (images/engine.sh start)")
	img, err := p.Client.InspectImage(ref)
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "image %s is missing: go run ./cmd/sandproof images build", ref)
	repo, tag := splitRef(ref)
	// The owner labels name this test process, so `sandproof clean` run
	// beside the suite keeps its containers while it lives.
	labels, err := docker.Labels(map[string]string{Label: "conformance-docker"})
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "owner labels")
	res, err := p.RunWithOptions(&dockertest.RunOptions{
		Repository: repo,
		Tag:        tag,
		Labels:     labels,
	}, func(hc *dc.HostConfig) {
		hc.NetworkMode = "none"
		hc.Init = false
		hc.AutoRemove = false
		hc.RestartPolicy = dc.RestartPolicy{Name: "no"}
		// What docker.ApplyLimits sets on the provider's own client's
		// host config: memory+swap equal to memory.
		hc.PidsLimit = limits.PidsLimit
		hc.Memory = limits.MemoryBytes
		hc.MemorySwap = limits.MemoryBytes
		hc.CPUShares = limits.CPUShares
		hc.OomScoreAdj = limits.OOMScoreAdj
		hc.Binds = o.Binds
	})
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "start a container of %s", ref)
	ginkgo.DeferCleanup(p.Purge, res)
	gomega.Expect(res.Expire(Expire)).To(gomega.Succeed())
	s := &Sandbox{Pool: p, Res: res, ID: res.Container.ID, Ref: ref, PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, kv := range img.Config.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			s.PATH = v
		}
	}
	ginkgo.GinkgoWriter.Printf("container %.12s of %s\n", s.ID, ref)
	return s
}

func splitRef(ref string) (repo, tag string) {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i], ref[i+1:]
	}
	return ref, "latest"
}

// File is one entry of an upload. A Dir entry has no Data.
type File struct {
	Path     string
	Mode     int64
	UID, GID int
	Dir      bool
	Data     []byte
}

// HostFile returns a File holding the host file src.
func HostFile(src, dst string, mode int64) File {
	ginkgo.GinkgoHelper()
	data, err := os.ReadFile(src)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return File{Path: dst, Mode: mode, Data: data}
}

// Upload extracts the files, in order, at "/" in one tar stream. Owners
// and modes are kept; missing parents are created by the engine.
func (s *Sandbox) Upload(files ...File) {
	ginkgo.GinkgoHelper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Now()
	for _, f := range files {
		h := &tar.Header{Name: strings.TrimPrefix(path.Clean(f.Path), "/"), Mode: f.Mode, Uid: f.UID, Gid: f.GID, ModTime: now}
		if f.Dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
		}
		gomega.Expect(tw.WriteHeader(h)).To(gomega.Succeed())
		if !f.Dir {
			_, err := tw.Write(f.Data)
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
		}
	}
	gomega.Expect(tw.Close()).To(gomega.Succeed())
	err := s.Pool.Client.UploadToContainer(s.ID, dc.UploadToContainerOptions{InputStream: &buf, Path: "/"})
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "upload to %.12s", s.ID)
}

// Exec is one command to run in the container, directly (never through a
// shell: an image may have none).
type Exec struct {
	Argv []string
	// User is "UID[:GID]"; "" means root (the images' default).
	User string
	// Env is added to the container's environment.
	Env []string
}

// Result is how a blocking exec ended.
type Result struct {
	Argv   []string
	Code   int
	Stdout string
	Stderr string
}

func (r Result) String() string {
	return fmt.Sprintf("exec %q: exit %d\nstdout: %s\nstderr: %s", r.Argv, r.Code, r.Stdout, r.Stderr)
}

func (s *Sandbox) create(ctx context.Context, e Exec, attach bool) string {
	ginkgo.GinkgoHelper()
	ex, err := s.Pool.Client.CreateExec(dc.CreateExecOptions{
		Container: s.ID, Cmd: e.Argv, User: e.User, Env: e.Env,
		AttachStdout: attach, AttachStderr: attach, Context: ctx,
	})
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "create exec %q", e.Argv)
	return ex.ID
}

// Run runs e and waits for it (at most ExecTimeout).
func (s *Sandbox) Run(ctx context.Context, e Exec) Result {
	ginkgo.GinkgoHelper()
	ctx, cancel := context.WithTimeout(ctx, ExecTimeout)
	defer cancel()
	id := s.create(ctx, e, true)
	var out, errb bytes.Buffer
	err := s.Pool.Client.StartExec(id, dc.StartExecOptions{OutputStream: &out, ErrorStream: &errb, Context: ctx})
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "exec %q", e.Argv)
	ins, err := s.Pool.Client.InspectExec(id)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	gomega.Expect(ins.Running).To(gomega.BeFalse(), "exec %q: its stream ended while it still runs", e.Argv)
	return Result{Argv: e.Argv, Code: ins.ExitCode, Stdout: out.String(), Stderr: errb.String()}
}

// Detach starts e with no client attached and returns its exec id.
func (s *Sandbox) Detach(ctx context.Context, e Exec) string {
	ginkgo.GinkgoHelper()
	id := s.create(ctx, e, false)
	gomega.Expect(s.Pool.Client.StartExec(id, dc.StartExecOptions{Detach: true, Context: ctx})).To(gomega.Succeed())
	return id
}

// Background is an attached exec running in the background.
type Background struct {
	s  *Sandbox
	ID string
	// HostPID is the exec's process as the host sees it.
	HostPID int
	done    chan struct{}
	out     bytes.Buffer
	errb    bytes.Buffer
	err     error
}

// Go starts e attached, as `docker exec` without -d would, and returns once
// the engine reports its process.
func (s *Sandbox) Go(ctx context.Context, e Exec) *Background {
	ginkgo.GinkgoHelper()
	b := &Background{s: s, ID: s.create(ctx, e, true), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		b.err = s.Pool.Client.StartExec(b.ID, dc.StartExecOptions{OutputStream: &b.out, ErrorStream: &b.errb, Context: ctx})
	}()
	gomega.Eventually(ctx, func() (int, error) {
		return s.execPID(ctx, b.ID)
	}).WithTimeout(30*time.Second).Should(gomega.BeNumerically(">", 0), "exec %q never ran", e.Argv)
	pid, err := s.execPID(ctx, b.ID)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	b.HostPID = pid
	return b
}

// Done is closed when the exec's stream has ended.
func (b *Background) Done() <-chan struct{} { return b.done }

// Inspect returns whether the exec still runs and its exit status.
func (b *Background) Inspect() (running bool, code int, err error) {
	ins, err := b.s.Pool.Client.InspectExec(b.ID)
	if err != nil {
		return false, 0, err
	}
	return ins.Running, ins.ExitCode, nil
}

// Output returns what the exec wrote; call it after Done.
func (b *Background) Output() (stdout, stderr string, err error) {
	<-b.done
	return b.out.String(), b.errb.String(), b.err
}

// ReadFile returns a file's content, read as root with cat; ok is false
// when cat could not read it.
func (s *Sandbox) ReadFile(ctx context.Context, p string) (data []byte, ok bool) {
	ginkgo.GinkgoHelper()
	r := s.Run(ctx, Exec{Argv: []string{"/bin/cat", p}})
	return []byte(r.Stdout), r.Code == 0
}

// Stats reads /proc/PID/stat of each pid inside the container (the
// container's own pid namespace), as root. Pids without a stat file are
// absent from the map. Every stat line read must parse: a table that drops
// a process silently could let a leak pass.
func (s *Sandbox) Stats(ctx context.Context, pids ...int) map[int]witness.Stat {
	ginkgo.GinkgoHelper()
	// pid 1 is always read too: its presence proves the read worked, so a
	// failed exec can never pass for "every process is gone".
	argv := []string{"/bin/cat", "/proc/1/stat"}
	for _, pid := range pids {
		argv = append(argv, "/proc/"+strconv.Itoa(pid)+"/stat")
	}
	r := s.Run(ctx, Exec{Argv: argv})
	out := map[int]witness.Stat{}
	for _, line := range strings.Split(r.Stdout, "\n") {
		if line == "" {
			continue
		}
		st, err := witness.ParseStat([]byte(line))
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "a stat line in container %.12s", s.ID)
		out[st.PID] = st
	}
	gomega.Expect(out).To(gomega.HaveKey(1), "reading the /proc of container %.12s failed: %s", s.ID, r)
	return out
}

// ProcState says what the container's /proc shows for id: "alive",
// "zombie" (dead, unreaped: pid 1 reaps nothing) or "gone" (no such pid,
// or the pid now names another process).
func (s *Sandbox) ProcState(ctx context.Context, id witness.ID) string {
	ginkgo.GinkgoHelper()
	return stateOf(s.Stats(ctx, id.PID), id)
}

func stateOf(stats map[int]witness.Stat, id witness.ID) string {
	st, ok := stats[id.PID]
	switch {
	case !ok || st.StartTime != id.StartTime:
		return "gone"
	case st.Dead():
		return "zombie"
	}
	return "alive"
}

// ProcStates returns ProcState for several processes from one read.
func (s *Sandbox) ProcStates(ctx context.Context, ids ...witness.ID) map[witness.ID]string {
	ginkgo.GinkgoHelper()
	pids := make([]int, len(ids))
	for i, id := range ids {
		pids[i] = id.PID
	}
	stats := s.Stats(ctx, pids...)
	out := map[witness.ID]string{}
	for _, id := range ids {
		out[id] = stateOf(stats, id)
	}
	return out
}

// execPID asks the engine for the host pid of an exec's process (the
// "Pid" of GET /exec/ID/json, which go-dockerclient's ExecInspect lacks);
// 0 until it started.
func (s *Sandbox) execPID(ctx context.Context, id string) (int, error) {
	endpoint := s.Pool.Client.Endpoint()
	sock, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok {
		return 0, fmt.Errorf("exec pid: engine endpoint %q is not a unix socket", endpoint)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://engine/exec/"+id+"/json", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("inspect exec %s: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("inspect exec %s: %s", id, resp.Status)
	}
	var v struct{ Pid int }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return 0, fmt.Errorf("inspect exec %s: %w", id, err)
	}
	return v.Pid, nil
}
