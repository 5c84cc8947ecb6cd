package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestModelServeRefusesBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--addr", "0.0.0.0:0"}, `--addr: bad value "0.0.0.0:0"`},
		{[]string{"--addr", ":8080"}, `--addr: bad value ":8080"`},
		{[]string{"--script", "418"}, `--script: bad value "418"`},
		{[]string{"--prefer", "edit"}, `--prefer: bad value "edit"`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(&stdout, &stderr, append([]string{"model", "serve"}, c.args...))
		if code != 2 || !strings.Contains(stderr.String(), c.want) || stdout.Len() != 0 {
			t.Errorf("model serve %q: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, stdout.String(), stderr.String(), c.want)
		}
	}
}

// lineWriter hands the first line written to it over a channel.
type lineWriter struct {
	buf   bytes.Buffer
	first chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	if w.first != nil {
		if line, err := bufio.NewReader(bytes.NewReader(w.buf.Bytes())).ReadString('\n'); err == nil {
			w.first <- strings.TrimSpace(line)
			w.first = nil
		}
	}
	return len(p), nil
}

func TestModelServePrintsTheURLAndServesWithTheKey(t *testing.T) {
	const key = "sk-canary-serve-31337"
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(t.TempDir(), "calls.jsonl")
	stdout := &lineWriter{first: make(chan string, 1)}
	var stderr bytes.Buffer
	root := newRoot(stdout, &stderr)
	root.SetArgs([]string{"model", "serve", "--api-key-file", keyFile, "--log", logFile})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	var url string
	select {
	case url = <-stdout.first:
	case err := <-done:
		t.Fatalf("serve ended before printing its URL: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve printed no URL in 30 s")
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/v1") {
		t.Fatalf("first line = %q; want http://127.0.0.1:PORT/v1", url)
	}
	for _, c := range []struct {
		auth   string
		status int
	}{{"", 401}, {"Bearer " + key, 200}} {
		req, _ := http.NewRequest(http.MethodGet, url+"/models", nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Fatalf("GET /models with %q answered %d; want %d", c.auth, resp.StatusCode, c.status)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve ended with %v; want nil on stop", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30 s")
	}
	log, _ := os.ReadFile(logFile)
	if n := strings.Count(string(log), "\n"); n != 2 {
		t.Fatalf("log holds %d lines; want 2", n)
	}
	for what, text := range map[string]string{"stdout": stdout.buf.String(), "stderr": stderr.String(), "log": string(log)} {
		if strings.Contains(text, key) {
			t.Errorf("the API key appears in %s", what)
		}
	}
	if !strings.Contains(stderr.String(), "sha256:") {
		t.Errorf("stderr %q names no key fingerprint", stderr.String())
	}
}
