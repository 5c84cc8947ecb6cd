package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/local"
	"github.com/sandproof/sandproof/runner/host/session"
	"github.com/sandproof/sandproof/runner/warden/receipt"
)

// leaseChildEnv carries the sandbox root to the child that holds the
// session; leaseBinsEnv the binaries it uploads.
const (
	leaseChildEnv = "SESSION_TEST_LEASE_ROOT"
	leaseBinsEnv  = "SESSION_TEST_LEASE_BINS"
)

// leaseChild is the host process the test kills: it seeds a session in the
// given local sandbox and activates a harness that hangs, renewing a short
// lease until it is SIGKILLed.
func leaseChild() int {
	root := os.Getenv(leaseChildEnv)
	if err := json.Unmarshal([]byte(os.Getenv(leaseBinsEnv)), &bins); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	sb, err := local.New("").Open(ctx, root)
	if err == nil {
		var s *session.Session
		s, err = session.New(sb, testAdapter("hang"), session.Config{
			ID: "lease", Binaries: bins, Lease: 2 * time.Second, Grace: 500 * time.Millisecond,
			CaptureDir: filepath.Join(root, "captures"), UnconfinedCaptures: true, // the local provider cannot confine
		})
		if err == nil {
			err = s.Seed(ctx)
		}
		if err == nil {
			_, err = s.Activate(ctx, "a1", "tok", 300)
		}
	}
	fmt.Fprintf(os.Stderr, "lease child: activation returned (it should have been killed first): %v\n", err)
	return 1
}

func TestLeaseStopsTreeWhenHostDies(t *testing.T) {
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(bins)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), leaseChildEnv+"="+root, leaseBinsEnv+"="+string(b))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	dir := filepath.Join(root, "var/lib/sandproof/lease")
	pidFile := filepath.Join(dir, "run/a1/sleep.pid")
	waitFor(t, func() bool {
		select {
		case err := <-exited:
			t.Fatalf("lease child exited early: %v", err)
		default:
		}
		b, err := os.ReadFile(pidFile)
		return err == nil && len(b) > 0 && b[len(b)-1] == '\n'
	})
	sleepPid := readPid(t, pidFile)
	if !alive(sleepPid) {
		t.Fatalf("positive control: the harness's setsid'd sleep %d is not alive", sleepPid)
	}
	state := filepath.Join(dir, "state/a1")
	if _, err := os.Stat(filepath.Join(state, receipt.FileName)); err == nil {
		t.Fatal("a receipt exists before the host died")
	}
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited

	// Nobody renews now: the supervisor must stop the tree with cause
	// "lease" (2 s lease, 0.5 s grace) and write a receipt.
	var r *receipt.Receipt
	waitFor(t, func() bool {
		var err error
		r, _, err = receipt.Read(state)
		return err == nil
	})
	if r.Cause != receipt.CauseLease || !r.CleanupConfirmed {
		t.Fatalf("receipt cause %q confirmed %t, want lease and confirmed", r.Cause, r.CleanupConfirmed)
	}
	if alive(sleepPid) {
		t.Fatalf("sleep %d alive after the lease lapsed", sleepPid)
	}
}
