package docker_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/host/provider"
)

func start(t *testing.T, sb provider.Sandbox, stderr io.Writer, argv ...string) *provider.Process {
	t.Helper()
	st, ok := provider.As[provider.Streamer](sb)
	if !ok {
		t.Fatalf("the docker sandbox is no provider.Streamer")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	p, err := st.Start(ctx, provider.ExecSpec{Argv: argv}, stderr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// 20 MB through cat and back, written and read at once, with stderr
// written before and after: what comes back on stdout is what was sent,
// and stderr holds only stderr.
func TestDockerStartLargeTransferStderrApart(t *testing.T) {
	p := engine(t)
	sb := create(t, p)
	var stderr lockedBuf
	proc := start(t, sb, &stderr, "sh", "-c", "echo begin >&2; cat; echo end >&2")
	const size = 20 << 20
	sent := sha256.New()
	werr := make(chan error, 1)
	go func() {
		_, err := io.Copy(proc.Stdin, io.TeeReader(io.LimitReader(rand.Reader, size), sent))
		if err == nil {
			err = proc.Stdin.Close()
		}
		werr <- err
	}()
	got := sha256.New()
	n, err := io.Copy(got, proc.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if code, err := proc.Wait(); err != nil || code != 0 {
		t.Fatalf("wait = %d, %v", code, err)
	}
	if n != size || !bytes.Equal(got.Sum(nil), sent.Sum(nil)) {
		t.Fatalf("read back %d bytes, sha256 %x; sent %d, sha256 %x", n, got.Sum(nil), size, sent.Sum(nil))
	}
	if s := stderr.String(); s != "begin\nend\n" {
		t.Fatalf("stderr = %q, want begin and end only", s)
	}
}

// A container that dies under a streamed command: Wait is a ProviderError
// wrapping ErrGone, never the command's 137, as for Exec.
func TestDockerStartContainerKilled(t *testing.T) {
	p := engine(t)
	sb := create(t, p)
	proc := start(t, sb, nil, "cat")
	r := bufio.NewReader(proc.Stdout)
	io.WriteString(proc.Stdin, "alive\n")
	if got, err := r.ReadString('\n'); err != nil || got != "alive\n" {
		t.Fatalf("before the kill: %q, %v", got, err)
	}
	if err := witness(t).KillContainer(dcKill(sb.ID())); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, r)
	code, err := proc.Wait()
	if !provider.IsProviderError(err) || !errors.Is(err, provider.ErrGone) {
		t.Fatalf("wait after the kill = %d, %v; want a ProviderError wrapping ErrGone", code, err)
	}
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
