package agenthost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/sandproof/sandproof/runner/agent"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// Sandbox is a provider.Sandbox whose Exec, Upload, Mkdir, Put, Download,
// Fetch and Remove go over the agent's channel (one stream each, no engine round
// trip), and whose ID, Inspect and Destroy go to the wrapped sandbox.
// Transport failures are *provider.ProviderError, with ErrGone when the
// wrapped sandbox is gone.
type Sandbox struct {
	Under provider.Sandbox
	host  *Host

	waitOnce sync.Once
	wait     func() (int, error)
	code     int
	waitErr  error
}

var (
	_ provider.Sandbox = (*Sandbox)(nil)
	_ provider.Putter  = (*Sandbox)(nil)
	_ provider.Remover = (*Sandbox)(nil)
)

// Start starts the agent in under with argv (the path of sandagent in the
// sandbox and its `serve` arguments, run as root) over a streamed exec,
// and attaches to it. under must be a provider.Streamer.
func Start(ctx context.Context, under provider.Sandbox, argv []string, stderr io.Writer, opt Options) (*Sandbox, error) {
	st, ok := provider.As[provider.Streamer](under)
	if !ok {
		return nil, fmt.Errorf("agent: the %T sandbox cannot stream a command (no provider.Streamer)", under)
	}
	// The agent outlives ctx (it is the session's channel); only the
	// start is bounded by it.
	proc, err := st.Start(context.WithoutCancel(ctx), provider.ExecSpec{Argv: argv, User: "0:0"}, stderr)
	if err != nil {
		return nil, provider.Errorf("agent start", under.ID(), err)
	}
	return Attach(ctx, under, proc, opt)
}

// Attach makes the wrapper over a started agent's process.
func Attach(ctx context.Context, under provider.Sandbox, proc *provider.Process, opt Options) (*Sandbox, error) {
	h, err := NewHost(ctx, proc.Stdout, proc.Stdin, opt)
	if err != nil {
		proc.Stdin.Close()
		if proc.Wait != nil {
			proc.Wait()
		}
		sb := &Sandbox{Under: under}
		return nil, sb.transportErr(ctx, "agent start", err)
	}
	return &Sandbox{Under: under, host: h, wait: proc.Wait}, nil
}

// Host is the channel's host end (for the tunnel's state).
func (s *Sandbox) Host() *Host { return s.host }

// Close ends the channel and waits for the agent to exit; its status.
func (s *Sandbox) Close() (int, error) {
	s.host.Close()
	s.waitOnce.Do(func() {
		if s.wait != nil {
			s.code, s.waitErr = s.wait()
		}
	})
	return s.code, s.waitErr
}

// transportErr makes err a *provider.ProviderError unless it is the
// operation's own error; a broken channel whose sandbox is gone is
// ErrGone.
func (s *Sandbox) transportErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	var te *transportError
	if !errors.As(err, &te) && !errors.Is(err, agent.ErrBroken) {
		return err
	}
	if errors.Is(err, agent.ErrBroken) {
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if info, ierr := s.Under.Inspect(ictx); ierr == nil && (!info.Exists || !info.Running) {
			return provider.Errorf(op, s.Under.ID(), fmt.Errorf("%v: %w", err, provider.ErrGone))
		}
	}
	return provider.Errorf(op, s.Under.ID(), err)
}

func (s *Sandbox) ID() string { return s.Under.ID() }

func (s *Sandbox) Exec(ctx context.Context, spec provider.ExecSpec) (provider.ExecResult, error) {
	res, err := s.host.Exec(ctx, spec)
	return res, s.transportErr(ctx, "exec", err)
}

func (s *Sandbox) Upload(ctx context.Context, path string, data io.Reader, size int64, mode os.FileMode, uid, gid int) error {
	return s.transportErr(ctx, "upload", s.host.Upload(ctx, path, data, size, mode, uid, gid))
}

func (s *Sandbox) Mkdir(ctx context.Context, path string, mode os.FileMode, uid, gid int) error {
	return s.transportErr(ctx, "mkdir", s.host.Mkdir(ctx, path, mode, uid, gid))
}

func (s *Sandbox) Put(ctx context.Context, entries []provider.Entry) error {
	return s.transportErr(ctx, "put", s.host.Put(ctx, entries))
}

func (s *Sandbox) Remove(ctx context.Context, args []string) (provider.ExecResult, error) {
	res, err := s.host.Remove(ctx, args)
	return res, s.transportErr(ctx, "remove", err)
}

func (s *Sandbox) Download(ctx context.Context, path, hostPath string) error {
	_, err := s.Fetch(ctx, path, hostPath, provider.FetchLimits{})
	return err
}

func (s *Sandbox) Fetch(ctx context.Context, path, hostPath string, lim provider.FetchLimits) (provider.Fetched, error) {
	got, err := s.host.Fetch(ctx, path, hostPath, lim.WithDefaults())
	return got, s.transportErr(ctx, "download", err)
}

func (s *Sandbox) Inspect(ctx context.Context) (provider.Info, error) { return s.Under.Inspect(ctx) }

// Destroy ends the channel and destroys the wrapped sandbox; the agent's
// end is collected meanwhile (an engine may end its exec only when the
// sandbox goes).
func (s *Sandbox) Destroy(ctx context.Context) error {
	s.host.Close()
	go s.Close()
	return s.Under.Destroy(ctx)
}
