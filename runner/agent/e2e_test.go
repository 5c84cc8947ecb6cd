package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/internal/testsupport/local"
	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/agenthost"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/provider/providertest"
)

// sandagent is the real binary, built once: the end-to-end tests run the
// agent as its own process, as it runs in a sandbox.
var sandagent string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sandagent-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sandagent = filepath.Join(dir, "sandagent")
	cmd := exec.Command("go", "build", "-o", sandagent, "github.com/sandproof/sandproof/cmd/sandagent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build sandagent: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// start makes a local sandbox and starts the agent in it (confined to its
// root), wrapped as a provider.Sandbox.
func start(t testing.TB, opt agenthost.Options, extra ...string) (*agenthost.Sandbox, *local.Sandbox) {
	t.Helper()
	if euid := os.Geteuid(); euid != 0 {
		// It sets owners and runs commands as other users.
		testenv.Missing(t, fmt.Sprintf("root for the agent, which runs as root in a sandbox (euid is %d)", euid), "run the tests as root, e.g. `sudo make test`")
	}
	ctx := context.Background()
	// Commands run as other users: the dirs above the sandbox's root
	// must let them in (t.TempDir's parent does not).
	dir, err := os.MkdirTemp("", "sandagent-sandbox-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	under, err := local.New(dir).Create(ctx, provider.CreateSpec{})
	if err != nil {
		t.Fatal(err)
	}
	lsb := under.(*local.Sandbox)
	argv := append([]string{sandagent, "serve", "--root", lsb.Root()}, extra...)
	var stderr syncBuffer
	sb, err := agenthost.Start(ctx, lsb, argv, &stderr, opt)
	if err != nil {
		t.Fatalf("start: %v (stderr %q)", err, stderr.String())
	}
	t.Cleanup(func() { sb.Close() })
	return sb, lsb
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The agent's sandbox keeps the provider contract: the agent confined to
// a local sandbox's root, its commands host processes that see host
// paths. It is no Streamer (its channel runs over one).
func TestAgentProviderContract(t *testing.T) {
	providertest.Run(t, providertest.Env{
		New: func(t testing.TB) provider.Sandbox {
			sb, _ := start(t, agenthost.Options{})
			return sb
		},
		Caps: providertest.Caps{Put: true, Users: true, Remover: true},
	})
}

// What the contract (TestAgentProviderContract) leaves to the agent: a
// missing command's message on stderr; HOME from passwd, given, or a
// user's by name; an env past one frame; a background child that holds
// stdout.
func TestAgentExecStatusUserEnv(t *testing.T) {
	ctx := context.Background()
	sb, _ := start(t, agenthost.Options{})
	run := func(spec provider.ExecSpec) provider.ExecResult {
		t.Helper()
		res, err := sb.Exec(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if r := run(provider.ExecSpec{Argv: []string{"no-such-command-xyz"}}); r.ExitCode != 127 || len(r.Stderr) == 0 {
		t.Errorf("missing command: %d %q", r.ExitCode, r.Stderr)
	}
	r := run(provider.ExecSpec{Argv: []string{"sh", "-c", "id -u; id -g; echo $HOME; echo $FOO; pwd"}, User: "1000:1001", Env: []string{"FOO=bar"}, Workdir: "/usr"})
	want := fmt.Sprintf("1000\n1001\n%s\nbar\n/usr\n", homeOf(t, "1000"))
	if string(r.Stdout) != want {
		t.Errorf("user exec printed %q (%d, %q), want %q", r.Stdout, r.ExitCode, r.Stderr, want)
	}
	if r := run(provider.ExecSpec{Argv: []string{"sh", "-c", "echo $HOME"}, Env: []string{"HOME=/given"}}); string(r.Stdout) != "/given\n" {
		t.Errorf("HOME given: %q", r.Stdout)
	}
	if r := run(provider.ExecSpec{Argv: []string{"sh", "-c", "id -un; echo $HOME"}, User: "root"}); string(r.Stdout) != "root\n/root\n" {
		t.Errorf("user by name: %q", r.Stdout)
	}
	// An env past one frame's payload: the request leads the stream.
	long := strings.Repeat("v", 100<<10) // under MAX_ARG_STRLEN (128 KiB)
	if r := run(provider.ExecSpec{Argv: []string{"sh", "-c", "printf %s \"$LONG\" | wc -c"}, Env: []string{"LONG=" + long}}); strings.TrimSpace(string(r.Stdout)) != fmt.Sprint(len(long)) {
		t.Errorf("a 100 KiB env var arrived as %q bytes", r.Stdout)
	}
	// A child left in the background holding stdout does not hold the
	// exec: it ends with its main process (and the output before).
	done := make(chan provider.ExecResult, 1)
	go func() { done <- run(provider.ExecSpec{Argv: []string{"sh", "-c", "sleep 300 & echo $!; exit 4"}}) }()
	select {
	case r := <-done:
		var pid int
		fmt.Sscan(string(r.Stdout), &pid)
		if r.ExitCode != 4 || pid <= 1 {
			t.Errorf("background child: %d %q", r.ExitCode, r.Stdout)
		} else {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("an exec whose background child holds stdout did not end")
	}
}

// homeOf is uid's home in /etc/passwd, "/" when it has no entry (as
// docker exec does).
func homeOf(t *testing.T, uid string) string {
	b, _ := os.ReadFile("/etc/passwd")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Split(l, ":"); len(f) == 7 && f[2] == uid {
			return f[5]
		}
	}
	return "/"
}

// Put refuses what provider.Put never sends: "..", links, specials.
func TestAgentPutRefuses(t *testing.T) {
	ctx := context.Background()
	sb, lsb := start(t, agenthost.Options{})
	if err := provider.UploadBytes(ctx, sb, []byte("x"), "/a/../../escape", 0o644, 0, 0); err == nil {
		// path.Clean makes it /escape, inside the root: that is fine.
		if _, err := os.Stat(filepath.Join(lsb.Root(), "escape")); err != nil {
			t.Fatalf("cleaned upload not under the root: %v", err)
		}
	}
	// A link planted in the sandbox does not carry an upload out of it.
	outside := t.TempDir()
	os.Symlink(outside, filepath.Join(lsb.Root(), "out"))
	err := provider.UploadBytes(ctx, sb, []byte("x"), "/out/f", 0o644, 0, 0)
	if err == nil || provider.IsProviderError(err) {
		t.Fatalf("upload through a link out of the root: %v", err)
	}
	if _, serr := os.Stat(filepath.Join(outside, "f")); serr == nil {
		t.Fatal("the upload left the root")
	}
}

// The tunnel: a real HTTP server on the host's loopback reached by a real
// client through the agent's listener: concurrent requests, a large body
// both ways, a streamed response.
func TestTunnelHTTP(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		// Read whole first: Go's HTTP/1 server is not full duplex.
		body, _ := io.ReadAll(r.Body)
		w.Write(body)
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		fl := w.(http.Flusher)
		for i := range 50 {
			fmt.Fprintf(w, "event %d\n", i)
			fl.Flush()
		}
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	defer srv.Close()
	port := freePort(t)
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	start(t, agenthost.Options{Target: l.Addr().String()}, "--listen", listen)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 60 * time.Second}
	defer client.CloseIdleConnections()
	base := "http://" + listen
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := bytes.Repeat([]byte{byte('a' + i%26)}, 1000+i*997)
			resp, err := client.Post(base+"/echo", "application/octet-stream", bytes.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !bytes.Equal(got, body) {
				errs <- fmt.Errorf("request %d: %d bytes back of %d, %v", i, len(got), len(body), err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	big := make([]byte, 16<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	resp, err := client.Post(base+"/echo", "application/octet-stream", bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("16 MiB echo: %d bytes, %v", len(got), err)
	}
	resp, err = client.Get(base + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if n := strings.Count(string(got), "event "); n != 50 || !strings.HasSuffix(string(got), "event 49\n") {
		t.Fatalf("streamed response: %d events", n)
	}
}

// A connection through the tunnel whose client never reads holds back
// only itself: a second request completes meanwhile.
func TestTunnelStuckClient(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/flood", func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 64<<10)
		for {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	defer srv.Close()
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	start(t, agenthost.Options{Target: l.Addr().String()}, "--listen", listen)
	stuck, err := net.Dial("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	fmt.Fprintf(stuck, "GET /flood HTTP/1.1\r\nHost: x\r\n\r\n")
	// Positive control: the flood is flowing to the stuck client.
	stuck.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(stuck, make([]byte, 1024)); err != nil {
		t.Fatalf("the flood did not start: %v", err)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	for range 5 {
		resp, err := client.Get("http://" + listen + "/ok")
		if err != nil {
			t.Fatalf("request beside a stuck stream: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ok" {
			t.Fatalf("got %q", b)
		}
	}
}

// Tunnels forwarded at once are capped: past MaxTunnels a connection is
// reset, and a slot freed takes a new one.
func TestTunnelCap(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	start(t, agenthost.Options{Target: l.Addr().String(), MaxTunnels: 3}, "--listen", listen)
	var held, targets []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", listen)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
		select { // each of the first three reaches the target
		case tc := <-accepted:
			defer tc.Close()
			targets = append(targets, tc)
		case <-time.After(10 * time.Second):
			t.Fatal("a tunnel under the cap did not reach the target")
		}
	}
	over, err := net.Dial("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	over.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := over.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the fourth tunnel: %d bytes, %v; want it ended", n, err)
	}
	// Both ends of the first close: its tunnel is over, its slot free.
	held[0].Close()
	targets[0].Close()
	// The freed slot takes a new connection (once the first's end
	// reached the host).
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", listen)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		select {
		case tc := <-accepted:
			tc.Close()
			return
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no tunnel reached the target after a slot was freed")
		}
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The agent killed mid-stream: every caller gets a ProviderError promptly
// (ErrGone once the sandbox is gone), and no goroutine is left.
func TestAgentKilledMidStream(t *testing.T) {
	ctx := context.Background()
	before := runtime.NumGoroutine()
	sb, lsb := start(t, agenthost.Options{})
	pidfile := filepath.Join(lsb.Root(), "agent.pid")
	// Positive control: the channel works and we know the agent's pid
	// (the parent of an exec'd shell).
	if r, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"sh", "-c", "echo $PPID > " + pidfile}}); err != nil || r.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", r, err)
	}
	var pid int
	b, _ := os.ReadFile(pidfile)
	fmt.Sscan(string(b), &pid)
	if pid <= 1 {
		t.Fatalf("agent pid %q", b)
	}
	errs := make(chan error, 8)
	for range 4 {
		go func() {
			_, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"sleep", "600"}})
			errs <- err
		}()
	}
	for range 4 {
		go func() {
			_, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"cat"}, Stdin: neverEnding{}})
			errs <- err
		}()
	}
	// Wait until the sleeps run, then kill the agent.
	deadline := time.Now().Add(10 * time.Second)
	var children []string
	for {
		out, _ := exec.Command("pgrep", "-P", fmt.Sprint(pid)).Output()
		if children = strings.Fields(string(out)); len(children) >= 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the execs did not start: children %q", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The agent's SIGKILL orphans its children: the cats end at their
	// stdin's EOF, the sleeps would outlive the test by ten minutes. Each is
	// pinned by a pidfd before the agent is killed; none of them ends before
	// that (a sleep of ten minutes, a cat on a never-ending stdin), so the pid
	// pgrep listed is still the child's, and the cleanup's KILL cannot reach
	// a process that reused it later.
	for _, c := range children {
		var cpid int
		fmt.Sscan(c, &cpid)
		fd, err := unix.PidfdOpen(cpid, 0)
		if err != nil {
			continue // already gone
		}
		t.Cleanup(func() {
			unix.PidfdSendSignal(fd, syscall.SIGKILL, nil, 0)
			unix.Close(fd)
		})
	}
	os.RemoveAll(lsb.Root()) // the sandbox goes with it: ErrGone
	killed := time.Now()
	syscall.Kill(pid, syscall.SIGKILL)
	for range 8 {
		select {
		case err := <-errs:
			if !provider.IsProviderError(err) || !errors.Is(err, provider.ErrGone) {
				t.Errorf("exec after the agent died: %v, want a ProviderError with ErrGone", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("an exec still waits 10 s after the agent died")
		}
	}
	t.Logf("all 8 callers failed %v after the kill", time.Since(killed))
	if _, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"true"}}); !provider.IsProviderError(err) {
		t.Errorf("exec on a dead channel: %v", err)
	}
	sb.Close()
	deadline = time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before+1 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A channel that breaks while the sandbox lives is a ProviderError
// without ErrGone; a channel the host closes ends the agent with status 0.
func TestAgentEnds(t *testing.T) {
	ctx := context.Background()
	sb, _ := start(t, agenthost.Options{})
	if code, err := sb.Close(); code != 0 || err != nil {
		t.Fatalf("agent after the host closed: %d %v", code, err)
	}
	if _, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"true"}}); !provider.IsProviderError(err) || errors.Is(err, provider.ErrGone) {
		t.Fatalf("exec after close, sandbox alive: %v", err)
	}
	// The agent killed, its sandbox still there.
	sb, lsb := start(t, agenthost.Options{})
	pidfile := filepath.Join(lsb.Root(), "pid")
	if r, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"sh", "-c", "echo $PPID > " + pidfile}}); err != nil || r.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", r, err)
	}
	var pid int
	b, _ := os.ReadFile(pidfile)
	fmt.Sscan(string(b), &pid)
	syscall.Kill(pid, syscall.SIGKILL)
	select {
	case <-sb.Host().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the channel did not break when the agent was killed")
	}
	if _, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"true"}}); !provider.IsProviderError(err) || errors.Is(err, provider.ErrGone) {
		t.Fatalf("exec after the agent died, sandbox alive: %v", err)
	}
	if code, _ := sb.Close(); code != 128+9 {
		t.Errorf("killed agent's status %d", code)
	}
	// Destroy goes to the wrapped sandbox; what follows is ErrGone.
	sb, _ = start(t, agenthost.Options{})
	if info, err := sb.Inspect(ctx); err != nil || !info.Exists {
		t.Fatalf("positive control: inspect %+v %v", info, err)
	}
	if err := sb.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := sb.Inspect(ctx); err != nil || info.Exists {
		t.Fatalf("after destroy: inspect %+v %v", info, err)
	}
	if _, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"true"}}); !provider.IsProviderError(err) || !errors.Is(err, provider.ErrGone) {
		t.Fatalf("exec after destroy: %v", err)
	}
}

