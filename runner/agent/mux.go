package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// DefaultWindow is the credit a receiver grants each stream: the most it
// buffers for one stream whose reader is slow.
const DefaultWindow = 256 << 10

// Errors a stream's Read and Write return.
var (
	// ErrBroken is the channel failing (EOF, a write error, a protocol
	// error): every stream fails with an error wrapping it.
	ErrBroken = errors.New("agent channel broken")
	// ErrReset is a stream reset by either end.
	ErrReset = errors.New("agent stream reset")
	// errWriteClosed is a Write after CloseWrite.
	errWriteClosed = errors.New("agent stream: write after close")
)

// Conn multiplexes streams over one reader and one writer. One goroutine
// reads frames and never waits on a stream's reader: a stream's data is
// buffered up to the window its receiver granted, and a sender that
// overruns it breaks the channel. Writers take turns frame by frame.
type Conn struct {
	r       io.Reader
	w       io.Writer
	closer  []io.Closer
	window  uint32 // what this end grants each stream
	peerWin uint32 // what the peer grants: each stream's initial credit

	wmu  sync.Mutex
	wbuf []byte

	mu       sync.Mutex
	streams  map[uint32]*Stream
	next     uint32
	lastPeer uint32 // the last stream id the peer opened: ids only grow
	err      error
	accept   chan *Stream

	hello chan struct{} // closed when the peer's hello arrived
	done  chan struct{} // closed when the channel broke
}

// newConn starts the read loop and sends the hello. host ends open odd
// stream ids, agents even ones, so the two never collide.
func newConn(r io.Reader, w io.Writer, host bool, window uint32, closers ...io.Closer) *Conn {
	if window == 0 {
		window = DefaultWindow
	}
	c := &Conn{r: r, w: w, closer: closers, window: window, streams: map[uint32]*Stream{},
		accept: make(chan *Stream, 64), hello: make(chan struct{}), done: make(chan struct{})}
	c.next = 2
	if host {
		c.next = 1
	}
	go c.readLoop()
	// The hello must be the first frame: the write lock is taken here,
	// before any open can write, and let go by the goroutine that writes
	// the hello (a write may wait for the peer to read, which newConn
	// must not). A hello written by a goroutine alone could be overtaken
	// by a prompt first open, which the peer refuses.
	c.wmu.Lock()
	go func() {
		defer c.wmu.Unlock()
		c.writeFrameLocked(frameHello, 0, helloPayload(window))
	}()
	return c
}

// NewHostConn starts the host's end of a channel over r (the agent's
// stdout) and w (its stdin): it sends the hello and opens odd stream ids.
// window is the credit it grants each stream (0 = DefaultWindow);
// closers are closed when the channel ends.
func NewHostConn(r io.Reader, w io.Writer, window uint32, closers ...io.Closer) *Conn {
	return newConn(r, w, true, window, closers...)
}

// WaitHello waits for the peer's hello.
func (c *Conn) WaitHello(ctx context.Context) error {
	select {
	case <-c.hello:
		return nil
	case <-c.done:
		return c.Err()
	case <-ctx.Done():
		c.fail(fmt.Errorf("no hello from the peer: %w", ctx.Err()))
		return c.Err()
	}
}

// Err is why the channel is over (nil while it works); every error
// after the end wraps ErrBroken.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Done is closed when the channel is over.
func (c *Conn) Done() <-chan struct{} { return c.done }

// fail breaks the channel once: every stream fails, the pipes close.
func (c *Conn) fail(cause error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = fmt.Errorf("%w: %w", ErrBroken, cause)
	streams := c.streams
	c.streams = map[uint32]*Stream{}
	close(c.done)
	c.mu.Unlock()
	for _, s := range streams {
		s.fail(c.err)
	}
	for _, cl := range c.closer {
		cl.Close()
	}
}

// Close breaks the channel on purpose.
func (c *Conn) Close() error {
	c.fail(errors.New("closed"))
	return nil
}

func (c *Conn) writeFrame(typ byte, id uint32, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeFrameLocked(typ, id, payload)
}

// writeFrameLocked is writeFrame with c.wmu held.
func (c *Conn) writeFrameLocked(typ byte, id uint32, payload []byte) error {
	if err := c.Err(); err != nil {
		return err
	}
	c.wbuf = appendFrame(c.wbuf[:0], typ, id, payload)
	if _, err := c.w.Write(c.wbuf); err != nil {
		c.fail(fmt.Errorf("write: %w", err))
		return c.Err()
	}
	return nil
}

