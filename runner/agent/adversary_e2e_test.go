package agent_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/local"
	"github.com/sandproof/sandproof/runner/host/agenthost"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// A harness that opens a thousand tunnel connections, asks each for an
// endless answer and never reads one: the host forwards at most
// MaxTunnels of them (the rest are reset), and ending the channel (the
// case's stopAgent) still returns promptly with the agent exited, so the
// case goes on to verify.
func TestTunnelFloodNeverReadEnds(t *testing.T) {
	var live, peak atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := live.Add(1)
		defer live.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		buf := make([]byte, 32<<10)
		for {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	const maxTunnels = 64
	sb, _ := start(t, agenthost.Options{Target: l.Addr().String(), MaxTunnels: maxTunnels}, "--listen", listen)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 1000 {
		c, err := net.Dial("tcp", listen)
		if err != nil {
			t.Fatalf("after %d connections: %v", len(conns), err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /flood HTTP/1.1\r\nHost: x\r\n\r\n") // and never read
	}
	// Positive control: the flood is on, on as many tunnels as the cap
	// lets through, and no more.
	deadline := time.Now().Add(60 * time.Second)
	for peak.Load() < maxTunnels && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if p := peak.Load(); p != maxTunnels {
		t.Fatalf("%d floods at once reached the target, want the cap of %d", p, maxTunnels)
	}
	ended := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := sb.Close()
		ended <- err
	}()
	select {
	case err := <-ended:
		t.Logf("channel ended in %.2fs with %d connections held unread", time.Since(start).Seconds(), len(conns))
		if err != nil {
			t.Errorf("agent exit: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the channel did not end within 60s of its close while the harness held its tunnels unread")
	}
	// The target's side ends too: nothing is left writing for the harness.
	for live.Load() > 0 && time.Now().Before(start.Add(60*time.Second)) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := live.Load(); n != 0 {
		t.Errorf("%d floods still being written after the channel ended", n)
	}
}

// alive reports whether pid runs (a zombie is not running).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// The agent's stop (its channel closed, as certify does before verify)
// ends the commands its execs still run: none survives the agent, to be
// found by verify as a new process of the adapter's side. Repeated: the
// kill races the agent's own exit.
func TestAgentStopEndsItsCommands(t *testing.T) {
	for round := range 50 {
		under, err := local.New(t.TempDir()).Create(context.Background(), provider.CreateSpec{})
		if err != nil {
			t.Fatal(err)
		}
		lsb := under.(*local.Sandbox)
		var stderr syncBuffer
		sb, err := agenthost.Start(context.Background(), lsb, []string{sandagent, "serve", "--root", lsb.Root()}, &stderr, agenthost.Options{})
		if err != nil {
			t.Fatalf("start: %v (stderr %q)", err, stderr.String())
		}
		pidfile := filepath.Join(lsb.Root(), "pid")
		execErr := make(chan error, 1)
		go func() {
			res, err := sb.Exec(context.Background(), provider.ExecSpec{Argv: []string{"sh", "-c", "echo $$ > " + pidfile + ".tmp && mv " + pidfile + ".tmp " + pidfile + " && exec sleep 1000"}})
			if err == nil {
				err = fmt.Errorf("exit %d, stderr %q", res.ExitCode, res.Stderr)
			}
			execErr <- err
		}()
		var pid int
		deadline := time.Now().Add(30 * time.Second)
		for pid == 0 && time.Now().Before(deadline) {
			select {
			case err := <-execErr:
				code, cerr := sb.Close()
				t.Fatalf("round %d: the command ended before it wrote its pid: %v (agent: %d %v, stderr %q)", round, err, code, cerr, stderr.String())
			default:
			}
			if b, err := os.ReadFile(pidfile); err == nil {
				fmt.Sscan(string(b), &pid)
			} else {
				time.Sleep(10 * time.Millisecond)
			}
		}
		// Positive control: the command runs while the agent does.
		if pid == 0 || !alive(pid) {
			t.Fatalf("round %d: the command never ran (pid %d)", round, pid)
		}
		if code, err := sb.Close(); code != 0 || err != nil {
			t.Fatalf("round %d: agent's end: %d %v", round, code, err)
		}
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("round %d: the agent's command %d outlived the agent", round, pid)
		}
	}
}
