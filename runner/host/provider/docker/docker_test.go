package docker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api"
	"github.com/docker/docker/api/types/versions"
	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/internal/testsupport/testimage"
	eng "github.com/sandproof/sandproof/runner/host/engine"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/provider/docker"
)

// BusyboxImage is imported once from the host's static busybox: a rootfs
// with nothing else, made here so the tests need no registry.
const busyboxImage = "sandproof-test/provider-busybox:3"

func engine(t testing.TB) *docker.Provider {
	t.Helper()
	p, err := docker.New()
	if err != nil {
		testenv.NoEngine(t, err)
	}
	testimage.Import(t, busyboxImage, busyboxRootfs)
	return p
}

// witness is a second client of the same engine, go-dockerclient through
// ory/dockertest, so that what the provider set up is read back by code
// that is not the provider's.
func witness(t *testing.T) *dc.Client {
	t.Helper()
	ep, err := eng.Default()
	if err != nil {
		t.Fatal(err)
	}
	pool, err := dockertest.NewPool(ep.Host)
	if err != nil {
		t.Fatal(err)
	}
	return pool.Client
}

// busyboxRootfs holds /bin/busybox and its applet links, /srv/keep with
// two files and a dir, and /srv/gone with a dir and a file, for the diff
// specs.
var busyboxRootfs = testimage.Rootfs{
	Dirs:    map[string]os.FileMode{"bin": 0o755, "tmp": 0o755, "etc": 0o755, "srv/keep/sub": 0o755, "srv/gone/deep": 0o755},
	Files:   map[string]string{"srv/keep/one": "srv/keep/one\n", "srv/keep/two": "srv/keep/two\n", "srv/keep/sub/three": "srv/keep/sub/three\n", "srv/gone/deep/f": "f\n"},
	Applets: []string{"sh", "sleep", "setsid", "rm", "cat", "echo", "printf", "sha256sum", "ls", "mkdir"},
}

func create(t testing.TB, p *docker.Provider) provider.Sandbox {
	t.Helper()
	sb, err := p.Create(context.Background(), provider.CreateSpec{Image: busyboxImage, Labels: map[string]string{"test": t.Name()}, Expire: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return sb
}

func TestDockerExecSignalStatus(t *testing.T) {
	p := engine(t)
	ctx := context.Background()
	sb := create(t, p)
	// The container killed under a running exec: a ProviderError, never
	// the exec's 137 (a command's own signal status is the contract's,
	// TestDockerProviderContract).
	started := make(chan struct{})
	done := make(chan error, 1)
	var killed provider.ExecResult
	go func() {
		var err error
		killed, err = sb.Exec(ctx, provider.ExecSpec{Argv: []string{"sh", "-c", "echo up; exec sleep 600"}, Stdin: readerSignal{started}})
		done <- err
	}()
	<-started
	// The exec is attached (it read its stdin); kill the container once
	// its sleep runs, so the kill meets a running exec, not its start.
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"sh", "-c",
			`for p in /proc/[0-9]*; do read -r c < $p/comm && [ "$c" = sleep ] && exit 0; done 2>/dev/null; exit 1`}})
		if err == nil && res.ExitCode == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exec's sleep never showed up: %v, %+v", err, res)
		}
	}
	if out, err := exec.Command("docker", "kill", sb.ID()).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %v %s", err, out)
	}
	if err := <-done; !provider.IsProviderError(err) || !errors.Is(err, provider.ErrGone) {
		t.Fatalf("exec in a killed container: %v (exit %d, stdout %q), want a ProviderError wrapping ErrGone", err, killed.ExitCode, killed.Stdout)
	}
}

// readerSignal closes its channel on the first Read (the exec is running
// and attached) and then blocks like an idle stdin.
type readerSignal struct{ c chan struct{} }

func (r readerSignal) Read([]byte) (int, error) {
	close(r.c)
	select {}
}

