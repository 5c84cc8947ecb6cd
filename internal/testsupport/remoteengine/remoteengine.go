// Package remoteengine starts, for a test, a second Docker engine on this
// machine that stands in for a remote host (issue 15). Code that only
// works because the engine shares this machine's files (a bind mount of a
// host path, a read of the engine's overlay dirs) passes against the main
// engine and fails against this one, so a test run against it proves that
// sandproof reaches its sandboxes through the engine's API alone.
//
// The engine is images/engine2.sh's (`run DIR PORT`: one setup, shared with
// the developer's `engine2.sh start`): a dockerd in a mount namespace of its
// own (unshare --mount, private propagation) where these are empty tmpfs
// mounts, so a bind mount of a host path below them shows an empty dir:
//   - /tmp, /var/tmp and $TMPDIR: os.MkdirTemp and t.TempDir (certify's work
//     dir with the probe, session files, npm downloads of runtimes);
//   - $HOME, and os.UserCacheDir ($XDG_CACHE_HOME, else ~/.cache): the
//     runtimes' cache (runtimes.DefaultCacheDir), npm's and Go's caches;
//   - $SANDPROOF_RUNTIME_CACHE when set (runtimes.CacheEnv);
//   - the checkout (bin/linux-*/warden and probe, fixtures/);
//   - /run/containerd: it never attaches to another engine's containerd.
//
// Its data root is an ext4 file under /var/lib/sandproof-engine2/<random>
// (not /tmp: images are hundreds of MB) loop-mounted inside that namespace
// only: the host sees an empty dir where its overlay dirs are, and the
// storage driver is overlay2 as on the main engine (not vfs, which would
// copy a whole image per container). Its exec root and pidfile are a tmpfs
// there too; its containerd is its own (no --containerd); no bridge, no
// iptables; it listens only on tcp://127.0.0.1:<free port>.
//
// Start gives a test an engine of its own, stopped by t.Cleanup; Shared
// gives every test of a package one engine holding the test images, loaded
// through the API (saved from the main engine, streamed into this one), and
// Main (from TestMain) stops it. A missing prerequisite (root, dockerd,
// unshare, mkfs.ext4, loop devices, the main engine and its images) goes
// through internal/testsupport/testenv.
package remoteengine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dc "github.com/ory/dockertest/v3/docker"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/engine"
	"github.com/sandproof/sandproof/runner/host/images"
)

// BaseDir holds one directory per engine (its data root's ext4 file, its
// config and its log).
const BaseDir = "/var/lib/sandproof-engine2"

// wait bounds each wait: the engine answering, stopping, its loop device
// going away, an image load.
const wait = 2 * time.Minute

// Engine is a running second engine.
type Engine struct {
	// Host is its address, for DOCKER_HOST: tcp://127.0.0.1:PORT.
	Host string
	// Dir is its directory under BaseDir (removed by Stop).
	Dir string
	// Pid is its dockerd's pid (in this host's pid namespace).
	Pid int
	// ID and Driver are what its /info says: the engine's id and its
	// storage driver.
	ID, Driver string
	// Client talks to it.
	Client *dc.Client
	// Images are the images Shared loaded into it.
	Images []images.Image

	startTime uint64
	done      chan struct{} // closed when dockerd has exited and been reaped
	waitErr   error
	stopOnce  sync.Once
	stopErr   error
}

// Env returns env with DOCKER_HOST set to the engine and DOCKER_CONTEXT
// dropped (a context beside a host would be ambiguous to the docker CLI).
func (e *Engine) Env(env []string) []string {
	return engine.Endpoint{Host: e.Host}.Env(env)
}

// Script is images/engine2.sh in this checkout.
func Script() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("remoteengine: cannot locate the source checkout")
	}
	p := filepath.Join(filepath.Dir(file), "..", "..", "..", "images", "engine2.sh")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("remoteengine: %w", err)
	}
	return p, nil
}

