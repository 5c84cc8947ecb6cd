package agent

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"
)

// pair is two ends of a channel over in-process pipes.
func pair(t *testing.T, window uint32) (host, agent *Conn) {
	t.Helper()
	return pair2(t, window, window)
}

func pair2(t *testing.T, hostWin, agentWin uint32) (host, agent *Conn) {
	t.Helper()
	ar, hw := io.Pipe() // host writes, agent reads
	hr, aw := io.Pipe() // agent writes, host reads
	host = newConn(hr, hw, true, hostWin, hw, hr)
	agent = newConn(ar, aw, false, agentWin, aw, ar)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := host.WaitHello(ctx); err != nil {
		t.Fatal(err)
	}
	if err := agent.WaitHello(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(); agent.Close() })
	return host, agent
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A stream whose reader never reads holds back only itself: its sender
// stops at the window, the receiver buffers exactly the window and no
// more, and another stream carries 4 MiB meanwhile.
func TestSlowReaderStallsOnlyItsStream(t *testing.T) {
	const window = 64 << 10
	h, a := pair(t, window)
	stuck, err := h.Open([]byte("stuck"))
	if err != nil {
		t.Fatal(err)
	}
	astuck, err := a.Accept()
	if err != nil || string(astuck.req) != "stuck" {
		t.Fatalf("accept: %v %q", err, astuck.req)
	}
	wrote := make(chan int, 1)
	go func() {
		n, _ := stuck.Write(make([]byte, 1<<20))
		wrote <- n
	}()
	// The receiver fills up to the window, never past it.
	waitFor(t, "the stuck stream's window to fill", 10*time.Second, func() bool { return astuck.buffered() == window })
	// Another stream completes in full while the first is stuck.
	other, _ := h.Open([]byte("other"))
	aother, _ := a.Accept()
	payload := bytes.Repeat([]byte("0123456789abcdef"), 4<<20/16)
	go func() {
		other.Write(payload)
		other.CloseWrite()
	}()
	got, err := io.ReadAll(aother)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("the other stream: %d bytes, %v", len(got), err)
	}
	if n := astuck.buffered(); n != window {
		t.Fatalf("the stuck stream buffered %d bytes, want its window %d", n, window)
	}
	select {
	case n := <-wrote:
		t.Fatalf("the stuck writer finished (%d bytes) though nobody read", n)
	default:
	}
	// Reading releases it: all 1 MiB arrives.
	go func() { <-wrote; stuck.CloseWrite() }()
	rest, err := io.ReadAll(astuck)
	if err != nil || len(rest) != 1<<20 {
		t.Fatalf("after reading: %d bytes, %v", len(rest), err)
	}
}

// Half-close per direction: one side's close is the other's EOF while the
// reverse direction still flows; a reset ends both.
func TestHalfCloseAndReset(t *testing.T) {
	h, a := pair(t, 0)
	s, _ := h.Open([]byte("x"))
	as, _ := a.Accept()
	s.Write([]byte("up"))
	s.CloseWrite()
	if b, err := io.ReadAll(as); err != nil || string(b) != "up" {
		t.Fatalf("agent read %q %v", b, err)
	}
	if _, err := as.Write([]byte("down")); err != nil {
		t.Fatalf("write after the peer's half-close: %v", err)
	}
	as.CloseWrite()
	if b, err := io.ReadAll(s); err != nil || string(b) != "down" {
		t.Fatalf("host read %q %v", b, err)
	}
	if _, err := s.Write([]byte("late")); !errors.Is(err, errWriteClosed) {
		t.Fatalf("write after own close: %v", err)
	}
	r, _ := h.Open([]byte("r"))
	ar, _ := a.Accept()
	r.Reset()
	if _, err := ar.Read(make([]byte, 1)); !errors.Is(err, ErrReset) {
		t.Fatalf("read on a stream the peer reset: %v", err)
	}
	if _, err := ar.Write([]byte("x")); !errors.Is(err, ErrReset) {
		t.Fatalf("write on a stream the peer reset: %v", err)
	}
}

