package session_test

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/internal/testsupport/testimage"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/provider/docker"
	"github.com/sandproof/sandproof/runner/host/session"
	"github.com/sandproof/sandproof/runner/warden/harness"
)

const busyboxImage = "sandproof-test/session-busybox:1"

// dockerSandbox starts a container from a busybox-only image (no bash, no
// libc) made from the host's static busybox; without an engine it skips
// (fails under SANDPROOF_STRICT=1).
func dockerSandbox(t *testing.T) (*docker.Provider, provider.Sandbox) {
	t.Helper()
	p, err := docker.New()
	if err != nil {
		testenv.NoEngine(t, err)
	}
	testimage.Import(t, busyboxImage, busyboxRootfs)
	sb, err := p.Create(context.Background(), provider.CreateSpec{
		Image: busyboxImage, Network: provider.NetworkNone,
		Labels: map[string]string{"test": t.Name()}, Expire: 10 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return p, sb
}

// busyboxRootfs has no sha256sum and no bash on purpose: the probe hashes,
// bash comes from the session's private bin.
var busyboxRootfs = testimage.Rootfs{
	Dirs:    map[string]os.FileMode{"tmp": 0o1777},
	Applets: []string{"sh", "sleep", "setsid", "rm", "cat", "echo", "printf"},
}

func bashAdapter(mode string) session.Adapter {
	a := testAdapter(mode)
	a.NeedsBash = true
	a.Launch = func(e session.Env) (harness.Params, error) {
		return harness.Params{Argv: []string{"bash", "-c", script, "bash", e.RunDir, e.Prompt, mode}}, nil
	}
	return a
}

func TestDockerSessionEndToEnd(t *testing.T) {
	if bins.Bash == nil {
		testenv.Package(t, "/bin/bash-static", "bash-static")
	}
	_, sb := dockerSandbox(t)
	ctx := ctxT(t, 3*time.Minute)
	ad := bashAdapter("exit")
	// The install step needs bash too: its params, sent with the session
	// tree before seed knew bash was missing, must be made again with the
	// private bin on their path.
	ad.Install = func(e session.Env) (session.Step, error) {
		return session.Step{Params: harness.Params{Argv: []string{"bash", "-c", `echo "$BASH_VERSION" > "$1/installed"`, "bash", e.Home},
			Mode: harness.ModeDirect}, Deadline: 60}, nil
	}
	s, err := session.New(sb, ad, session.Config{ID: "dock", Binaries: bins, Owned: true, CaptureDir: t.TempDir(), UnconfinedCaptures: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	installed := filepath.Join(t.TempDir(), "installed")
	if err := sb.Download(ctx, path.Join(s.Dir(), "home", "installed"), installed); err != nil {
		t.Fatalf("the install step's file: %v", err)
	}
	if b, _ := os.ReadFile(installed); len(strings.TrimSpace(string(b))) == 0 {
		t.Fatalf("the install step's file holds %q, want bash's version", b)
	}
	// bash was provided privately, never into the image's paths.
	for _, p := range []string{"/bin/bash", "/usr/bin/bash"} {
		if err := sb.Download(ctx, p, t.TempDir()+"/b"); !errors.Is(err, provider.ErrPathNotFound) {
			t.Fatalf("%s after seed: %v, want ErrPathNotFound", p, err)
		}
	}
	res, err := s.Activate(ctx, "a1", "tok-dock", 60)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Receipt; r.Cause != "exited" || !r.CleanupConfirmed || r.ReturnCode == nil || *r.ReturnCode != 0 || len(r.Reached) == 0 {
		t.Fatalf("receipt: cause %q confirmed %t rc %v reached %d", r.Cause, r.CleanupConfirmed, r.ReturnCode, len(r.Reached))
	}
	cr, err := s.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var outFile string
	for _, c := range cr.Captured {
		if strings.HasSuffix(c.Path, "/out.txt") {
			outFile = c.HostPath
		}
	}
	if b, err := os.ReadFile(outFile); err != nil || string(b) != "tok-dock" {
		t.Fatalf("captured out.txt = %q, %v", b, err)
	}
	if !cr.SessionDirRemoved {
		t.Fatal("session dir not removed")
	}
	if err := sb.Download(ctx, s.Dir(), t.TempDir()+"/x"); !errors.Is(err, provider.ErrPathNotFound) {
		t.Fatalf("session dir after close: %v, want ErrPathNotFound", err)
	}
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := sb.Inspect(ctx); err != nil || info.Exists {
		t.Fatalf("owned container after release: %+v, %v", info, err)
	}
}

func TestDockerKilledContainerIsProviderError(t *testing.T) {
	p, sb := dockerSandbox(t)
	ctx := ctxT(t, 3*time.Minute)
	ad := testAdapter("hang")
	s, err := session.New(sb, ad, session.Config{ID: "killed", Binaries: bins, Owned: true, CaptureDir: t.TempDir(), UnconfinedCaptures: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		res, err := s.Activate(ctx, "a1", "tok", 120)
		if err == nil {
			t.Errorf("activation in a killed container returned a result: %+v", res.Receipt)
		}
		errc <- err
	}()
	pidFile := s.Dir() + "/run/a1/sleep.pid"
	waitFor(t, func() bool {
		err := sb.Download(ctx, pidFile, t.TempDir()+"/pid")
		return err == nil
	})
	if err := p.Client.ContainerKill(ctx, sb.ID(), "KILL"); err != nil {
		t.Fatal(err)
	}
	err = <-errc
	var pe *provider.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("activation error %v (%T), want a *provider.ProviderError", err, err)
	}
	if _, err := s.Close(ctx); !provider.IsProviderError(err) {
		t.Fatalf("close of a killed container: %v, want a ProviderError", err)
	}
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
