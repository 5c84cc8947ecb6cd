package agent_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/sandproof/sandproof/runner/agent"
	"github.com/sandproof/sandproof/runner/host/agenthost"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/host/provider"
)

// teeWriter records what the host writes to the agent's stdin.
type teeWriter struct {
	w  io.WriteCloser
	mu sync.Mutex
	b  bytes.Buffer
}

func (t *teeWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.b.Write(p)
	t.mu.Unlock()
	return t.w.Write(p)
}

func (t *teeWriter) Close() error { return t.w.Close() }

func (t *teeWriter) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.b.Bytes())
}

// withoutResets is the frames of b but its resets.
func withoutResets(t *testing.T, b []byte) []byte {
	t.Helper()
	var out []byte
	for len(b) > 0 {
		if len(b) < agent.HeaderLen {
			t.Fatalf("a torn frame header: %d bytes", len(b))
		}
		n := agent.HeaderLen + int(agent.BeUint32(b[5:9]))
		if n > len(b) {
			t.Fatalf("a torn frame: %d of %d bytes", len(b), n)
		}
		if b[0] != agent.FrameReset {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return out
}

// waitFile waits until p exists, up to d.
func waitFile(p string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if _, err := os.Lstat(p); err == nil {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// A harness that speaks the agent's protocol on the tunnel listener (the
// only thing it can reach) gets no exec: the bytes of a real host's hello
// and exec request, which run a command when they come on the agent's
// stdin, reach the tunnel's target verbatim and run nothing (the listener
// opens tunnel streams only; contract §7 session agent, threat model
// "The session agent").
func TestTunnelDoesNotSpeakTheProtocol(t *testing.T) {
	dir := t.TempDir()
	markerA := filepath.Join(dir, "pwned-A")
	markerB := filepath.Join(dir, "pwned-B")

	// 1. Record what a real host end sends for `touch markerA`.
	ar, hw := io.Pipe()
	hr, aw := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- agent.Serve(ar, aw, agent.ServeOptions{Root: dir})
		aw.Close()
	}()
	tee := &teeWriter{w: hw}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := agenthost.NewHost(ctx, hr, tee, agenthost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := h.Exec(ctx, provider.ExecSpec{Argv: []string{"touch", markerA}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("recording exec: %+v %v", res, err)
	}
	h.Close()
	<-served
	if _, err := os.Stat(markerA); err != nil {
		t.Fatalf("the recorded exec did not run: %v", err)
	}
	// The host's reset of the finished stream is left out: replayed, it
	// could end the stream before the command started.
	recorded := withoutResets(t, tee.bytes())
	attack := bytes.ReplaceAll(recorded, []byte(markerA), []byte(markerB))
	if bytes.Equal(attack, recorded) || !bytes.HasPrefix(attack, []byte{agent.FrameHello}) {
		t.Fatalf("the recorded host bytes hold no exec of %s (%d bytes)", markerA, len(attack))
	}

	// 2. The attack: those bytes, now naming markerB, on the tunnel
	// listener of an agent whose host forwards tunnels to a sink.
	sink, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := sink.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, len(attack))
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, _ := io.ReadFull(c, b)
		got <- b[:n]
	}()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ar2, hw2 := io.Pipe()
	hr2, aw2 := io.Pipe()
	served2 := make(chan error, 1)
	go func() {
		served2 <- agent.Serve(ar2, aw2, agent.ServeOptions{Root: dir, Listener: tl})
		aw2.Close()
	}()
	h2, err := agenthost.NewHost(ctx, hr2, hw2, agenthost.Options{Target: sink.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { h2.Close(); <-served2 }()
	hc, err := net.Dial("tcp", tl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	if _, err := hc.Write(attack); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		if !bytes.Equal(b, attack) {
			t.Fatalf("the tunnel's target got %d bytes, want the %d the harness sent, verbatim", len(b), len(attack))
		}
	case <-ctx.Done():
		t.Fatal("the harness's bytes never reached the tunnel's target")
	}
	// The channel still works (the tunnel's bytes did not break it) and,
	// after that round trip, nothing ran the harness's exec.
	if res, err := h2.Exec(ctx, provider.ExecSpec{Argv: []string{"true"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec after the attack: %+v %v", res, err)
	}
	if _, err := os.Lstat(markerB); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the harness's bytes on the tunnel ran an exec: %s exists (%v)", markerB, err)
	}

	// 3. Positive control: the very same bytes on an agent's stdin (what
	// only the host holds) do run the exec.
	ar3, hw3 := io.Pipe()
	hr3, aw3 := io.Pipe()
	served3 := make(chan error, 1)
	go func() {
		served3 <- agent.Serve(ar3, aw3, agent.ServeOptions{Root: dir})
		aw3.Close()
	}()
	go io.Copy(io.Discard, hr3)
	go hw3.Write(attack)
	if !waitFile(markerB, 30*time.Second) {
		t.Fatal("positive control: the attack's bytes on the agent's stdin ran nothing; the attack proves nothing")
	}
	hw3.Close()
	<-served3
}

// The hello is the first frame an end writes, however soon its first
// stream opens: the agent refuses any other frame before it ("frame type
// 2 before the hello"), which broke a session's first operation now and
// then (seen in TestAgentStopEndsItsCommands under load). Repeated: the
// hello used to be written by a goroutine that a prompt open could
// overtake.
func TestHelloBeforeTheFirstOpen(t *testing.T) {
	for i := range 3000 {
		ar, hw := io.Pipe()
		hr, aw := io.Pipe()
		ag := agent.NewConn(ar, aw, false, 0, aw, ar)
		host := agent.NewConn(hr, hw, true, 0, hw, hr)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := host.WaitHello(ctx); err != nil {
			t.Fatalf("round %d: host hello: %v", i, err)
		}
		if _, err := host.Open(nil); err != nil {
			t.Fatalf("round %d: open: %v", i, err)
		}
		accepted := make(chan error, 1)
		go func() {
			_, err := ag.Accept()
			accepted <- err
		}()
		select {
		case err := <-accepted:
			if err != nil {
				t.Fatalf("round %d: the agent end refused the host's first stream: %v", i, err)
			}
		case <-ctx.Done():
			t.Fatalf("round %d: the host's first stream never reached the agent end", i)
		}
		cancel()
		host.Close()
		ag.Close()
	}
}