// A sender that ignores the window breaks the channel, and a broken
// channel fails every stream, readers and writers, promptly.
func TestOverrunBreaksEveryStream(t *testing.T) {
	const window = 32 << 10
	h, a := pair(t, window)
	streams := make([]*Stream, 3)
	for i := range streams {
		streams[i], _ = h.Open([]byte("s"))
		a.Accept()
	}
	blocked := make(chan error, len(streams))
	for _, s := range streams[1:] {
		go func() {
			_, err := s.Read(make([]byte, 10))
			blocked <- err
		}()
	}
	// Positive control: none has failed yet.
	select {
	case err := <-blocked:
		t.Fatalf("a read returned before the break: %v", err)
	default:
	}
	// Forge a frame past the window on the agent's side of stream 1.
	a.writeFrame(frameData, streams[0].id, make([]byte, window))
	a.writeFrame(frameData, streams[0].id, make([]byte, 1))
	for range streams[1:] {
		select {
		case err := <-blocked:
			if !errors.Is(err, ErrBroken) {
				t.Fatalf("read: %v, want ErrBroken", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a reader was not failed by the broken channel")
		}
	}
	if _, err := streams[0].Write([]byte("x")); !errors.Is(err, ErrBroken) {
		t.Fatalf("write on the overrun stream: %v", err)
	}
	if _, err := h.Open([]byte("after")); !errors.Is(err, ErrBroken) {
		t.Fatalf("open on a broken channel: %v", err)
	}
}

// Each end's window is its own (announced in its hello): ends with
// different windows move a megabyte both ways without an overrun.
func TestDifferentWindows(t *testing.T) {
	h, a := pair2(t, 1<<20, 32<<10)
	s, _ := h.Open([]byte("x"))
	as, _ := a.Accept()
	big := bytes.Repeat([]byte("w"), 1<<20)
	go func() { s.Write(big); s.CloseWrite() }()
	go func() { as.Write(big); as.CloseWrite() }()
	up, err := io.ReadAll(as)
	if err != nil || len(up) != len(big) {
		t.Fatalf("up: %d %v", len(up), err)
	}
	down, err := io.ReadAll(s)
	if err != nil || len(down) != len(big) {
		t.Fatalf("down: %d %v", len(down), err)
	}
}

// Ends of different versions refuse each other.
func TestHelloVersionMismatch(t *testing.T) {
	ar, hw := io.Pipe()
	hr, aw := io.Pipe()
	h := newConn(hr, hw, true, 0, hw, hr)
	defer h.Close()
	go func() {
		bad := appendFrame(nil, frameHello, 0, append(append([]byte(nil), helloMagic...), 0, 99, 0, 4, 0, 0))
		aw.Write(bad)
		io.Copy(io.Discard, ar)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.WaitHello(ctx); err == nil || !errors.Is(err, errProtocol) {
		t.Fatalf("hello of version 99: %v", err)
	}
}

// Closing a channel with streams open leaves no goroutine behind.
func TestNoGoroutineLeft(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		h, a := pair(t, 0)
		for range 20 {
			s, _ := h.Open([]byte("s"))
			as, _ := a.Accept()
			go io.Copy(io.Discard, as)
			go s.Write(make([]byte, 1<<20))
		}
		// Positive control: the readers (waiting for an EOF that never
		// comes) are there to be ended.
		waitFor(t, "the readers to run", 10*time.Second, func() bool { return runtime.NumGoroutine() >= before+20 })
		h.Close()
		a.Close()
	}()
	waitFor(t, "the goroutines to end", 10*time.Second, func() bool { return runtime.NumGoroutine() <= before })
}

// The decoder never panics, never accepts a payload past its cap, and
// every frame it accepts re-encodes to the bytes it read.
func FuzzReadFrame(f *testing.F) {
	f.Add(appendFrame(nil, frameHello, 0, helloPayload(DefaultWindow)))
	f.Add(appendFrame(nil, frameData, 1, []byte("hello")))
	f.Add(appendFrame(nil, frameWindow, 3, []byte{0, 1, 0, 0}))
	f.Add(appendFrame(appendFrame(nil, frameClose, 2, nil), frameReset, 2, []byte("why")))
	f.Add([]byte{frameData, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		buf := make([]byte, MaxPayload)
		for {
			off := len(in) - r.Len()
			fr, err := readFrame(r, buf)
			if err != nil {
				return
			}
			if len(fr.payload) > MaxPayload {
				t.Fatalf("payload of %d bytes", len(fr.payload))
			}
			end := len(in) - r.Len()
			if enc := appendFrame(nil, fr.typ, fr.id, fr.payload); !bytes.Equal(enc, in[off:end]) {
				t.Fatalf("re-encoded %x, read %x", enc, in[off:end])
			}
		}
	})
}

// Opens from many goroutines at once reach the peer in id order: an id
// taken by one opener must not be overtaken on the wire by a later id of
// another (the peer refuses ids that do not grow, and the channel breaks;
// seen with a session's concurrent downloads).
func TestConcurrentOpensKeepIDOrder(t *testing.T) {
	host, agent := pair(t, 0)
	const n = 64
	go func() {
		for {
			s, err := agent.Accept()
			if err != nil {
				return
			}
			s.Close()
		}
	}()
	for round := 0; round < 20; round++ {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := host.Open([]byte("x")); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: open: %v", round, err)
		}
		if err := host.Err(); err != nil {
			t.Fatalf("round %d: channel broke: %v", round, err)
		}
		if err := agent.Err(); err != nil {
			t.Fatalf("round %d: the agent's end broke: %v", round, err)
		}
	}
}
