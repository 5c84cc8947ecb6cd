package agent_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/sandproof/sandproof/runner/agent"
	"github.com/sandproof/sandproof/runner/host/agenthost"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// inProcess runs Serve over pipes, confined to a temp root, and returns
// the host end.
func inProcess(t *testing.T) (*agenthost.Host, string) {
	t.Helper()
	return inProcessAt(t, "")
}

// inProcessAt is inProcess with the agent's root at root ("" a temp dir).
func inProcessAt(t *testing.T, root string) (*agenthost.Host, string) {
	t.Helper()
	hr, hw, root := serveInProcessAt(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := agenthost.NewHost(ctx, hr, hw, agenthost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() }) // runs before serveInProcess' check
	return h, root
}

// serveInProcess runs Serve over pipes, confined to a temp root: the
// reader and writer of the host's end, and the root. Serve must end once
// the host's end closes.
func serveInProcess(t *testing.T) (io.ReadCloser, io.WriteCloser, string) {
	t.Helper()
	return serveInProcessAt(t, "")
}

// serveInProcessAt is serveInProcess with the root at root ("" a temp dir).
func serveInProcessAt(t *testing.T, root string) (io.ReadCloser, io.WriteCloser, string) {
	t.Helper()
	if euid := os.Geteuid(); euid != 0 {
		// Put sets owners, as the agent (root in a sandbox) does.
		testenv.Missing(t, fmt.Sprintf("root for the agent, which runs as root in a sandbox (euid is %d)", euid), "run the tests as root, e.g. `sudo make test`")
	}
	if root == "" {
		root = t.TempDir()
	}
	ar, hw := io.Pipe()
	hr, aw := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- agent.Serve(ar, aw, agent.ServeOptions{Root: root})
		aw.Close()
	}()
	t.Cleanup(func() {
		select {
		case err := <-served:
			if !agent.IsEOF(err) && !errors.Is(err, io.ErrClosedPipe) {
				t.Errorf("Serve ended with %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not end after the host closed")
		}
	})
	return hr, hw, root
}

// rawPut sends archive as a put over the bare protocol (no Host, whose
// Put writes only what it means to): the agent's answer, or the
// channel's failure.
func rawPut(ctx context.Context, c *agent.Conn, archive io.Reader) (refused string, err error) {
	s, done, err := c.Call(ctx, agent.Request{Op: agent.OpPut})
	if err != nil {
		return "", err
	}
	defer done()
	if _, err := io.Copy(s, archive); err != nil {
		return "", err
	}
	s.CloseWrite()
	r, err := agent.ReadResults(s, io.Discard, io.Discard)
	return r.Error, err
}

func tarOf(t *testing.T, hs ...*tar.Header) *io.PipeReader {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hs {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	tw.Close()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(func() error { _, err := io.Copy(pw, &b); return err }()) }()
	return pr
}

// Put takes directories and regular files only, and no name with "..":
// a hostile or broken archive creates nothing outside or odd.
func TestPutRefusesWhatPutNeverSends(t *testing.T) {
	hr, hw, root := serveInProcess(t)
	c := agent.NewHostConn(hr, hw, 0, hw, hr)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitHello(ctx); err != nil {
		t.Fatal(err)
	}
	// Positive control: a plain file is created.
	if refused, err := rawPut(ctx, c, tarOf(t, &tar.Header{Typeflag: tar.TypeReg, Name: "ok", Size: 2, Mode: 0o644})); refused != "" || err != nil {
		t.Fatalf("plain file: %q, %v", refused, err)
	}
	if _, err := os.Stat(filepath.Join(root, "ok")); err != nil {
		t.Fatal(err)
	}
	for _, hd := range []*tar.Header{
		{Typeflag: tar.TypeReg, Name: "../escape", Size: 1, Mode: 0o644},
		{Typeflag: tar.TypeReg, Name: "a/../../escape", Size: 1, Mode: 0o644},
		{Typeflag: tar.TypeSymlink, Name: "link", Linkname: "/etc/passwd"},
		{Typeflag: tar.TypeSymlink, Name: "rel", Linkname: "../../.."},
		{Typeflag: tar.TypeLink, Name: "hard", Linkname: "ok"},
		{Typeflag: tar.TypeFifo, Name: "fifo"},
		{Typeflag: tar.TypeChar, Name: "dev", Devmajor: 1, Devminor: 3},
	} {
		refused, err := rawPut(ctx, c, tarOf(t, hd))
		if refused == "" || err != nil {
			t.Errorf("put of %q (%c): refused %q, %v; want a refusal", hd.Name, hd.Typeflag, refused, err)
		}
	}
	var left []string
	filepath.WalkDir(filepath.Dir(root), func(p string, d os.DirEntry, err error) error {
		if err == nil && p != filepath.Dir(root) && p != root && p != filepath.Join(root, "ok") {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("put left %q", left)
	}
}

// A cancelled exec is a ProviderError-to-be (a transport error) and its
// process group is killed in the sandbox.
func TestExecCancelKills(t *testing.T) {
	h, root := inProcess(t)
	ctx, cancel := context.WithCancel(context.Background())
	pidfile := filepath.Join(root, "pid")
	done := make(chan error, 1)
	go func() {
		_, err := h.Exec(ctx, provider.ExecSpec{Argv: []string{"sh", "-c", "echo $$ > " + pidfile + "; exec sleep 600"}})
		done <- err
	}()
	var pid []byte
	deadline := time.Now().Add(10 * time.Second)
	for len(bytes.TrimSpace(pid)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the exec did not start")
		}
		time.Sleep(10 * time.Millisecond)
		pid, _ = os.ReadFile(pidfile)
	}
	proc := "/proc/" + strings.TrimSpace(string(pid))
	if _, err := os.Stat(proc); err != nil {
		t.Fatalf("positive control: %s: %v", proc, err)
	}
	cancel()
	select {
	case err := <-done:
		if !agenthost.IsTransport(err) || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled exec: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled exec did not return")
	}
	for {
		b, err := os.ReadFile(proc + "/stat")
		if err != nil || strings.Contains(string(b), ") Z ") {
			break // gone, or a zombie of a killed process
		}
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("%s still runs after the cancel", proc)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
