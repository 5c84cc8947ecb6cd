package engine

import (
	"context"
	"fmt"
	"github.com/sandproof/sandproof/runner/host/hostfile"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SSHArgs returns the ssh argv (without "ssh") that reaches the engine of
// an ssh://[user@]host[:port] address the way the docker CLI's connection
// helper does: the remote `docker system dial-stdio` relays its stdin and
// stdout to the remote engine's socket.
func SSHArgs(host string) ([]string, error) {
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("engine address %q: %w", host, err)
	}
	if u.Scheme != "ssh" {
		return nil, fmt.Errorf("engine address %q: not ssh://", host)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("engine address %q: no host", host)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
		// The CLI refuses these too: the remote socket is the remote
		// docker's own choice.
		return nil, fmt.Errorf("engine address %q: want ssh://[user@]host[:port] with no path or query", host)
	}
	if _, set := u.User.Password(); set {
		return nil, fmt.Errorf("engine address %q: a password in the address is not supported (use ssh keys)", host)
	}
	var args []string
	if user := u.User.Username(); user != "" {
		args = append(args, "-l", user)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("engine address %q: port %q: want 1-65535", host, p)
		}
		args = append(args, "-p", p)
	}
	return append(args, "--", u.Hostname(), "docker", "system", "dial-stdio"), nil
}

// SSHDialer returns a dialer for an ssh:// engine address: every
// connection is one ssh process whose stdin and stdout carry it.
func SSHDialer(host string) (func(ctx context.Context, network, addr string) (net.Conn, error), error) {
	args, err := SSHArgs(host)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		return dialCommand(ctx, "ssh", args...)
	}, nil
}

// dialCommand starts name args and uses its stdin and stdout as a
// connection. ctx bounds the start only: the connection lives until it is
// closed.
func dialCommand(ctx context.Context, name string, args ...string) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// Not cmd.StdoutPipe: Wait, which runs as soon as the helper exits,
	// closes that pipe's read end, and a read racing it lost the rest of
	// the stream to "file already closed" (1 in 6 streamed execs over ssh
	// on a loaded host). Our own pipe stays open until Close.
	stdout, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = w
	c := &cmdConn{cmd: cmd, stdin: stdin, stdout: stdout, exited: make(chan struct{}), stderr: hostfile.HeadBuffer{Max: 64 << 10}}
	cmd.Stderr = &c.stderr
	err = cmd.Start()
	w.Close() // the helper holds its own copy
	if err != nil {
		stdout.Close()
		return nil, fmt.Errorf("connection helper %s: %w", strings.Join(cmd.Args, " "), err)
	}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// cmdConn is a net.Conn over a helper process's stdin and stdout.
type cmdConn struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr hostfile.HeadBuffer

	exited  chan struct{}
	waitErr error

	closeOnce sync.Once
}

// Read reads the helper's stdout. At its end, a helper that failed is an
// error naming it and quoting its stderr: an ssh that cannot log in, or a
// remote without docker, says so instead of a bare EOF.
func (c *cmdConn) Read(p []byte) (int, error) {
	n, err := c.stdout.Read(p)
	if err == io.EOF {
		return n, c.helperErr(err)
	}
	return n, err
}

// Write writes to the helper's stdin. A helper that exited before the
// request was written (an ssh refusing at once) breaks the pipe: that too
// is the helper's error, quoting its stderr, not a bare "broken pipe".
func (c *cmdConn) Write(p []byte) (int, error) {
	n, err := c.stdin.Write(p)
	if err != nil {
		return n, c.helperErr(err)
	}
	return n, nil
}

// helperErr gives, for err at the end of the helper's pipes, the helper's
// own failure once it has exited (within 2 s), else err.
func (c *cmdConn) helperErr(err error) error {
	select {
	case <-c.exited:
	case <-time.After(2 * time.Second):
		// the pipe ended but the helper lingers: report err as it is.
		return err
	}
	if c.waitErr != nil {
		return fmt.Errorf("connection helper %q: %v: %s", strings.Join(c.cmd.Args, " "), c.waitErr, strings.TrimSpace(c.stderr.String()))
	}
	return err
}

// CloseWrite sends EOF to the helper: the hijacked exec streams use it to
// end a command's stdin.
func (c *cmdConn) CloseWrite() error { return c.stdin.Close() }

// Close ends the helper: EOF on its stdin, then a kill if it does not go.
func (c *cmdConn) Close() error {
	c.closeOnce.Do(func() {
		c.stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(time.Second):
			c.cmd.Process.Kill()
			<-c.exited
		}
		c.stdout.Close()
	})
	return nil
}

type cmdAddr struct{ s string }

func (a cmdAddr) Network() string { return "cmd" }
func (a cmdAddr) String() string  { return a.s }

func (c *cmdConn) LocalAddr() net.Addr  { return cmdAddr{"local"} }
func (c *cmdConn) RemoteAddr() net.Addr { return cmdAddr{strings.Join(c.cmd.Args, " ")} }

// Deadlines are not supported by pipes to a process; the HTTP client
// bounds requests with contexts instead.
func (c *cmdConn) SetDeadline(time.Time) error      { return nil }
func (c *cmdConn) SetReadDeadline(time.Time) error  { return nil }
func (c *cmdConn) SetWriteDeadline(time.Time) error { return nil }
