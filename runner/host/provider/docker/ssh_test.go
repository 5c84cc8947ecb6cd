package docker_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	eng "github.com/sandproof/sandproof/runner/host/engine"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/provider/docker"
)

// The fake ssh: this test binary, run under the name "ssh" from a
// directory put first on PATH. It checks its argv against
// fakeSSHWantEnv and relays stdin and stdout to the engine at
// fakeSSHEngineEnv, as `ssh host docker system dial-stdio` would.
const (
	fakeSSHWantEnv   = "SANDPROOF_TEST_FAKE_SSH_WANT"
	fakeSSHEngineEnv = "SANDPROOF_TEST_FAKE_SSH_ENGINE"
	fakeSSHLogEnv    = "SANDPROOF_TEST_FAKE_SSH_LOG"
)

func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "ssh" {
		os.Exit(fakeSSH(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func fakeSSH(args []string) int {
	if f, err := os.OpenFile(os.Getenv(fakeSSHLogEnv), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
		fmt.Fprintln(f, strings.Join(args, " "))
		f.Close()
	}
	if got, want := strings.Join(args, " "), os.Getenv(fakeSSHWantEnv); got != want {
		fmt.Fprintf(os.Stderr, "fake ssh: argv %q, want %q\n", got, want)
		return 255
	}
	u, err := url.Parse(os.Getenv(fakeSSHEngineEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake ssh:", err)
		return 255
	}
	addr := u.Host
	if u.Scheme == "unix" {
		addr = u.Path
	}
	c, err := net.Dial(u.Scheme, addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake ssh: dial the engine:", err)
		return 255
	}
	go func() {
		io.Copy(c, os.Stdin)
		// EOF on stdin is a half-close, as dial-stdio does it.
		c.(interface{ CloseWrite() error }).CloseWrite()
	}()
	io.Copy(os.Stdout, c)
	return 0
}

// fakeSSHOnPath puts the fake ssh first on PATH, expecting argv want; it
// returns the file where each run of it writes a line.
func fakeSSHOnPath(t *testing.T, want string) string {
	t.Helper()
	ep, err := eng.Default()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ep.Host, "unix://") && !strings.HasPrefix(ep.Host, "tcp://") {
		t.Fatalf("the fake ssh relays to unix:// or tcp:// engines, not %s", ep)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(self, filepath.Join(dir, "ssh")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv(fakeSSHWantEnv, want)
	t.Setenv(fakeSSHEngineEnv, ep.Host)
	log := filepath.Join(dir, "runs")
	t.Setenv(fakeSSHLogEnv, log)
	return log
}

// An ssh:// engine is reached through `ssh -l USER -p PORT -- HOST docker
// system dial-stdio`: ping, create, exec (with stdin, half-closed through
// the helper), streamed exec and remove all go through it.
func TestDockerOverSSH(t *testing.T) {
	engine(t) // the engine and the test image are there
	log := fakeSSHOnPath(t, "-l alice -p 2222 -- engine.example docker system dial-stdio")
	p, err := docker.NewAt(eng.Endpoint{Host: "ssh://alice@engine.example:2222", From: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sb := create(t, p)
	res, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"sh", "-c", "cat; echo err >&2"}, Stdin: strings.NewReader("through ssh\n")})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "through ssh\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("exec over ssh = %d %q %q, %v", res.ExitCode, res.Stdout, res.Stderr, err)
	}
	proc := start(t, sb, nil, "cat")
	io.WriteString(proc.Stdin, "streamed\n")
	proc.Stdin.Close()
	if out, err := io.ReadAll(proc.Stdout); err != nil || string(out) != "streamed\n" {
		t.Fatalf("streamed exec over ssh: %q, %v", out, err)
	}
	if code, err := proc.Wait(); err != nil || code != 0 {
		t.Fatalf("streamed exec over ssh: wait = %d, %v", code, err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := sb.Inspect(ctx); err != nil || info.Exists {
		t.Fatalf("after destroy over ssh: %+v, %v", info, err)
	}
	// It all went through the helper: one run for the requests' pooled
	// connection at least, and one for each hijacked exec.
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if runs := strings.Count(string(b), "\n"); runs < 3 {
		t.Fatalf("the fake ssh ran %d times, want at least 3:\n%s", runs, b)
	}
}

// An ssh that refuses (here: called with another user than the fake
// expects) is a clear connect error quoting ssh's own stderr.
func TestDockerOverSSHWrongArgv(t *testing.T) {
	engine(t)
	fakeSSHOnPath(t, "-l alice -p 2222 -- engine.example docker system dial-stdio")
	_, err := docker.NewAt(eng.Endpoint{Host: "ssh://bob@engine.example:2222", From: "test"})
	if err == nil {
		t.Fatal("connected through an ssh that refused its argv")
	}
	for _, want := range []string{"connection helper", "ssh -l bob -p 2222 -- engine.example docker system dial-stdio", "fake ssh: argv", "exit status 255"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if !provider.IsProviderError(err) {
		t.Errorf("error %v is not a ProviderError", err)
	}
	t.Logf("the error: %v", err)
}