func (c *Conn) readLoop() {
	buf := make([]byte, MaxPayload)
	f, err := readFrame(c.r, buf)
	if err != nil {
		c.fail(fmt.Errorf("read hello: %w", err))
		return
	}
	if f.typ != frameHello {
		c.fail(fmt.Errorf("%w: frame type %d before the hello", errProtocol, f.typ))
		return
	}
	if v := helloVersion(f.payload); v != Version {
		c.fail(fmt.Errorf("%w: peer speaks version %d, this end %d", errProtocol, v, Version))
		return
	}
	if w := helloWindow(f.payload); w < MaxPayload || w > 1<<30 {
		c.fail(fmt.Errorf("%w: peer window of %d bytes", errProtocol, w))
		return
	}
	c.mu.Lock()
	c.peerWin = helloWindow(f.payload)
	c.mu.Unlock()
	close(c.hello)
	for {
		f, err := readFrame(c.r, buf)
		if errors.Is(err, io.EOF) {
			c.fail(errEOF)
			return
		}
		if err != nil {
			c.fail(fmt.Errorf("read: %w", err))
			return
		}
		if err := c.dispatch(f); err != nil {
			c.fail(err)
			return
		}
	}
}

func (c *Conn) dispatch(f frame) error {
	c.mu.Lock()
	s := c.streams[f.id]
	c.mu.Unlock()
	switch f.typ {
	case frameHello:
		return fmt.Errorf("%w: a second hello", errProtocol)
	case frameOpen:
		if f.id%2 == c.next%2 || f.id <= c.lastPeer {
			return fmt.Errorf("%w: open of stream %d (of this end's parity, or not above the peer's last %d)", errProtocol, f.id, c.lastPeer)
		}
		c.lastPeer = f.id
		s = c.newStream(f.id, bytes.Clone(f.payload))
		select {
		case c.accept <- s:
		default: // nobody accepts this fast: refuse rather than buffer
			go s.Reset() // never a write from the read loop
		}
		return nil
	}
	if s == nil {
		return nil // a stream this end already forgot (reset, done)
	}
	switch f.typ {
	case frameData:
		return s.deliver(f.payload)
	case frameWindow:
		return s.credit(beUint32(f.payload))
	case frameClose:
		s.remoteClose()
	case frameReset:
		s.fail(fmt.Errorf("%w by the peer: %s", ErrReset, f.payload))
		c.forget(s)
	}
	return nil
}

func beUint32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func (c *Conn) newStream(id uint32, req []byte) *Stream {
	c.mu.Lock()
	s := &Stream{c: c, id: id, req: req, recvLeft: c.window, sendCredit: c.peerWin, done: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	if c.err != nil {
		s.err = c.err
		close(s.done)
	} else {
		c.streams[id] = s
	}
	c.mu.Unlock()
	return s
}

func (c *Conn) forget(s *Stream) {
	c.mu.Lock()
	if c.streams[s.id] == s {
		delete(c.streams, s.id)
	}
	c.mu.Unlock()
}

// Open opens a stream carrying req (at most MaxPayload bytes).
func (c *Conn) Open(req []byte) (*Stream, error) {
	if len(req) > MaxPayload {
		return nil, fmt.Errorf("agent request of %d bytes (at most %d)", len(req), MaxPayload)
	}
	select { // a stream's credit is the peer's window, known from its hello
	case <-c.hello:
	case <-c.done:
		return nil, c.Err()
	}
	// The id is taken and its open written under the one write lock:
	// ids reach the peer in the order they were taken (the peer refuses
	// an id that does not grow).
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	id := c.next
	c.next += 2
	c.mu.Unlock()
	s := c.newStream(id, req)
	if err := c.writeFrameLocked(frameOpen, id, req); err != nil {
		return nil, err
	}
	return s, nil
}

// Accept returns the next stream the peer opened.
func (c *Conn) Accept() (*Stream, error) {
	select {
	case s := <-c.accept:
		return s, nil
	case <-c.done:
		return nil, c.Err()
	}
}

// Stream is one bidirectional byte stream of a Conn. One goroutine reads
// and one writes at a time.
type Stream struct {
	c   *Conn
	id  uint32
	req []byte

	mu         sync.Mutex
	cond       *sync.Cond
	rbuf       bytes.Buffer
	recvLeft   uint32 // credit granted to the peer, not yet used
	consumed   uint32 // read here, not yet granted back
	rEOF       bool   // the peer closed its direction
	sendCredit uint32
	wClosed    bool
	err        error // reset or broken: both directions are over
	done       chan struct{}
}

func (s *Stream) deliver(p []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil // reset here; the peer learns it from our reset
	}
	if s.rEOF || uint32(len(p)) > s.recvLeft {
		return fmt.Errorf("%w: stream %d: %d bytes past its window (%d left) or its close", errProtocol, s.id, len(p), s.recvLeft)
	}
	s.recvLeft -= uint32(len(p))
	s.rbuf.Write(p)
	s.cond.Broadcast()
	return nil
}

