package session_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/local"
	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/agenthost"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/session"
)

// The ways close removes as root: the session agent's confined removal
// (provider.Remover), the rmtree helper (the same code, runner/confine),
// and neither (scratch as the harness's user, the session dir refused).
const (
	byAgent  = "the session agent"
	byRmtree = "the rmtree helper"
	byNone   = "no confined remover"
)

var removers = []string{byAgent, byRmtree, byNone}

// execLog is a sandbox that records the execs it ran.
type execLog struct {
	provider.Sandbox
	specs chan provider.ExecSpec
}

func (l *execLog) Exec(ctx context.Context, spec provider.ExecSpec) (provider.ExecResult, error) {
	select {
	case l.specs <- spec:
	default:
	}
	return l.Sandbox.Exec(ctx, spec)
}

func (l *execLog) Unwrap() provider.Sandbox { return l.Sandbox }

// removerWorld is a seeded local session whose close removes with
// remover, its sandbox's root on the host, and the execs it ran.
func removerWorld(t *testing.T, remover string, ad session.Adapter, cfg session.Config) (*session.Session, string, *execLog) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	sb, err := local.New(t.TempDir()).Create(context.Background(), provider.CreateSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	lsb := sb.(*local.Sandbox)
	log := &execLog{Sandbox: sb, specs: make(chan provider.ExecSpec, 64)}
	cfg.Binaries = bins
	if remover != byRmtree {
		cfg.Binaries.Rmtree = nil
	}
	if remover == byAgent {
		asb, err := agenthost.Start(ctx, lsb, []string{sandagent, "serve", "--root", lsb.Root()}, os.Stderr, agenthost.Options{})
		if err != nil {
			t.Fatalf("start the agent: %v", err)
		}
		t.Cleanup(func() { asb.Close() })
		log.Sandbox = asb
	}
	cfg.Owned, cfg.UnconfinedCaptures, cfg.CaptureDir = true, true, t.TempDir()
	s, err := session.New(log, ad, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	return s, lsb.Root(), log
}

// scratchWorld is a seeded, activated local session whose adapter names
// scratch paths, with the files the harness would have left there and
// one beside them that is not its to remove.
func scratchWorld(t *testing.T, remover string, scratch []string) (*session.Session, func(string) string) {
	t.Helper()
	ad := testAdapter("exit")
	ad.Scratch = scratch
	s, _, _ := removerWorld(t, remover, ad, session.Config{ID: "scratch"})
	if _, err := s.Activate(ctxT(t, time.Minute), "a1", "tok", 60); err != nil {
		t.Fatal(err)
	}
	host := s.HostPath
	for _, f := range []string{"/tmp/oc-1/gateway.lock", "/tmp/oc-2.log", "/tmp/keep/x", "/var/tmp/own/lock"} {
		if err := os.MkdirAll(filepath.Dir(host(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(host(f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return s, host
}

func there(p string) bool { _, err := os.Lstat(p); return err == nil }

// Close removes every match of the adapter's scratch patterns, and only
// those, with each remover, and says what it removed. The session dir
// goes with a confined remover (the agent, the helper) and is refused
// without one (rm as root by path could be steered).
func TestCloseRemovesScratch(t *testing.T) {
	for _, remover := range removers {
		t.Run(remover, func(t *testing.T) {
			s, host := scratchWorld(t, remover, []string{"/tmp/oc-*", "/var/tmp/own", "/tmp/never-written*", "/nodir/x*"})
			for _, p := range []string{"/tmp/oc-1/gateway.lock", "/tmp/oc-2.log", "/var/tmp/own/lock"} {
				if !there(host(p)) {
					t.Fatalf("%s not there before close: the test proves nothing", p)
				}
			}
			res, err := s.Close(ctxT(t, time.Minute))
			switch {
			case remover == byNone && !errors.Is(err, session.ErrNotRemoved):
				t.Fatalf("close: %v, want ErrNotRemoved (no confined remover for the session dir)", err)
			case remover != byNone && err != nil:
				t.Fatalf("close: %v", err)
			}
			for _, p := range []string{"/tmp/oc-1", "/tmp/oc-2.log", "/var/tmp/own"} {
				if there(host(p)) {
					t.Errorf("%s still there after close", p)
				}
			}
			if !there(host("/tmp/keep/x")) || !there(host("/tmp")) {
				t.Errorf("close removed what no scratch pattern matches")
			}
			if want := []string{"/tmp/oc-1", "/tmp/oc-2.log", "/var/tmp/own"}; !slices.Equal(res.ScratchRemoved, want) {
				t.Errorf("ScratchRemoved %q, want %q", res.ScratchRemoved, want)
			}
			if res.SessionDirRemoved != (remover != byNone) || there(host(s.Dir())) != (remover == byNone) {
				t.Errorf("session dir removed %t, there %t", res.SessionDirRemoved, there(host(s.Dir())))
			}
		})
	}
}

// A scratch pattern whose directory the harness replaced with a link is
// refused, the link's target left alone, and close says so
// (ErrScratchNotRemoved), with each remover.
func TestCloseRefusesScratchThroughALink(t *testing.T) {
	for _, remover := range removers {
		t.Run(remover, func(t *testing.T) {
			s, host := scratchWorld(t, remover, []string{"/tmp/lnk/*", "/tmp/oc-*"})
			if err := os.Symlink(host("/tmp/keep"), host("/tmp/lnk")); err != nil {
				t.Fatal(err)
			}
			if !there(host("/tmp/lnk/x")) {
				t.Fatal("the link does not reach the victim: the test proves nothing")
			}
			res, err := s.Close(ctxT(t, time.Minute))
			if !errors.Is(err, session.ErrScratchNotRemoved) {
				t.Fatalf("close: %v, want ErrScratchNotRemoved", err)
			}
			if !there(host("/tmp/keep/x")) {
				t.Fatalf("the link's target was removed")
			}
			if there(host("/tmp/oc-1")) || !slices.Contains(res.ScratchRemoved, "/tmp/oc-1") {
				t.Errorf("the other pattern was not removed: %q", res.ScratchRemoved)
			}
		})
	}
}

// Without a confined remover, close removes the scratch with the image's
// sh and rm as the harness's own user, never as root: a match the harness
// could not remove itself (a root-owned dir holding a root file) stays,
// and close says so, while the harness's own match goes. Root removing by
// path can be steered by a link the harness swaps in (issue 35); the
// harness's own user can only be steered where the harness could go.
func TestScratchWithoutAConfinedRemoverRunsAsTheHarness(t *testing.T) {
	if euid := os.Geteuid(); euid != 0 {
		testenv.Missing(t, fmt.Sprintf("root, to make files of two users (euid is %d)", euid), "run the tests as root, e.g. `sudo make test`")
	}
	ad := testAdapter("exit")
	ad.Scratch = []string{"/tmp/oc-*"}
	s, root, log := removerWorld(t, byNone, ad, session.Config{ID: "as-harness", User: "1000:1000"})
	// The harness's user reaches the sandbox's /tmp (t.TempDir's dirs
	// are 0700).
	for p := root; p != filepath.Dir(p) && strings.HasPrefix(p, os.TempDir()+"/"); p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	tmp := filepath.Join(root, "tmp")
	os.MkdirAll(filepath.Join(tmp, "oc-root"), 0o755)
	os.MkdirAll(filepath.Join(tmp, "oc-mine"), 0o755)
	os.Chmod(tmp, 0o1777)
	os.WriteFile(filepath.Join(tmp, "oc-root", "f"), []byte("root's"), 0o644)
	os.WriteFile(filepath.Join(tmp, "oc-mine", "f"), []byte("the harness's"), 0o644)
	for _, p := range []string{"oc-mine", "oc-mine/f"} {
		os.Lchown(filepath.Join(tmp, p), 1000, 1000)
	}
	for len(log.specs) > 0 {
		<-log.specs
	}
	res, err := s.Close(ctxT(t, time.Minute))
	if !errors.Is(err, session.ErrScratchNotRemoved) {
		t.Errorf("close: %v, want ErrScratchNotRemoved (root's match is not the harness's to remove)", err)
	}
	if !there(filepath.Join(tmp, "oc-root", "f")) {
		t.Errorf("root's file in a scratch match was removed: the removal ran as root")
	}
	if there(filepath.Join(tmp, "oc-mine")) || !slices.Contains(res.ScratchRemoved, "/tmp/oc-mine") {
		t.Errorf("the harness's own match was not removed (positive control): %q", res.ScratchRemoved)
	}
	var users []string
	for len(log.specs) > 0 {
		if spec := <-log.specs; len(spec.Argv) > 0 && spec.Argv[0] == "sh" {
			users = append(users, spec.User)
		}
	}
	if !slices.Equal(users, []string{"1000:1000"}) {
		t.Errorf("the scratch removal ran as %q, want the harness's user 1000:1000", users)
	}
}

// The session dir's removal follows none of the links the harness planted
// in its home and run dir (to a victim dir, to a victim file): with the
// agent and with the helper the links go with the dir and the victims
// stay; with neither nothing is removed as root (ErrNotRemoved).
func TestCloseRemovesTheSessionDirFollowingNoLink(t *testing.T) {
	for _, remover := range removers {
		t.Run(remover, func(t *testing.T) {
			s, root, _ := removerWorld(t, remover, testAdapter("exit"), session.Config{ID: "planted"})
			victim := filepath.Join(filepath.Dir(root), "victim")
			os.MkdirAll(filepath.Join(victim, "d"), 0o755)
			os.WriteFile(filepath.Join(victim, "d", "f"), []byte("victim"), 0o644)
			dir := s.HostPath(s.Dir())
			os.MkdirAll(filepath.Join(dir, "run", "a1"), 0o755)
			for link, target := range map[string]string{"home/lnk": victim, "home/d": filepath.Join(victim, "d"), "run/a1/lnk": filepath.Join(victim, "d", "f")} {
				if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
					t.Fatal(err)
				}
			}
			if !there(filepath.Join(dir, "home", "lnk", "d", "f")) {
				t.Fatal("positive control: the planted link does not reach the victim")
			}
			res, err := s.Close(ctxT(t, time.Minute))
			if remover == byNone {
				if !errors.Is(err, session.ErrNotRemoved) || res.SessionDirRemoved || !there(dir) {
					t.Errorf("no confined remover: close %v, removed %t, there %t; want ErrNotRemoved and the dir left", err, res.SessionDirRemoved, there(dir))
				}
			} else if err != nil || !res.SessionDirRemoved || there(dir) {
				t.Errorf("close %v, removed %t, there %t", err, res.SessionDirRemoved, there(dir))
			}
			var st syscall.Stat_t
			if err := syscall.Lstat(filepath.Join(victim, "d", "f"), &st); err != nil {
				t.Errorf("the victim was removed through a planted link: %v", err)
			}
		})
	}
}
