package remoteengine_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/sandproof/sandproof/internal/testsupport/remoteengine"
	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/engine"
	"github.com/sandproof/sandproof/runner/host/images"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/provider/docker"
)

func TestMain(m *testing.M) { os.Exit(remoteengine.Main(m)) }

// mainHost is the main engine's address, as sandproof resolves it.
func mainHost(t *testing.T) string {
	t.Helper()
	if _, err := remoteengine.MainEngine(); err != nil {
		t.Fatal(err)
	}
	ep, err := engine.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	return ep.Host
}

// providerAt is the docker provider on the engine at host.
func providerAt(t *testing.T, host string) *docker.Provider {
	t.Helper()
	p, err := docker.NewAt(engine.Endpoint{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// bindSandbox starts a container of ref with binds (host:target:ro) made
// straight through the Engine API: the provider itself never bind-mounts
// a host path, which is what this trap is for.
func bindSandbox(t *testing.T, p *docker.Provider, ref string, binds []string) provider.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	labels, err := docker.Labels(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.Client.ContainerCreate(ctx, &container.Config{Image: ref, Entrypoint: provider.DefaultCommand, Labels: labels},
		&container.HostConfig{Binds: binds, NetworkMode: provider.NetworkNone}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Client.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil {
			t.Error(err)
		}
	})
	if err := p.Client.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	sb, err := p.Open(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func imageRef(t *testing.T, e *remoteengine.Engine, name string) string {
	t.Helper()
	for _, img := range e.Images {
		if img.Name == name {
			return img.Ref
		}
	}
	t.Fatalf("image %s not loaded into the second engine (loaded: %v)", name, e.Images)
	return ""
}

// sandbox creates a sandbox on p and destroys it when t ends.
func sandbox(t *testing.T, p *docker.Provider, spec provider.CreateSpec) provider.Sandbox {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sb.Destroy(ctx); err != nil {
			t.Error(err)
		}
	})
	return sb
}

func run(t *testing.T, sb provider.Sandbox, argv ...string) provider.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := sb.Exec(ctx, provider.ExecSpec{Argv: argv})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSecondEngineIsApart checks what makes the engine a stand-in for a
// remote host: overlay2 storage (not vfs), its own id, its own mount
// namespace, its own containerd (a child of its dockerd, configured in its
// exec root), and no listening socket but tcp on 127.0.0.1:PORT (and
// unix sockets inside its own exec root).
func TestSecondEngineIsApart(t *testing.T) {
	e := remoteengine.Shared(t)
	if e.Driver != "overlay2" {
		t.Errorf("storage driver %q, want overlay2", e.Driver)
	}
	mainEngine, _ := remoteengine.MainEngine()
	info, err := mainEngine.Info()
	if err != nil {
		t.Fatal(err)
	}
	if e.ID == "" || e.ID == info.ID {
		t.Errorf("engine id %q, main engine's %q: want two engines", e.ID, info.ID)
	}
	own, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := os.Readlink("/proc/" + strconv.Itoa(e.Pid) + "/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	if own == theirs {
		t.Errorf("dockerd %d shares this process's mount namespace %s", e.Pid, own)
	}

	var containerd []string
	for _, p := range children(t, e.Pid) {
		if cmd := cmdline(p); strings.HasPrefix(cmd, "containerd ") {
			containerd = append(containerd, cmd)
		}
	}
	want := "--config " + filepath.Join(e.Dir, "exec", "containerd") + "/"
	if len(containerd) != 1 || !strings.Contains(containerd[0], want) {
		t.Errorf("containerd children of dockerd %d: %q; want one, its config under %s", e.Pid, containerd, want)
	}

	tcp, unix := listening(t, e.Pid)
	port := e.Host[strings.LastIndexByte(e.Host, ':')+1:]
	if !slices.Equal(tcp, []string{"127.0.0.1:" + port}) {
		t.Errorf("dockerd %d listens on tcp %v; want only 127.0.0.1:%s", e.Pid, tcp, port)
	}
	for _, u := range unix {
		if !strings.HasPrefix(u, filepath.Join(e.Dir, "exec")+"/") {
			t.Errorf("dockerd %d listens on unix socket %s, outside its exec root", e.Pid, u)
		}
	}
}

// children lists the pids whose parent is pid.
func children(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, d := range ents {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

func cmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// listening returns the tcp addresses and unix socket paths pid listens on.
func listening(t *testing.T, pid int) (tcp, unix []string) {
	t.Helper()
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name())
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	if len(inodes) == 0 {
		t.Fatalf("dockerd %d holds no socket", pid)
	}
	scan := func(path string, each func(f []string)) {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		s := bufio.NewScanner(f)
		s.Scan() // the header
		for s.Scan() {
			each(strings.Fields(s.Text()))
		}
	}
	for _, p := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		scan(p, func(f []string) {
			if len(f) > 9 && f[3] == "0A" && inodes[f[9]] {
				tcp = append(tcp, hexAddr(t, f[1]))
			}
		})
	}
	scan("/proc/net/unix", func(f []string) {
		if len(f) > 7 && f[3] == "00010000" && inodes[f[6]] {
			unix = append(unix, f[7])
		}
	})
	return tcp, unix
}

// hexAddr turns /proc/net/tcp's "0100007F:5CC7" into "127.0.0.1:23751"
// (an IPv6 address is left in hex: it should not be there at all).
func hexAddr(t *testing.T, s string) string {
	t.Helper()
	ip, port, _ := strings.Cut(s, ":")
	pn, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		t.Fatal(err)
	}
	if len(ip) != 8 {
		return ip + ":" + strconv.FormatUint(pn, 10)
	}
	v, err := strconv.ParseUint(ip, 16, 32)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d.%d.%d.%d:%d", v&0xff, v>>8&0xff, v>>16&0xff, v>>24, pn)
}

// TestHostPathsAreNotThere bind-mounts files of the host's /tmp, /var/tmp
// and cache dir into a sandbox of each engine: the main engine's sandbox
// reads them (the positive control), the second engine's does not.
func TestHostPathsAreNotThere(t *testing.T) {
	e := remoteengine.Shared(t)
	ref := imageRef(t, e, "debian-12")
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	var binds []string
	contents := map[string]string{}
	for i, base := range []string{os.TempDir(), "/var/tmp", cache} {
		if err := os.MkdirAll(base, 0o755); err != nil {
			t.Fatal(err)
		}
		d, err := os.MkdirTemp(base, "sandproof-engine2-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		f := filepath.Join(d, "host.txt")
		content := fmt.Sprintf("written on the host in %s", base)
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		target := "/mnt/host" + strconv.Itoa(i)
		binds = append(binds, f+":"+target+":ro")
		contents[target] = content
	}
	for _, c := range []struct {
		name    string
		host    string
		visible bool
	}{{"main engine", mainHost(t), true}, {"second engine", e.Host, false}} {
		sb := bindSandbox(t, providerAt(t, c.host), ref, binds)
		for target, content := range contents {
			r := run(t, sb, "cat", target)
			got := r.ExitCode == 0 && string(r.Stdout) == content
			if got != c.visible {
				t.Errorf("%s: cat %s (%s): exit %d, %q, stderr %q; want visible=%v", c.name, target, content, r.ExitCode, r.Stdout, r.Stderr, c.visible)
			}
		}
	}
}

// TestOverlayIsNotReadableFromTheHost makes a change in a sandbox of each
// engine: on the main engine the provider reads it from the overlay upper
// dir, which the host can stat (the positive control); on the second the
// upper dir the engine names does not exist for the host and the provider
// asks the engine, with the same change in its list.
func TestOverlayIsNotReadableFromTheHost(t *testing.T) {
	e := remoteengine.Shared(t)
	ref := imageRef(t, e, "debian-12")
	for _, c := range []struct {
		name     string
		host     string
		how      string
		readable bool
	}{{"main engine", mainHost(t), docker.DiffUpperDir, true}, {"second engine", e.Host, docker.DiffEngine, false}} {
		p := providerAt(t, c.host)
		sb := sandbox(t, p, provider.CreateSpec{Image: ref, Network: provider.NetworkNone})
		if r := run(t, sb, "sh", "-c", "echo x > /made-here"); r.ExitCode != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, r.ExitCode, r.Stderr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		changes, how, err := sb.(provider.Differ).Changes(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if how != c.how || !slices.Contains(changes, provider.Change{Path: "/made-here", Kind: provider.ChangeAdded}) {
			t.Errorf("%s: changes read by %q: %v; want by %q with /made-here added", c.name, how, changes, c.how)
		}
		ct, err := p.Client.ContainerInspect(context.Background(), sb.ID())
		if err != nil {
			t.Fatal(err)
		}
		upper := ct.GraphDriver.Data["UpperDir"]
		if upper == "" {
			t.Fatalf("%s: no UpperDir in %+v", c.name, ct.GraphDriver)
		}
		_, err = os.Stat(filepath.Join(upper, "made-here"))
		if readable := err == nil; readable != c.readable || (!readable && !errors.Is(err, fs.ErrNotExist)) {
			t.Errorf("%s: stat of the change in the upper dir %s from the host: %v; want readable=%v", c.name, upper, err, c.readable)
		}
	}
}

// TestCLIAndProviderReachIt: the docker CLI and the provider, given the
// engine as DOCKER_HOST, talk to it (its id), and not to the main engine;
// without it they reach the main engine (the positive control). The images
// loaded have the main engine's ids.
func TestCLIAndProviderReachIt(t *testing.T) {
	e := remoteengine.Shared(t)
	if _, err := exec.LookPath("docker"); err != nil {
		t.Fatal("no docker CLI on PATH (images/prereqs.sh installs it)")
	}
	mainEngine, _ := remoteengine.MainEngine()
	mi, err := mainEngine.Info()
	if err != nil {
		t.Fatal(err)
	}
	cliID := func(env []string) string {
		cmd := exec.Command("docker", "info", "--format", "{{.ID}}")
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("docker info: %v: %s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := cliID(e.Env(os.Environ())); got != e.ID {
		t.Errorf("DOCKER_HOST=%s docker info: id %q, want the second engine's %q", e.Host, got, e.ID)
	}
	if got := cliID(engine.Endpoint{Host: mainHost(t)}.Env(os.Environ())); got != mi.ID {
		t.Errorf("docker info on the main engine: id %q, want %q", got, mi.ID)
	}

	// docker.New resolves the engine once per process (engine.Default):
	// this is the package's only call, made with DOCKER_HOST set, and the
	// id check below would catch an engine resolved earlier.
	t.Setenv("DOCKER_HOST", e.Host)
	p, err := docker.New()
	if err != nil {
		t.Fatal(err)
	}
	pi, err := p.Client.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if pi.ID != e.ID {
		t.Errorf("docker.New with DOCKER_HOST=%s reached engine %q (%s), want %q", e.Host, pi.ID, pi.Name, e.ID)
	}

	all, err := images.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Images) != len(all) || len(all) == 0 {
		t.Fatalf("loaded %v, want every test image %v", e.Images, all)
	}
	for _, img := range e.Images {
		a, err := mainEngine.InspectImage(img.Ref)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := p.Client.ImageInspectWithRaw(context.Background(), img.Ref)
		if err != nil {
			t.Fatal(err)
		}
		if a.ID != b.ID || a.ID == "" {
			t.Errorf("%s: id %s on the main engine, %s on the second", img.Ref, a.ID, b.ID)
		}
	}
}

// engineWithSandbox starts an engine of its own with one small image and
// a container of it, and returns the engine, its processes (dockerd, the
// container's init, dockerd's children), each seen alive (the positive
// control), and its data root's file, seen backed by a loop device.
func engineWithSandbox(t *testing.T) (*remoteengine.Engine, []int, string) {
	t.Helper()
	e := remoteengine.Start(t)
	// An image of its own, small and made here: this engine has none.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mainEngine, err := remoteengine.MainEngine()
	if err != nil {
		t.Fatal(err)
	}
	all, err := images.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(all, func(img images.Image) bool { return img.Name == "alpine-class" })
	if _, err := mainEngine.InspectImage(all[i].Ref); err != nil {
		testenv.NoImage(t, all[i].Name, all[i].Ref)
	}
	ref := all[i].Ref
	if err := e.Load(ctx, mainEngine, ref); err != nil {
		t.Fatal(err)
	}
	// Not through sandbox(): the engine's end removes it, not t's cleanup.
	sb, err := providerAt(t, e.Host).Create(ctx, provider.CreateSpec{Image: ref, Network: provider.NetworkNone})
	if err != nil {
		t.Fatal(err)
	}
	info, err := sb.Inspect(ctx)
	if err != nil || !info.Exists {
		t.Fatalf("sandbox: %+v, %v", info, err)
	}
	ct, err := e.Client.InspectContainer(sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	pids := append([]int{e.Pid, ct.State.Pid}, children(t, e.Pid)...)
	for _, p := range pids {
		if syscall.Kill(p, 0) != nil {
			t.Fatalf("pid %d (%s) not alive before the engine's end", p, cmdline(p))
		}
	}
	img := filepath.Join(e.Dir, "disk.img")
	if !loopAttached(img) {
		t.Fatalf("no loop device backs %s before the engine's end", img)
	}
	return e, pids, img
}

// leftNothing: after the engine's end, none of pids runs, no loop device
// backs its data root, its dir is gone and it does not answer.
func leftNothing(t *testing.T, e *remoteengine.Engine, pids []int, img string) {
	t.Helper()
	for _, p := range pids {
		if running(p) {
			t.Errorf("pid %d (%s) alive after the engine's end", p, cmdline(p))
		}
	}
	if loopAttached(img) {
		t.Errorf("a loop device still backs %s", img)
	}
	if _, err := os.Stat(e.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s after the engine's end: %v", e.Dir, err)
	}
	if err := e.Client.Ping(); err == nil {
		t.Errorf("%s still answers", e.Host)
	}
}

// TestStopLeavesNothing starts an engine of its own, runs a container in
// it, and stops it: dockerd, its containerd and the container's processes
// are gone, the loop device is detached and the dir removed. Before the
// stop each of them is seen (the positive control).
func TestStopLeavesNothing(t *testing.T) {
	e, pids, img := engineWithSandbox(t)
	if err := e.Stop(); err != nil {
		t.Fatal(err)
	}
	leftNothing(t, e, pids, img)
}

// TestKillLeavesNothing: an engine killed as a crash would (SIGKILL to
// dockerd, then to what it had started, which a crash leaves running)
// stops answering at once, and once Stop has run nothing of it is left.
func TestKillLeavesNothing(t *testing.T) {
	e, pids, img := engineWithSandbox(t)
	if err := e.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Ping(); err == nil {
		t.Fatalf("%s answers after the kill", e.Host)
	}
	if err := e.Stop(); err != nil {
		t.Fatal(err)
	}
	leftNothing(t, e, pids, img)
}

// running: pid is a process that has not ended (a zombie waiting for
// its reaper, the host's init once its parent died, has).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

func loopAttached(file string) bool {
	ms, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, m := range ms {
		b, err := os.ReadFile(m)
		if err == nil && strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)") == file {
			return true
		}
	}
	return false
}