func (s *Stream) credit(n uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if uint64(s.sendCredit)+uint64(n) > 1<<31 {
		return fmt.Errorf("%w: stream %d: window overflow", errProtocol, s.id)
	}
	s.sendCredit += n
	s.cond.Broadcast()
	return nil
}

func (s *Stream) remoteClose() {
	s.mu.Lock()
	s.rEOF = true
	both := s.wClosed
	s.cond.Broadcast()
	s.mu.Unlock()
	if both {
		s.c.forget(s)
	}
}

// fail ends both directions with err; data of a direction the peer
// completed (closed) stays readable.
func (s *Stream) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.err = err
	if !s.rEOF {
		s.rbuf.Reset() // an incomplete direction is worth nothing
	}
	close(s.done)
	s.cond.Broadcast()
}

// Read reads what the peer sent; io.EOF after its close.
func (s *Stream) Read(p []byte) (int, error) {
	s.mu.Lock()
	for s.rbuf.Len() == 0 && !s.rEOF && s.err == nil {
		s.cond.Wait()
	}
	// A direction the peer completed (closed) stays readable to its end
	// whatever happened after: an agent resets a stream the host has not
	// closed once it sent its result.
	if s.err != nil && !s.rEOF {
		err := s.err
		s.mu.Unlock()
		return 0, err
	}
	if s.rbuf.Len() == 0 {
		s.mu.Unlock()
		return 0, io.EOF
	}
	n, _ := s.rbuf.Read(p)
	var grant uint32
	s.consumed += uint32(n)
	if !s.rEOF && s.err == nil && s.consumed >= s.c.window/2 {
		grant, s.consumed = s.consumed, 0
		s.recvLeft += grant
	}
	s.mu.Unlock()
	if grant > 0 {
		var b [4]byte
		b[0], b[1], b[2], b[3] = byte(grant>>24), byte(grant>>16), byte(grant>>8), byte(grant)
		s.c.writeFrame(frameWindow, s.id, b[:])
	}
	return n, nil
}

// Write sends p, waiting for credit: never more than the peer granted.
func (s *Stream) Write(p []byte) (int, error) {
	var sent int
	for len(p) > 0 {
		s.mu.Lock()
		for s.sendCredit == 0 && s.err == nil && !s.wClosed {
			s.cond.Wait()
		}
		if s.err != nil || s.wClosed {
			err := s.err
			if err == nil {
				err = errWriteClosed
			}
			s.mu.Unlock()
			return sent, err
		}
		n := min(uint32(len(p)), s.sendCredit, MaxPayload)
		s.sendCredit -= n
		s.mu.Unlock()
		if err := s.c.writeFrame(frameData, s.id, p[:n]); err != nil {
			return sent, err
		}
		sent += int(n)
		p = p[n:]
	}
	return sent, nil
}

// CloseWrite tells the peer this end sends no more (its Read gets EOF).
func (s *Stream) CloseWrite() error {
	s.mu.Lock()
	if s.wClosed || s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	s.wClosed = true
	both := s.rEOF
	s.cond.Broadcast()
	s.mu.Unlock()
	err := s.c.writeFrame(frameClose, s.id, nil)
	if both {
		s.c.forget(s)
	}
	return err
}

// Reset ends the stream in both directions at once, here and at the peer.
func (s *Stream) Reset() {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	done := s.rEOF && s.wClosed
	s.mu.Unlock()
	s.fail(fmt.Errorf("%w here", ErrReset))
	s.c.forget(s)
	if !done {
		s.c.writeFrame(frameReset, s.id, []byte("reset"))
	}
}

// Close closes this end's direction and, when the peer's is not done,
// resets the stream (nobody will read what it still sends).
func (s *Stream) Close() error {
	s.CloseWrite()
	s.mu.Lock()
	rest := !s.rEOF
	s.mu.Unlock()
	if rest {
		s.Reset()
	}
	return nil
}

// OpenPayload is what the stream's open frame carried (a tunnel
// stream's Request, as JSON).
func (s *Stream) OpenPayload() []byte { return s.req }

// Done is closed when the stream was reset or the channel broke.
func (s *Stream) Done() <-chan struct{} { return s.done }

// buffered is how many received bytes wait for the reader (tests).
func (s *Stream) buffered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rbuf.Len()
}

// errEOF marks the channel ending because its reader reached EOF: the peer
// closed it.
var errEOF = errors.New("the peer closed the channel")

// IsEOF reports whether err is the channel ending because the peer
// closed it (the normal end of a session), not a failure.
func IsEOF(err error) bool { return errors.Is(err, errEOF) }
