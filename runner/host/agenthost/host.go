package agenthost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/sandproof/sandproof/runner/agent"
	"github.com/sandproof/sandproof/runner/host/hostfile"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// Options configure the host's end.
type Options struct {
	// Target is the address (host:port on this host) every tunnel
	// stream is forwarded to: the recording model relay. "" refuses
	// tunnel streams.
	Target string
	// Window is the per-stream credit (0 = agent.DefaultWindow).
	Window uint32
	// HelloTimeout bounds the wait for the agent's hello (0 = 30 s).
	HelloTimeout time.Duration
	// MaxTunnels caps the tunnel streams forwarded at once (0 =
	// DefaultMaxTunnels); past it a new one is reset. A harness opening
	// connections without end costs the host that many dials and
	// windows, no more.
	MaxTunnels int
}

// DefaultMaxTunnels is Options.MaxTunnels' default.
const DefaultMaxTunnels = 256

// Host is the host's end of a channel: it runs operations in the sandbox
// and forwards the agent's tunnel streams to Target. Its errors are plain
// errors; the Sandbox wrapper turns transport failures into
// *provider.ProviderError.
type Host struct {
	c       *agent.Conn
	target  string
	tunnels chan struct{} // a slot per tunnel forwarded now
	wg      sync.WaitGroup
}

// NewHost starts the host's end over r (the agent's stdout) and w (its
// stdin) and waits for the agent's hello. Close ends it.
func NewHost(ctx context.Context, r io.Reader, w io.WriteCloser, opt Options) (*Host, error) {
	closers := []io.Closer{w}
	if rc, ok := r.(io.Closer); ok {
		closers = append(closers, rc)
	}
	if opt.MaxTunnels <= 0 {
		opt.MaxTunnels = DefaultMaxTunnels
	}
	h := &Host{c: agent.NewHostConn(r, w, opt.Window, closers...), target: opt.Target, tunnels: make(chan struct{}, opt.MaxTunnels)}
	if opt.HelloTimeout <= 0 {
		opt.HelloTimeout = 30 * time.Second
	}
	hctx, cancel := context.WithTimeout(ctx, opt.HelloTimeout)
	defer cancel()
	if err := h.c.WaitHello(hctx); err != nil {
		return nil, err
	}
	h.wg.Add(1)
	go h.forward()
	return h, nil
}

// Close ends the channel: the agent sees EOF on its stdin and exits.
// Every open stream fails.
func (h *Host) Close() error {
	h.c.Close()
	h.wg.Wait()
	return nil
}

// Done is closed when the channel is over.
func (h *Host) Done() <-chan struct{} { return h.c.Done() }

// Err is why the channel is over (nil while it works).
func (h *Host) Err() error { return h.c.Err() }

// forward takes the agent's tunnel streams and connects each to Target.
// The agent's request never says where: only Target is dialled.
func (h *Host) forward() {
	defer h.wg.Done()
	for {
		s, err := h.c.Accept()
		if err != nil {
			return
		}
		var req agent.Request
		if json.Unmarshal(s.OpenPayload(), &req) != nil || req.Op != agent.OpTunnel || h.target == "" {
			s.Reset()
			continue
		}
		select {
		case h.tunnels <- struct{}{}:
		default:
			s.Reset()
			continue
		}
		go func() {
			defer func() { <-h.tunnels }()
			nc, err := net.DialTimeout("tcp", h.target, 10*time.Second)
			if err != nil {
				s.Reset()
				return
			}
			agent.Splice(nc.(*net.TCPConn), s)
		}()
	}
}

// transportError marks an error of the channel itself (not of the
// operation the agent ran): the caller makes it a ProviderError.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// IsTransport says whether err, from a Host operation, is a failure of
// the channel itself (a broken or hostile channel, the operation's
// context ended) rather than the operation's own error (an exec that
// could not start, a put the agent refused).
func IsTransport(err error) bool { return errors.As(err, new(*transportError)) }

