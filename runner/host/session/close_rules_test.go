package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/warden/harness"

	"github.com/sandproof/sandproof/internal/testsupport/local"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/session"
)

// unconfirming is a sandbox whose warden stop (and, when wait is set,
// warden wait) answers the real receipt with cleanup_confirmed false and
// warden's exit status for it (1): what a stop that left a survivor
// answers, made deterministic.
type unconfirming struct {
	provider.Sandbox
	wait    bool
	rewrote int
}

func (u *unconfirming) Unwrap() provider.Sandbox { return u.Sandbox }

func (u *unconfirming) Exec(ctx context.Context, spec provider.ExecSpec) (provider.ExecResult, error) {
	res, err := u.Sandbox.Exec(ctx, spec)
	if err != nil || len(spec.Argv) < 2 || !(spec.Argv[1] == "stop" || u.wait && spec.Argv[1] == "wait") || !slices.Contains(spec.Argv, "--state") || res.ExitCode != 0 {
		return res, err
	}
	var rec map[string]any
	if json.Unmarshal(res.Stdout, &rec) != nil {
		return res, err
	}
	rec["cleanup_confirmed"] = false
	out, merr := json.Marshal(rec)
	if merr != nil {
		return res, merr
	}
	u.rewrote++
	res.Stdout, res.ExitCode = out, 1
	return res, nil
}

// Close fails on a receipt that does not confirm cleanup, whatever the
// harness's return code (here 0); the same session unrewritten closes
// (positive control).
func TestCloseRefusesAnUnconfirmedReceipt(t *testing.T) {
	for _, rewrite := range []bool{false, true} {
		ctx := ctxT(t, 2*time.Minute)
		sb, err := local.New(t.TempDir()).Create(context.Background(), provider.CreateSpec{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sb.Destroy(context.Background()) })
		u := &unconfirming{Sandbox: sb}
		var use provider.Sandbox = sb
		if rewrite {
			use = u
		}
		// The local provider cannot confine a read: the suite's own fixture.
		s, err := session.New(use, testAdapter("exit"), session.Config{ID: "unconfirmed", Owned: true, Binaries: bins, CaptureDir: t.TempDir(), UnconfinedCaptures: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Seed(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := s.Activate(ctx, "a1", "token", 60)
		if err != nil {
			t.Fatal(err)
		}
		if rc := res.Receipt.ReturnCode; rc == nil || *rc != 0 {
			t.Fatalf("activation return code %v, want 0", rc)
		}
		_, err = s.Close(ctx)
		switch {
		case !rewrite && err != nil:
			t.Fatalf("positive control: close with confirmed receipts: %v", err)
		case rewrite && u.rewrote == 0:
			t.Fatalf("no warden stop answered through the sandbox: the test proves nothing")
		case rewrite && !errors.Is(err, session.ErrNotConfirmed):
			t.Fatalf("close with an unconfirmed receipt (return code 0): %v, want ErrNotConfirmed", err)
		}
	}
}

// An install that exited 0 but whose cleanup is not confirmed fails the
// seed; the same install confirmed seeds (positive control).
func TestSeedRefusesAnUnconfirmedInstall(t *testing.T) {
	for _, rewrite := range []bool{false, true} {
		ctx := ctxT(t, 2*time.Minute)
		sb, err := local.New(t.TempDir()).Create(context.Background(), provider.CreateSpec{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sb.Destroy(context.Background()) })
		u := &unconfirming{Sandbox: sb, wait: true}
		var use provider.Sandbox = sb
		if rewrite {
			use = u
		}
		ad := testAdapter("exit")
		ad.Install = func(session.Env) (session.Step, error) {
			return session.Step{Params: harness.Params{Argv: []string{"sh", "-c", "exit 0"}}, Deadline: 30}, nil
		}
		s, err := session.New(use, ad, session.Config{ID: "install", Owned: true, Binaries: bins, CaptureDir: t.TempDir(), UnconfinedCaptures: true})
		if err != nil {
			t.Fatal(err)
		}
		err = s.Seed(ctx)
		switch {
		case !rewrite && err != nil:
			t.Fatalf("positive control: seed with a confirmed install: %v", err)
		case rewrite && u.rewrote == 0:
			t.Fatalf("no warden wait or stop answered through the sandbox: the test proves nothing")
		case rewrite && !errors.Is(err, session.ErrInstallFailed):
			t.Fatalf("seed with an unconfirmed install (return code 0): %v, want ErrInstallFailed", err)
		}
		s.Close(ctx)
	}
}