type neverEnding struct{}

func (neverEnding) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// BenchmarkExecOverChannel is one exec of /bin/true through the agent's
// channel beside the same exec by the local provider (a fork and exec on
// the host).
func BenchmarkExecOverChannel(b *testing.B) {
	ctx := context.Background()
	b.Run("agent", func(b *testing.B) {
		sb, _ := start(b, agenthost.Options{})
		for b.Loop() {
			if r, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"/bin/true"}}); err != nil || r.ExitCode != 0 {
				b.Fatal(r, err)
			}
		}
	})
	b.Run("local", func(b *testing.B) {
		sb, err := local.New(b.TempDir()).Create(ctx, provider.CreateSpec{})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if r, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"/bin/true"}}); err != nil || r.ExitCode != 0 {
				b.Fatal(r, err)
			}
		}
	})
}

// An operation that ends before the host has sent all it had (a command
// that never reads its stdin, a put whose archive's trailing blocks are
// still on their way) still reports its result: the agent drops the rest
// instead of resetting the stream under the host's writes (seen as
// "reset by the peer" in certify's seeds and activations).
func TestAgentOperationEndsBeforeHostInput(t *testing.T) {
	ctx := context.Background()
	sb, _ := start(t, agenthost.Options{})
	big := strings.Repeat("x", 4<<20) // far past one window
	for i := range 20 {
		res, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"true"}, Stdin: strings.NewReader(big)})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("round %d: exec true with 4 MiB of unread stdin: %+v, %v", i, res, err)
		}
		if err := provider.Put(ctx, sb, []provider.Entry{{Path: "/p/f", Data: []byte("x"), Mode: 0o644}}); err != nil {
			t.Fatalf("round %d: put: %v", i, err)
		}
	}
}

// Many operations at once over one channel, as a session's seed and close
// run them: every one gets its own result, none is reset.
func TestAgentConcurrentOperations(t *testing.T) {
	ctx := context.Background()
	sb, _ := start(t, agenthost.Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 16*30)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				p := fmt.Sprintf("/c/%d/%d", g, i)
				if err := provider.Put(ctx, sb, []provider.Entry{{Path: p, Data: []byte(p), Mode: 0o644}}); err != nil {
					errs <- fmt.Errorf("put %s: %w", p, err)
					return
				}
				res, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"cat", "-"}, Stdin: strings.NewReader(p)})
				if err != nil || string(res.Stdout) != p {
					errs <- fmt.Errorf("exec %s: %q %v", p, res.Stdout, err)
					return
				}
				host := filepath.Join(t.TempDir(), "f")
				if err := sb.Download(ctx, p, host); err != nil {
					errs <- fmt.Errorf("download %s: %w", p, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
