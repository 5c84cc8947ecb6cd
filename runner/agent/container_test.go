package agent_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/agenthost"
	"github.com/sandproof/sandproof/runner/host/images"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// startContainer runs the agent in a container of the debian-12 test
// image with no network (docker run -i, removed at the end) and returns
// the host end and the container's name.
func startContainer(tb testing.TB, target string) (*agenthost.Host, string) {
	tb.Helper()
	testenv.Docker(tb)
	docker, err := exec.LookPath("docker")
	if err != nil {
		testenv.Package(tb, "the docker command", "docker.io")
	}
	rec, err := images.Lookup("debian-12")
	if err != nil {
		tb.Fatal(err)
	}
	ref := rec.Ref()
	if out, err := exec.Command(docker, "image", "inspect", "--format", "{{.Id}}", ref).CombinedOutput(); err != nil {
		testenv.NoImage(tb, "debian-12", ref+": "+strings.TrimSpace(string(out)))
	}
	name := fmt.Sprintf("sandproof-agent-test-%d", time.Now().UnixNano())
	cmd := exec.Command(docker, "run", "-i", "--rm", "--name", name, "--network", "none",
		"--label", "sandproof-test=agent", "-v", sandagent+":/sandagent:ro", ref,
		"/sandagent", "serve", "--listen", "127.0.0.1:8080")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	h, err := agenthost.NewHost(context.Background(), stdout, stdin, agenthost.Options{Target: target, HelloTimeout: 60 * time.Second})
	tb.Cleanup(func() {
		if h != nil {
			h.Close()
		}
		exec.Command(docker, "rm", "-f", name).Run() // ours, by name
		cmd.Wait()
	})
	if err != nil {
		tb.Fatalf("hello: %v (stderr %q)", err, stderr.String())
	}
	return h, name
}

// BenchmarkExecInContainer is one `true` in a container through the
// agent's channel beside one `docker exec` (a round trip to the engine
// each), in the same container.
func BenchmarkExecInContainer(b *testing.B) {
	h, name := startContainer(b, "")
	ctx := context.Background()
	b.Run("agent", func(b *testing.B) {
		for b.Loop() {
			if r, err := h.Exec(ctx, provider.ExecSpec{Argv: []string{"true"}}); err != nil || r.ExitCode != 0 {
				b.Fatal(r, err)
			}
		}
	})
	b.Run("docker-exec", func(b *testing.B) {
		for b.Loop() {
			if out, err := exec.Command("docker", "exec", name, "true").CombinedOutput(); err != nil {
				b.Fatal(string(out), err)
			}
		}
	})
}

// The agent in a real container with no network: the harness's loopback
// reaches the host's HTTP server only through the agent's tunnel, and an
// exec as a name from the image's /etc/passwd gets that user's HOME. The
// container is started with the docker CLI (`docker run -i`): the docker
// provider's Streamer is another change.
func TestAgentInContainerWithNoNetwork(t *testing.T) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "relay saw %s %s", r.Method, r.URL.Path)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	hostPort := l.Addr().(*net.TCPAddr).Port
	h, _ := startContainer(t, l.Addr().String())
	ctx := context.Background()
	bash := func(script string) provider.ExecResult {
		t.Helper()
		res, err := h.Exec(ctx, provider.ExecSpec{Argv: []string{"bash", "-c", script}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// Positive control of the isolation: the host's server is not
	// reachable from the container's own loopback.
	if r := bash(fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d", hostPort)); r.ExitCode == 0 {
		t.Fatalf("the container reached the host's port %d directly: network is not none", hostPort)
	}
	r := bash(`exec 3<>/dev/tcp/127.0.0.1/8080; printf 'GET /v1/models HTTP/1.0\r\nHost: x\r\n\r\n' >&3; cat <&3`)
	if r.ExitCode != 0 || !strings.Contains(string(r.Stdout), "relay saw GET /v1/models") {
		t.Fatalf("through the tunnel: %d %q %q", r.ExitCode, r.Stdout, r.Stderr)
	}
	res, err := h.Exec(ctx, provider.ExecSpec{Argv: []string{"sh", "-c", "id -un; echo $HOME"}, User: "nobody"})
	if err != nil || string(res.Stdout) != "nobody\n/nonexistent\n" {
		t.Fatalf("exec as nobody: %q %q %v", res.Stdout, res.Stderr, err)
	}
	// Put and get in the container's own filesystem.
	if err := h.Put(ctx, []provider.Entry{{Path: "/srv/agent/f", Data: []byte("in the container"), Mode: 0o640, UID: 65534, GID: 65534}}); err != nil {
		t.Fatal(err)
	}
	if r := bash("stat -c '%a %u %g' /srv/agent /srv/agent/f"); string(r.Stdout) != "755 0 0\n640 65534 65534\n" {
		t.Fatalf("put in the container: %q %q", r.Stdout, r.Stderr)
	}
	dst := t.TempDir() + "/f"
	if _, err := h.Fetch(ctx, "/srv/agent/f", dst, provider.FetchLimits{}.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst); !bytes.Equal(b, []byte("in the container")) {
		t.Fatalf("fetched %q", b)
	}
}
