package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/images"
)

func TestImagesUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string // quoted in the message
	}{
		{[]string{"images", "build", "--only", "ubuntu"}, `--only: bad value "ubuntu"`},
		{[]string{"images", "list", "--image", "alpine"}, `--image: bad value "alpine"`},
		{[]string{"images", "build", "--image", "=x"}, `--image: bad value "=x"`},
		{[]string{"images", "clean", "--image", "a=b c"}, `--image: bad value "a=b c"`},
		{[]string{"images", "list", "extra"}, `unknown command "extra"`},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := run(&out, &errb, tt.args)
		if code != 2 || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("sandproof %s: exit %d, stderr %q; want 2 and %q", strings.Join(tt.args, " "), code, errb.String(), tt.want)
		}
	}
}

func TestImagesListAgainstEngine(t *testing.T) {
	testenv.Docker(t)
	if _, err := (images.Engine{}).Ping(context.Background()); err != nil {
		testenv.OptedInEngine(t, err)
	}
	var out, errb bytes.Buffer
	if code := run(&out, &errb, []string{"images", "list", "--image", "extra=sandproof/none:0"}); code != 0 {
		t.Fatalf("images list: exit %d\n%s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("images list printed %d lines, want 4:\n%s", len(lines), out.String())
	}
	if lines[2] != "extra sandproof/none:0 missing" {
		t.Errorf("mapped, absent image: %q", lines[2])
	}
	for _, l := range []string{lines[0], lines[1], lines[3]} {
		f := strings.Fields(l)
		if len(f) == 3 && f[2] == "missing" {
			continue // not built on this engine
		}
		if len(f) != 7 || !strings.HasPrefix(f[1], "sandproof/"+f[0]+":") || !strings.HasPrefix(f[4], "bash=") ||
			!strings.HasPrefix(f[5], "python3=") || !strings.HasPrefix(f[6], "os=") {
			t.Errorf("line %q: want NAME REF ID SIZE bash= python3= os=", l)
		}
	}
}

// An image the engine does not have is an infrastructure failure (exit
// 3, one line naming it), found before any case runs: no case is written.
func TestCertifyMissingImageIsInfrastructure(t *testing.T) {
	testenv.Docker(t)
	if _, err := (images.Engine{}).Ping(context.Background()); err != nil {
		testenv.OptedInEngine(t, err)
	}
	tmp := t.TempDir()
	_, warden, probe := buildTools(t, tmp)
	out := filepath.Join(tmp, "out")
	var stdout, errb bytes.Buffer
	code := run(&stdout, &errb, []string{"certify", "--warden", warden, "--probe", probe, "--out", out,
		"--image", "debian-12=sandproof/never-built:0", "--adapter", "../../fixtures/adapters/fake-noloop.yaml"})
	if code != exitInfra || !strings.Contains(errb.String(), "sandproof/never-built:0") || !strings.Contains(errb.String(), "image missing") {
		t.Fatalf("exit %d, stderr %q; want 3 naming the missing image", code, errb.String())
	}
	if b, err := os.ReadFile(filepath.Join(out, "evidence.jsonl")); err == nil && len(b) > 0 {
		t.Errorf("a case was written: %q", b)
	}
}

// A signal that cancels an images command is remembered, so the exit
// status is 143 (130) rather than what the cancelled work returned.
func TestSignalContextRemembersTheSignal(t *testing.T) {
	t.Cleanup(func() { caught = atomic.Value{} })
	if _, ok := caught.Load().(os.Signal); ok {
		t.Fatal("a signal is recorded before any was sent")
	}
	ctx, cancel := signalContext(&cobra.Command{})
	defer cancel()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("SIGTERM did not cancel the context")
	}
	s, ok := caught.Load().(os.Signal)
	if !ok || signalExit(s).code != exitSIGTERM {
		t.Errorf("caught %v, want SIGTERM (exit 143)", s)
	}
}