func transport(err error) error {
	if err == nil {
		return nil
	}
	return &transportError{err}
}

// Exec runs spec in the sandbox and waits for it. ExitCode is the
// command's status (126/127 when it could not start, 128+N on signal N).
func (h *Host) Exec(ctx context.Context, spec provider.ExecSpec) (provider.ExecResult, error) {
	if len(spec.Argv) == 0 {
		return provider.ExecResult{}, errors.New("exec: empty argv")
	}
	s, done, err := h.c.Call(ctx, agent.Request{Op: agent.OpExec, Argv: spec.Argv, User: spec.User, Env: spec.Env, Workdir: spec.Workdir, Stdin: spec.Stdin != nil})
	if err != nil {
		return provider.ExecResult{}, transport(err)
	}
	defer done()
	go func() {
		if spec.Stdin != nil {
			if _, err := io.Copy(s, spec.Stdin); err != nil {
				return // the stream is over, or stdin failed: the command ends anyway
			}
		}
		s.CloseWrite()
	}()
	var out, errb bytes.Buffer
	r, err := agent.ReadResults(s, &out, &errb)
	res := provider.ExecResult{ExitCode: r.Code, Stdout: out.Bytes(), Stderr: errb.Bytes()}
	if ctx.Err() != nil {
		return res, transport(ctx.Err())
	}
	if err != nil {
		return res, transport(err)
	}
	if r.Error != "" {
		return res, errors.New(r.Error)
	}
	return res, nil
}

// Remove runs the agent's confined removal (runner/confine Rmtree) of args,
// the rmtree helper's arguments, as root: the paths it removed on stdout,
// its refusals on stderr, exit 1 when there was any (provider.Remover).
func (h *Host) Remove(ctx context.Context, args []string) (provider.ExecResult, error) {
	s, done, err := h.c.Call(ctx, agent.Request{Op: agent.OpRemove, Argv: args})
	if err != nil {
		return provider.ExecResult{}, transport(err)
	}
	defer done()
	s.CloseWrite()
	// The paths removed can be millions (what the harness made): the
	// host keeps a bounded prefix of whole lines, never what the agent
	// chooses to send.
	out, errb := &hostfile.HeadBuffer{Max: maxRemoveOut}, &hostfile.HeadBuffer{Max: maxRemoveErr}
	r, err := agent.ReadResults(s, out, errb)
	res := provider.ExecResult{ExitCode: r.Code, Stdout: wholeLines(out), Stderr: wholeLines(errb)}
	switch {
	case ctx.Err() != nil:
		return res, transport(ctx.Err())
	case err != nil:
		return res, transport(err)
	case r.Error != "":
		return res, errors.New(r.Error)
	}
	return res, nil
}

// What Remove keeps of the agent's report: the first MiB of the paths it
// removed, the first 64 KiB of its refusals.
const (
	maxRemoveOut = 1 << 20
	maxRemoveErr = 64 << 10
)

// wholeLines is what h kept, cut back to its last whole line when the
// rest was dropped.
func wholeLines(h *hostfile.HeadBuffer) []byte {
	b := h.Bytes()
	if h.Dropped() {
		b = b[:bytes.LastIndexByte(b, '\n')+1]
	}
	return b
}

// Put creates the entries in order, each as Mkdir or Upload would.
func (h *Host) Put(ctx context.Context, entries []provider.Entry) error {
	return h.put(ctx, provider.TarEntries(entries))
}