// need ends tb (through testenv) when the machine cannot run a second
// engine.
func need(tb testing.TB) {
	tb.Helper()
	testenv.Docker(tb)
	if os.Geteuid() != 0 {
		testenv.Missing(tb, "root (a second dockerd, a mount namespace and a loop mount need it)", "run the test as root")
	}
	for _, c := range []struct{ cmd, pkg string }{
		{"dockerd", "docker.io"}, {"unshare", "util-linux"}, {"mkfs.ext4", "e2fsprogs"}, {"mount", "mount"}, {"bash", "bash"},
	} {
		if _, err := exec.LookPath(c.cmd); err != nil {
			testenv.Package(tb, c.cmd, c.pkg)
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		testenv.Missing(tb, fmt.Sprintf("loop devices (%v)", err), "load the loop module (modprobe loop) or run where /dev/loop-control exists")
	}
}

// Start starts a second engine for tb (with no images) and stops it when
// tb ends.
func Start(tb testing.TB) *Engine {
	tb.Helper()
	need(tb)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	e, err := start(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := e.Stop(); err != nil {
			tb.Error(err)
		}
	})
	tb.Logf("second engine %s: dockerd pid %d, storage %s, dir %s", e.Host, e.Pid, e.Driver, e.Dir)
	return e
}

// start starts dockerd through engine2.sh run and waits until it answers.
func start(ctx context.Context) (*Engine, error) {
	script, err := Script()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(BaseDir, 0o755); err != nil {
		return nil, fmt.Errorf("remoteengine: %w", err)
	}
	dir, err := os.MkdirTemp(BaseDir, "")
	if err != nil {
		return nil, fmt.Errorf("remoteengine: %w", err)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("remoteengine: %w", err)
	}
	e := &Engine{Host: "tcp://127.0.0.1:" + strconv.Itoa(port), Dir: dir, done: make(chan struct{})}
	logPath := filepath.Join(dir, "dockerd.log")
	logf, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("remoteengine: %w", err)
	}
	cmd := exec.Command("bash", script, "run", dir, strconv.Itoa(port))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group: a ^C meant for `go test` must not stop
		// the engine before Stop has removed its containers.
		Setpgid: true,
		// If the test binary dies without Stop, the engine stops too
		// (dockerd stops its containers on TERM).
		Pdeathsig: syscall.SIGTERM,
	}
	// Pdeathsig follows the thread that started the child, not the
	// process: start and reap it from one locked thread that lives until
	// dockerd exits.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(e.done)
			return
		}
		started <- nil
		e.waitErr = cmd.Wait()
		logf.Close()
		close(e.done)
	}()
	if err := <-started; err != nil {
		logf.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("remoteengine: start %s run: %w", script, err)
	}
	e.Pid = cmd.Process.Pid
	// bash execs unshare, which execs bash, which execs dockerd: one pid,
	// one start time throughout.
	if e.startTime, err = startTime(e.Pid); err != nil {
		<-e.done
		os.RemoveAll(dir)
		return nil, fmt.Errorf("remoteengine: dockerd exited at once: %v\n%s", e.waitErr, tail(logPath))
	}
	fail := func(err error) (*Engine, error) {
		log := tail(logPath) // before Stop removes it
		if serr := e.Stop(); serr != nil {
			err = fmt.Errorf("%w (and stopping it: %v)", err, serr)
		}
		return nil, fmt.Errorf("remoteengine: %w\n%s", err, log)
	}
	if e.Client, err = dc.NewClient(e.Host); err != nil {
		return fail(err)
	}
	if err := e.waitAnswers(ctx); err != nil {
		return fail(err)
	}
	info, err := e.Client.Info()
	if err != nil {
		return fail(fmt.Errorf("info of %s: %w", e.Host, err))
	}
	e.ID, e.Driver = info.ID, info.Driver
	return e, nil
}