// The upper-dir diff (the fast path of Changes) must say what the
// engine's diff (its general path) says, for every kind of change: an
// addition under a new dir, a modification (copy-up), a whiteout, a
// deleted directory, and an opaque dir that replaced one of the image's.
func TestDockerChangesMatchEngine(t *testing.T) {
	p := engine(t)
	ctx := context.Background()
	sb := create(t, p)
	res, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"sh", "-c", `set -e
mkdir -p /newdir/sub && echo a > /newdir/sub/file
chmod 0700 /bin/busybox
rm /bin/ls
rm -rf /srv/gone
rm -rf /tmp && mkdir /tmp && echo b > /tmp/b
rm -rf /srv/keep && mkdir /srv/keep && echo changed > /srv/keep/two`}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("make the changes: %v, exit %d: %s", err, res.ExitCode, res.Stderr)
	}
	d := sb.(provider.Differ)
	got, how, err := d.Changes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if how != docker.DiffUpperDir {
		testenv.Missing(t, fmt.Sprintf("a local engine with overlay2 to compare the diff with (it was read by %s)", how),
			"run the tests against the engine `bash images/engine.sh start` starts")
	}
	want, err := sb.(*docker.Sandbox).EngineChanges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The engine's diff, read by a client that is not ours, agrees with
	// what EngineChanges made of it.
	raw, err := witness(t).ContainerChanges(sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != len(want) {
		t.Fatalf("EngineChanges has %d changes, the engine says %d: %v vs %v", len(want), len(raw), want, raw)
	}
	// An engine whose native overlay diff works says a replaced dir was
	// deleted; ours says what the full-tree diff says (modified, with
	// what it hid deleted). Compare in the latter's terms.
	for i, c := range want {
		switch {
		case c.Kind == provider.ChangeDeleted && c.Path == "/tmp":
			want[i].Kind = provider.ChangeModified
		case c.Kind == provider.ChangeDeleted && c.Path == "/srv/keep":
			want[i].Kind = provider.ChangeModified
			want = append(want, provider.Change{Path: "/srv/keep/one", Kind: provider.ChangeDeleted}, provider.Change{Path: "/srv/keep/sub", Kind: provider.ChangeDeleted})
		}
	}
	docker.SortChanges(got)
	docker.SortChanges(want)
	str := func(cs []provider.Change) string {
		var b strings.Builder
		for _, c := range cs {
			b.WriteString(c.Kind + " " + c.Path + "\n")
		}
		return b.String()
	}
	if str(got) != str(want) {
		t.Fatalf("upper-dir diff differs from the engine's:\n got:\n%s want:\n%s", str(got), str(want))
	}
	// Each kind is there, so the comparison above compared something.
	for _, line := range []string{"A /newdir", "A /newdir/sub", "A /newdir/sub/file", "C /bin/busybox", "D /bin/ls", "D /srv/gone", "C /tmp", "A /tmp/b",
		"C /srv/keep", "D /srv/keep/one", "D /srv/keep/sub", "C /srv/keep/two"} {
		if !strings.Contains(str(got), line+"\n") {
			t.Errorf("diff lacks %q:\n%s", line, str(got))
		}
	}
}

func dcKill(id string) dc.KillContainerOptions { return dc.KillContainerOptions{ID: id} }

// The client speaks the engine's API version when the engine is older
// than the client (Debian 12's engine: 1.41), its own otherwise.
func TestDockerNegotiatesTheAPIVersion(t *testing.T) {
	p := engine(t)
	sv, err := p.Client.ServerVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := api.DefaultVersion
	if versions.LessThan(sv.APIVersion, want) {
		want = sv.APIVersion
	}
	if got := p.Client.ClientVersion(); got != want {
		t.Fatalf("client API version %s; engine %s, client default %s: want %s", got, sv.APIVersion, api.DefaultVersion, want)
	}
	t.Logf("engine API %s, client default %s, speaking %s", sv.APIVersion, api.DefaultVersion, p.Client.ClientVersion())
}

// TestDockerExpiryNeverSignalsPidOne: the expiry's stop request reaches
// pid 1 at once, when pid 1 may still be runc's init (a Go program that
// exits on a TERM) rather than the sleep. So its signal must be one pid 1
// does not act on. Pid 1 here traps TERM (exit 2, as the Go runtime
// would) and records a WINCH: the record proves the expiry's signal
// arrived (the positive control), and the sandbox must still run after it.
func TestDockerExpiryNeverSignalsPidOne(t *testing.T) {
	p := engine(t)
	ctx := context.Background()
	sb, err := p.Create(ctx, provider.CreateSpec{Image: busyboxImage, Labels: map[string]string{"test": t.Name()}, Expire: 10 * time.Minute,
		Command: []string{"sh", "-c", `trap 'exit 2' TERM; trap 'echo got >> /tmp/winch' WINCH; : > /tmp/ready; while :; do sleep 0.05; done`}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	read := func(path string) string {
		res, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"cat", path}})
		if err != nil || res.ExitCode != 0 {
			return ""
		}
		return string(res.Stdout)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if info, _ := sb.Inspect(ctx); !info.Running || time.Now().After(deadline) {
				t.Fatalf("%s: not seen (sandbox running: %v)", what, info.Running)
			}
		}
	}
	waitFor("pid 1's traps set", func() bool {
		res, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"sh", "-c", "[ -e /tmp/ready ]"}})
		return err == nil && res.ExitCode == 0
	})
	docker.Expire(p, sb.ID(), 10*time.Minute)
	waitFor("the expiry's signal reaching pid 1", func() bool { return strings.Contains(read("/tmp/winch"), "got") })
	if info, err := sb.Inspect(ctx); err != nil || !info.Running {
		t.Fatalf("after the expiry's signal the sandbox is not running (%+v, %v): pid 1 acted on it", info, err)
	}
}
