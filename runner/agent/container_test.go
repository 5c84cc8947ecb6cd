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

	"github.com/sandproof/sandproof/images"
	"github.com/sandproof/sandproof/runner/agent"
	"github.com/sandproof/sandproof/runner/provider"
	"github.com/sandproof/sandproof/runner/testenv"
)

// The agent in a real container with no network: the harness's loopback
// reaches the host's HTTP server only through the agent's tunnel, and an
// exec as a name from the image's /etc/passwd gets that user's HOME. The
// container is started with the docker CLI (`docker run -i`): the docker
// provider's Streamer is another change.
func TestAgentInContainerWithNoNetwork(t *testing.T) {
	testenv.Docker(t)
	docker, err := exec.LookPath("docker")
	if err != nil {
		testenv.Package(t, "the docker command", "docker.io")
	}
	rec, err := images.Lookup("debian-12")
	if err != nil {
		t.Fatal(err)
	}
	ref := rec.Ref()
	if out, err := exec.Command(docker, "image", "inspect", "--format", "{{.Id}}", ref).CombinedOutput(); err != nil {
		testenv.NoImage(t, "debian-12", ref+": "+strings.TrimSpace(string(out)))
	}
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

	name := fmt.Sprintf("sandproof-agent-test-%d", time.Now().UnixNano())
	cmd := exec.Command(docker, "run", "-i", "--rm", "--name", name, "--network", "none",
		"--label", "sandproof-test=agent", "-v", sandagent+":/sandagent:ro", ref,
		"/sandagent", "serve", "--listen", "127.0.0.1:8080")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exec.Command(docker, "rm", "-f", name).Run() // ours, by name
		cmd.Wait()
	})
	ctx := context.Background()
	h, err := agent.NewHost(ctx, stdout, stdin, agent.HostOptions{Target: l.Addr().String(), HelloTimeout: 60 * time.Second})
	if err != nil {
		t.Fatalf("hello: %v (stderr %q)", err, stderr.String())
	}
	defer h.Close()
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