// waitAnswers polls the engine's /_ping until it answers, dockerd exits,
// or ctx ends.
func (e *Engine) waitAnswers(ctx context.Context) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		last = e.Client.PingWithContext(pctx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-e.done:
			return fmt.Errorf("dockerd exited before answering on %s: %v", e.Host, e.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("dockerd did not answer on %s: %w (last ping: %v)", e.Host, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// Stop removes the engine's containers, stops its dockerd (TERM, then
// KILL after a while) once its pid and start time prove it is the one
// started, waits for it and for its data root's loop device to go, and
// removes Dir. It runs once; later calls return the first one's result.
func (e *Engine) Stop() error {
	e.stopOnce.Do(func() { e.stopErr = e.stop() })
	return e.stopErr
}

func (e *Engine) stop() error {
	var errs []error
	select {
	case <-e.done:
	default:
		if e.Client != nil {
			errs = append(errs, e.removeContainers())
		}
		if st, err := startTime(e.Pid); err != nil || st != e.startTime {
			errs = append(errs, fmt.Errorf("pid %d is no longer the dockerd started (start time %d, now %d: %v); not signalled", e.Pid, e.startTime, st, err))
			break
		}
		if err := syscall.Kill(e.Pid, syscall.SIGTERM); err != nil {
			errs = append(errs, fmt.Errorf("stop dockerd %d: %w", e.Pid, err))
		}
		select {
		case <-e.done:
		case <-time.After(wait):
			errs = append(errs, fmt.Errorf("dockerd %d ignored TERM for %s; killed", e.Pid, wait))
			syscall.Kill(e.Pid, syscall.SIGKILL)
			<-e.done
		}
	}
	// The loop device goes when the last mount of it does, that is when
	// the namespace's last process (dockerd, its containerd, a shim) has
	// exited.
	if err := waitFor(wait, func() bool { return len(loopDevices(filepath.Join(e.Dir, "disk.img"))) == 0 }); err != nil {
		errs = append(errs, fmt.Errorf("loop device of %s still attached (%v): a process of the engine's namespace outlived dockerd", e.Dir, loopDevices(filepath.Join(e.Dir, "disk.img"))))
	}
	if err := os.RemoveAll(e.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remoteengine: stop %s: %w", e.Host, err)
	}
	return nil
}

// Kill ends the engine as a crash would, for a test of what sandproof does
// when its engine dies under a case: SIGKILL to dockerd (the crash), then
// to every process left in the engine's mount namespace (its containerd,
// the containers' shims) and to each container's init, which takes every
// process of its pid namespace with it. Each process is one this engine
// started: found, before the crash, as the init of one of its containers
// (through its API) or in its mount namespace, and checked by start time
// before the signal. With nothing left to hold its data root, Stop can
// then detach the loop device and remove Dir. The containers die with the
// engine (Kill is not a restart), and their emptied cgroups are removed.
// It returns once all of them are gone.
func (e *Engine) Kill() error {
	if st, err := startTime(e.Pid); err != nil || st != e.startTime {
		return fmt.Errorf("remoteengine: kill: pid %d is no longer the dockerd started (start time %d, now %d: %v); not signalled", e.Pid, e.startTime, st, err)
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", e.Pid))
	if err != nil {
		return fmt.Errorf("remoteengine: kill: %w", err)
	}
	inits, cgroups, err := e.containerInits()
	if err != nil {
		return err
	}
	if err := syscall.Kill(e.Pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("remoteengine: kill dockerd %d: %w", e.Pid, err)
	}
	select {
	case <-e.done:
	case <-time.After(wait):
		return fmt.Errorf("remoteengine: dockerd %d outlived SIGKILL for %s", e.Pid, wait)
	}
	var errs []error
	for _, p := range inits {
		if p.alive() {
			syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	// The namespace's processes, until none is left (nothing new starts
	// in it without dockerd). A process is in it only while it runs: a
	// zombie has left every namespace.
	left := func() bool {
		n := 0
		for _, p := range inNamespace(ns) {
			syscall.Kill(p, syscall.SIGKILL)
			n++
		}
		for _, p := range inits {
			if p.alive() {
				n++
			}
		}
		return n == 0
	}
	if err := waitFor(wait, left); err != nil {
		errs = append(errs, fmt.Errorf("processes of the engine's namespace %s outlived SIGKILL: %v", ns, inNamespace(ns)))
	}
	for _, d := range cgroups {
		if err := waitFor(wait, func() bool { err := syscall.Rmdir(d); return err == nil || errors.Is(err, syscall.ENOENT) }); err != nil {
			errs = append(errs, fmt.Errorf("remove the container's cgroup %s: %v", d, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remoteengine: kill %s: %w", e.Host, err)
	}
	return nil
}

// proc is a process by pid and start time.
type proc struct {
	pid   int
	start uint64
}

// alive: the same process still runs (a zombie has ended).
func (p proc) alive() bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	st, err := startTime(p.pid)
	return len(f) > 0 && f[0] != "Z" && err == nil && st == p.start
}

// containerInits asks the engine for its containers' init processes (as
// this host's pid namespace sees them) and the cgroup dirs each is in,
// those named by the container's id only.
func (e *Engine) containerInits() ([]proc, []string, error) {
	cs, err := e.Client.ListContainers(dc.ListContainersOptions{All: true})
	if err != nil {
		return nil, nil, fmt.Errorf("remoteengine: kill: list containers: %w", err)
	}
	var inits []proc
	var cgroups []string
	for _, c := range cs {
		ct, err := e.Client.InspectContainer(c.ID)
		if err != nil {
			return nil, nil, fmt.Errorf("remoteengine: kill: inspect container %s: %w", c.ID, err)
		}
		if ct.State.Pid <= 0 {
			continue
		}
		st, err := startTime(ct.State.Pid)
		if err != nil {
			continue
		}
		inits = append(inits, proc{ct.State.Pid, st})
		cgroups = append(cgroups, cgroupDirs(ct.State.Pid, c.ID)...)
	}
	return inits, cgroups, nil
}

// cgroupDirs are the cgroup dirs pid is in whose path names the
// container id, in every hierarchy /proc/PID/cgroup lists.
func cgroupDirs(pid int, id string) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || !strings.Contains(f[2], id) {
			continue
		}
		root := "/sys/fs/cgroup/" + strings.TrimPrefix(f[1], "name=")
		if f[1] == "" {
			root = "/sys/fs/cgroup/unified"
			if _, err := os.Stat(root); err != nil {
				root = "/sys/fs/cgroup"
			}
		}
		out = append(out, filepath.Join(root, f[2]))
	}
	return out
}

// inNamespace lists the processes whose mount namespace is ns.
func inNamespace(ns string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, d := range ents {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink("/proc/" + d.Name() + "/ns/mnt"); err == nil && l == ns {
			out = append(out, p)
		}
	}
	return out
}

// removeContainers force-removes every container of the engine.
func (e *Engine) removeContainers() error {
	cs, err := e.Client.ListContainers(dc.ListContainersOptions{All: true})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	var errs []error
	for _, c := range cs {
		if err := e.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true, RemoveVolumes: true}); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.ID, err))
		}
	}
	return errors.Join(errs...)
}

// Load copies images from another engine into this one through the API:
// the other engine's save stream goes straight into this one's load (no
// file in between), and then every image must have the same id on both.
func (e *Engine) Load(ctx context.Context, from *dc.Client, refs ...string) error {
	pr, pw := io.Pipe()
	saved := make(chan error, 1)
	go func() {
		err := from.ExportImages(dc.ExportImagesOptions{Names: refs, OutputStream: pw, Context: ctx})
		pw.CloseWithError(err)
		saved <- err
	}()
	var out bytes.Buffer
	lerr := e.Client.LoadImage(dc.LoadImageOptions{InputStream: pr, OutputStream: &out, Context: ctx})
	// A load that ended early must not leave the save writing forever.
	pr.CloseWithError(errors.New("load ended"))
	serr := <-saved
	if lerr != nil { // first: a failed load also fails the save
		return fmt.Errorf("remoteengine: load %v into %s: %w: %s", refs, e.Host, lerr, out.String())
	}
	if serr != nil {
		return fmt.Errorf("remoteengine: save %v from the main engine: %w", refs, serr)
	}
	for _, ref := range refs {
		a, err := from.InspectImage(ref)
		if err != nil {
			return fmt.Errorf("remoteengine: inspect %s on the main engine: %w", ref, err)
		}
		b, err := e.Client.InspectImage(ref)
		if err != nil {
			return fmt.Errorf("remoteengine: %s not in %s after load: %w (load said: %s)", ref, e.Host, err, strings.TrimSpace(out.String()))
		}
		if a.ID != b.ID {
			return fmt.Errorf("remoteengine: %s is %s on the main engine but %s on %s", ref, a.ID, b.ID, e.Host)
		}
	}
	return nil
}

// Main runs a package's tests (call it from TestMain) and then stops the
// engine Shared started, if any; it returns the exit code.
func Main(m *testing.M) int {
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	code := m.Run()
	if err := stopShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

var shared struct {
	mu   sync.Mutex
	main bool // Main runs: someone stops the engine
	e    *Engine
	err  error
}

// mainClient connects to the main engine: the one runner/host/engine resolves
// from the environment (DOCKER_HOST, the docker context, the default
// socket), through engine.Resolve rather than engine.Default, which a
// test's t.Setenv of DOCKER_HOST could not change once it has run.
func mainClient() (*dc.Client, error) {
	ep, err := engine.Resolve()
	if err != nil {
		return nil, err
	}
	c, err := dc.NewClient(ep.Host)
	if err != nil {
		return nil, err
	}
	return c, c.Ping()
}

// MainEngine is the main engine's client, for tests that compare.
var MainEngine = sync.OnceValues(mainClient)

// Shared returns the package's second engine holding every test image of
// images/ (images.Resolve: the one registry of them; started
// and loaded at the first call, stopped by Main), ending tb (through
// testenv) when the machine cannot run it or the main engine lacks an
// image.
func Shared(tb testing.TB) *Engine {
	tb.Helper()
	need(tb)
	from, err := MainEngine()
	if err != nil {
		testenv.NoEngine(tb, err)
	}
	all, err := images.Resolve(nil)
	if err != nil {
		tb.Fatal(err)
	}
	var imgs []images.Image
	var refs []string
	for _, img := range all {
		if _, err := from.InspectImage(img.Ref); err != nil {
			testenv.NoImage(tb, img.Name, img.Ref)
		}
		imgs = append(imgs, img)
		refs = append(refs, img.Ref)
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.main {
		tb.Fatal("remoteengine.Shared: the package's TestMain must call remoteengine.Main (it stops the shared engine)")
	}
	if shared.e == nil && shared.err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*wait)
		defer cancel()
		e, err := start(ctx)
		if err == nil {
			t0 := time.Now()
			if err = e.Load(ctx, from, refs...); err != nil {
				if serr := e.Stop(); serr != nil {
					err = errors.Join(err, serr)
				}
			} else {
				e.Images = imgs
				tb.Logf("second engine %s (dockerd pid %d, storage %s, dir %s): loaded %v in %.1fs", e.Host, e.Pid, e.Driver, e.Dir, refs, time.Since(t0).Seconds())
			}
		}
		shared.e, shared.err = e, err
	}
	if shared.err != nil {
		tb.Fatal(shared.err)
	}
	return shared.e
}

func stopShared() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.e == nil || shared.err != nil {
		return nil
	}
	return shared.e.Stop()
}

// freePort asks the kernel for a free loopback port. dockerd binds it a
// moment later; if another process took it meanwhile, dockerd exits and
// start says so.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startTime is field 22 of /proc/PID/stat (clock ticks after boot), read
// after the last ')' since the command name may hold anything.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// loopDevices lists the loop devices backed by file.
func loopDevices(file string) []string {
	var out []string
	ms, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, m := range ms {
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		bf := strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
		if bf == file {
			out = append(out, filepath.Base(filepath.Dir(filepath.Dir(m))))
		}
	}
	return out
}

// waitFor polls cond until it holds or d has passed.
func waitFor(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// tail is the last lines of dockerd's log, for an error message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no dockerd log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return "dockerd log " + path + " (last lines):\n" + strings.Join(lines, "\n")
}
