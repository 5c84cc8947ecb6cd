package docker_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"

	eng "github.com/sandproof/sandproof/runner/host/engine"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/provider/docker"
)

// The provider's per-case costs on the Engine API client ("new") beside
// the same requests made through ory/dockertest's go-dockerclient, which
// the provider used before ("old"): run both in one `go test -bench` so
// that the machine's load is the same for both.
//
//	SANDPROOF_DOCKER=1 go test ./runner/host/provider/docker/ -run '^$' -bench . -benchtime 30x

func oldPool(b *testing.B) *dockertest.Pool {
	ep, err := eng.Default()
	if err != nil {
		b.Fatal(err)
	}
	pool, err := dockertest.NewPool(ep.Host)
	if err != nil {
		b.Fatal(err)
	}
	return pool
}

// oldExec is what the provider's Exec did through go-dockerclient: create,
// start attached, inspect the exec, inspect the container.
func oldExec(b *testing.B, c *dc.Client, id string, argv []string) int {
	ex, err := c.CreateExec(dc.CreateExecOptions{Container: id, Cmd: argv, AttachStdout: true, AttachStderr: true})
	if err != nil {
		b.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := c.StartExec(ex.ID, dc.StartExecOptions{OutputStream: &out, ErrorStream: &errb}); err != nil {
		b.Fatal(err)
	}
	ins, err := c.InspectExec(ex.ID)
	if err != nil {
		b.Fatal(err)
	}
	ctr, err := c.InspectContainer(id)
	if err != nil || !ctr.State.Running {
		b.Fatalf("container: %v", err)
	}
	return ins.ExitCode
}

func BenchmarkExec(b *testing.B) {
	p := engine(b)
	sb, err := p.Create(context.Background(), provider.CreateSpec{Image: busyboxImage, Expire: 10 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Destroy(context.Background())
	argv := []string{"echo", "ok"}
	b.Run("old", func(b *testing.B) {
		c := oldPool(b).Client
		for b.Loop() {
			if code := oldExec(b, c, sb.ID(), argv); code != 0 {
				b.Fatalf("exit %d", code)
			}
		}
	})
	b.Run("new", func(b *testing.B) {
		for b.Loop() {
			res, err := sb.Exec(context.Background(), provider.ExecSpec{Argv: argv})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("exec: %v, %d", err, res.ExitCode)
			}
		}
	})
}

func BenchmarkCreateDestroy(b *testing.B) {
	p := engine(b)
	labels, err := docker.Labels(map[string]string{"sandproof.test": "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("old", func(b *testing.B) {
		pool := oldPool(b)
		repo, tag := "sandproof-test/provider-busybox", busyboxImage[len("sandproof-test/provider-busybox:"):]
		for b.Loop() {
			res, err := pool.RunWithOptions(&dockertest.RunOptions{Repository: repo, Tag: tag, Entrypoint: provider.DefaultCommand[:1],
				Cmd: provider.DefaultCommand[1:], Labels: labels}, func(hc *dc.HostConfig) {
				hc.NetworkMode = "none"
				hc.RestartPolicy = dc.RestartPolicy{Name: "no"}
			})
			if err != nil {
				b.Fatal(err)
			}
			res.Expire(600)
			if err := pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: res.Container.ID, Force: true, RemoveVolumes: true}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("new", func(b *testing.B) {
		for b.Loop() {
			sb, err := p.Create(context.Background(), provider.CreateSpec{Image: busyboxImage, Labels: map[string]string{"sandproof.test": "bench"}, Expire: 10 * time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			if err := sb.Destroy(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
