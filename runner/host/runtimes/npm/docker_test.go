package npm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/images"
	"github.com/sandproof/sandproof/runner/host/provider"
	dockerprov "github.com/sandproof/sandproof/runner/host/provider/docker"
	"github.com/sandproof/sandproof/runner/host/runtimes"
	"github.com/sandproof/sandproof/runner/model"
)

// dockerImage returns the debian-12 image ref, skipping (failing under
// SANDPROOF_STRICT=1) when no engine runs or the image is not built.
func dockerImage(t *testing.T) string {
	t.Helper()
	testenv.Long(t, "runs the real harnesses in a container")
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		testenv.NoEngine(t, fmt.Errorf("docker info: %v: %s", err, out))
	}
	r, err := images.Lookup("debian-12")
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("docker", "image", "inspect", r.Ref()).Run(); err != nil {
		testenv.NoImage(t, "debian-12", r.Ref())
	}
	return r.Ref()
}

func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestRealHarnessesWriteTheDeliverable runs each npm manifest of adapters/ once, by hand
// (docker exec, no warden: the certify suite does the supervised run),
// against the scripted model in debian-12 with host networking and the
// runtime mounted read-only, and finds the token in /task/deliverable.txt.
func TestRealHarnessesWriteTheDeliverable(t *testing.T) {
	ref := dockerImage(t)
	cache := os.Getenv(runtimes.CacheEnv)
	if cache == "" {
		var err error
		if cache, err = runtimes.DefaultCacheDir(); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(runtimes.CacheEnv, cache)
	for _, m := range npmManifests(t) {
		name := m.Name
		t.Run(name, func(t *testing.T) {
			needNpm(t, m.Runtime.Prepare.With["package"], m.Runtime.Prepare.With["version"])
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			// debian-12 is glibc; the host's arch.
			rt, err := m.PrepareFor(ctx, t.TempDir(), runtimes.HostTarget().Arch, "glibc")
			if err != nil {
				t.Fatal(err)
			}
			rtDir := rt.Dir
			srv, err := model.Start(model.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			own, err := dockerprov.RunArgs(map[string]string{"sandproof-test": "runtimes"}, provider.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			id := docker(t, append(append([]string{"run", "-d", "--network", "host"}, own...),
				"-v", rtDir+":/rt:ro", "-e", m.APIKeyEnv+"=canary-"+name, ref, "sleep", "2147483647")...)
			defer exec.Command("docker", "rm", "-f", id).Run()
			docker(t, "exec", id, "sh", "-c", "mkdir -p /task /sess/home/tmp && chown -R 1000:1000 /task /sess")

			token := fmt.Sprintf("tok%d", time.Now().UnixNano())
			// Every placeholder's value as a session gives it ({model_origin}
			// included, which Claude Code's manifest uses).
			vals := m.Values(adapter.Context{ModelURL: srv.URL(), Model: "fake-model", TaskDir: "/task", RuntimeDir: "/rt"},
				"/sess", "/sess/home", model.CertPrompt("/task/deliverable.txt", token))
			// The manifest's state dirs, as session.Seed makes them.
			for _, d := range m.State.Dirs {
				x, err := adapter.Expand(d, vals)
				if err != nil {
					t.Fatal(err)
				}
				docker(t, "exec", id, "sh", "-c", "mkdir -p \"$1\" && chown -R 1000:1000 /sess", "sh", x)
			}
			env := map[string]string{}
			for k, v := range m.State.Env {
				env[k] = v
			}
			run := func(step adapter.Step, cwd string) ([]byte, error) {
				args := []string{"exec", "-u", "1000", "-w", cwd}
				e := map[string]string{}
				for k, v := range env {
					e[k] = v
				}
				for k, v := range step.Env {
					e[k] = v
				}
				for k, v := range e {
					x, err := adapter.Expand(v, vals)
					if err != nil {
						t.Fatal(err)
					}
					args = append(args, "-e", k+"="+x)
				}
				args = append(args, id)
				for _, a := range step.Argv {
					x, err := adapter.Expand(a, vals)
					if err != nil {
						t.Fatal(err)
					}
					args = append(args, x)
				}
				return exec.CommandContext(ctx, "docker", args...).Output()
			}
			if m.Install != nil {
				if out, err := run(*m.Install, "/sess/home"); err != nil {
					t.Fatalf("install: %v: %s", err, out)
				}
			}
			start := time.Now()
			out, err := run(m.Launch.Step, "/task")
			if err != nil {
				t.Fatalf("launch: %v: %s", err, out)
			}
			t.Logf("%s ran in %.1fs, %d event lines, %d model calls", name, time.Since(start).Seconds(), strings.Count(string(out), "\n"), srv.ModelCalls())
			if got := docker(t, "exec", id, "cat", "/task/deliverable.txt"); got != token {
				t.Fatalf("deliverable %q, want %q", got, token)
			}
			if strings.Contains(string(out), "canary-") {
				t.Fatal("the API key appears in the harness output")
			}
		})
	}
}
