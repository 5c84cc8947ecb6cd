package session_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/local"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/session"
)

// scratchWorld is a seeded, activated local session whose adapter names
// scratch paths, with the files the harness would have left there and
// one beside them that is not its to remove.
func scratchWorld(t *testing.T, b session.Binaries, scratch []string) (*session.Session, func(string) string) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	sb, err := local.New(t.TempDir()).Create(context.Background(), provider.CreateSpec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	ad := testAdapter("exit")
	ad.Scratch = scratch
	s, err := session.New(sb, ad, session.Config{ID: "scratch", Owned: true, Binaries: b, UnconfinedCaptures: true, CaptureDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Activate(ctx, "a1", "tok", 60); err != nil {
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
// those, with the rmtree helper and with the image's sh and rm alike,
// and says what it removed; the session dir goes as before.
func TestCloseRemovesScratch(t *testing.T) {
	noRmtree := bins
	noRmtree.Rmtree = nil
	for name, b := range map[string]session.Binaries{"rmtree": bins, "sh and rm": noRmtree} {
		t.Run(name, func(t *testing.T) {
			s, host := scratchWorld(t, b, []string{"/tmp/oc-*", "/var/tmp/own", "/tmp/never-written*", "/nodir/x*"})
			for _, p := range []string{"/tmp/oc-1/gateway.lock", "/tmp/oc-2.log", "/var/tmp/own/lock"} {
				if !there(host(p)) {
					t.Fatalf("%s not there before close: the test proves nothing", p)
				}
			}
			res, err := s.Close(ctxT(t, time.Minute))
			if err != nil {
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
			if !res.SessionDirRemoved {
				t.Errorf("session dir not removed")
			}
		})
	}
}

// A scratch pattern whose directory the harness replaced with a link is
// refused, the link's target left alone, and close says so
// (ErrScratchNotRemoved), with either remover.
func TestCloseRefusesScratchThroughALink(t *testing.T) {
	noRmtree := bins
	noRmtree.Rmtree = nil
	for name, b := range map[string]session.Binaries{"rmtree": bins, "sh and rm": noRmtree} {
		t.Run(name, func(t *testing.T) {
			s, host := scratchWorld(t, b, []string{"/tmp/lnk/*", "/tmp/oc-*"})
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