func (h *Host) put(ctx context.Context, tr *io.PipeReader) error {
	defer tr.Close()
	s, done, err := h.c.Call(ctx, agent.Request{Op: agent.OpPut})
	if err != nil {
		return transport(err)
	}
	defer done()
	sent := make(chan error, 1)
	go func() {
		_, err := io.Copy(s, tr)
		if err == nil {
			err = s.CloseWrite()
		} else {
			s.Reset()
		}
		sent <- err
	}()
	r, rerr := agent.ReadResults(s, io.Discard, io.Discard)
	serr := <-sent
	switch {
	case ctx.Err() != nil:
		return transport(ctx.Err())
	case rerr == nil && r.Error != "":
		return errors.New(r.Error)
	case rerr != nil:
		if serr != nil && !errors.Is(serr, agent.ErrBroken) && !errors.Is(serr, agent.ErrReset) {
			return serr // the host's side of the archive failed (a host file)
		}
		return transport(rerr)
	case serr != nil:
		return serr
	}
	return nil
}

// Fetch downloads path to hostPath within lim, with the host-side
// consumer every provider uses (provider.Untar): entries that leave
// hostPath refused, links recorded and never created, files cut at the
// caps, the read stopped at lim.ReadBytes or lim.Entries. Every get is
// confined (lim.Confined or not): the agent follows no link at any
// component and reads with lim.User's ids.
func (h *Host) Fetch(ctx context.Context, path, hostPath string, lim provider.FetchLimits) (provider.Fetched, error) {
	s, done, err := h.c.Call(ctx, agent.Request{Op: agent.OpGet, Path: path, User: lim.User})
	if err != nil {
		return provider.Fetched{}, transport(err)
	}
	defer done()
	s.CloseWrite()
	pr, pw := io.Pipe()
	type unpacked struct {
		got provider.Fetched
		err error
	}
	unp := make(chan unpacked, 1)
	started := false
	start := func() {
		started = true
		go func() {
			got, err := provider.Untar(pr, hostPath, path, lim)
			if err == nil {
				// The archive's end padding; anything past it is dropped.
				io.Copy(io.Discard, io.LimitReader(pr, 1<<20))
			}
			pr.CloseWithError(errors.New("unpack ended"))
			unp <- unpacked{got, err}
		}()
	}
	// Data records feed the unpack; once it ended (a cap, a refused
	// entry), nothing more is read and the stream is reset.
	var toUnpack writerFunc = func(p []byte) (int, error) {
		if !started {
			start()
		}
		if _, err := pw.Write(p); err != nil {
			return 0, errUnpackEnded
		}
		return len(p), nil
	}
	r, rerr := agent.ReadResults(s, toUnpack, io.Discard)
	pw.CloseWithError(io.ErrUnexpectedEOF)
	if !started {
		if rerr == nil && r.NotFound {
			return provider.Fetched{}, fmt.Errorf("download %q: %w", path, provider.ErrPathNotFound)
		}
		start()
	}
	u := <-unp
	switch {
	case errors.Is(u.err, provider.ErrReadCap):
		return u.got, nil
	case ctx.Err() != nil:
		return u.got, transport(ctx.Err())
	case rerr != nil && !errors.Is(rerr, errUnpackEnded):
		return u.got, transport(rerr)
	case rerr == nil && r.Error != "":
		// The agent's own failure (a file vanished mid-walk) says more
		// than the truncated archive it left.
		return u.got, fmt.Errorf("download %q: %s", path, r.Error)
	case u.err != nil:
		return u.got, fmt.Errorf("download %q: %w", path, u.err)
	case rerr != nil:
		return u.got, fmt.Errorf("download %q: more than 1 MiB past the archive's end", path)
	}
	return u.got, nil
}

var errUnpackEnded = errors.New("unpack ended")

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Upload writes one file (missing parents 0755 root).
func (h *Host) Upload(ctx context.Context, path string, data io.Reader, size int64, mode os.FileMode, uid, gid int) error {
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(provider.WriteTarFile(pw, path, data, size, mode, uid, gid))
	}()
	return h.put(ctx, pr)
}

// Mkdir creates a directory (an existing one is left as it is).
func (h *Host) Mkdir(ctx context.Context, path string, mode os.FileMode, uid, gid int) error {
	return h.Put(ctx, []provider.Entry{{Path: path, Dir: true, Mode: mode, UID: uid, GID: gid}})
}
