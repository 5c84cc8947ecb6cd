package runtimes

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
)

// fakeSpec stages a tiny runtime: bin/tool, a shell script printing its
// version. builds counts Stage calls.
func fakeSpec(t *testing.T, builds *atomic.Int32) Spec {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		testenv.Missing(t, "sh on PATH", "install Debian's dash")
	}
	return Spec{
		Name: "fake", Version: "1.2.3", Target: HostTarget(), Package: "fake", Integrity: "sha512-fake",
		Entry: []string{"bin/tool"}, VersionArgs: []string{"--version"},
		Stage: func(ctx context.Context, dir string, info map[string]any) error {
			builds.Add(1)
			if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "bin", "tool"), []byte("#!/bin/sh\necho fake 1.2.3\n"), 0o755)
		},
	}
}

func TestPrepareReusesAVerifiedCache(t *testing.T) {
	var builds atomic.Int32
	spec, dir := fakeSpec(t, &builds), t.TempDir()
	a, err := Prepare(context.Background(), spec, dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Cached || a.VersionCheck == nil {
		t.Fatalf("first prepare: %+v", a)
	}
	b, err := Prepare(context.Background(), spec, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Cached || b.TreeSHA256 != a.TreeSHA256 || builds.Load() != 1 {
		t.Fatalf("second prepare: cached=%v sum %s/%s builds %d", b.Cached, b.TreeSHA256, a.TreeSHA256, builds.Load())
	}
	if _, err := os.Stat(filepath.Join(dir, spec.Key()+".lock")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lock left behind: %v", err)
	}
}

func TestPrepareRebuildsACorruptCache(t *testing.T) {
	for name, corrupt := range map[string]func(dir string) error{
		"changed file": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "bin", "tool"), []byte("#!/bin/sh\necho fake 1.2.3 # evil\n"), 0o755)
		},
		"extra file": func(dir string) error { return os.WriteFile(filepath.Join(dir, "bin", "extra"), nil, 0o644) },
		"no stamp":   func(dir string) error { return os.Remove(filepath.Join(dir, StampFile)) },
	} {
		t.Run(name, func(t *testing.T) {
			var builds atomic.Int32
			spec, cache := fakeSpec(t, &builds), t.TempDir()
			a, err := Prepare(context.Background(), spec, cache)
			if err != nil {
				t.Fatal(err)
			}
			if err := corrupt(a.Dir); err != nil {
				t.Fatal(err)
			}
			if _, err := Verify(context.Background(), spec, a.Dir); err == nil {
				t.Fatal("Verify accepted the corrupted runtime")
			}
			b, err := Prepare(context.Background(), spec, cache)
			if err != nil {
				t.Fatal(err)
			}
			if b.Cached || builds.Load() != 2 || b.TreeSHA256 != a.TreeSHA256 {
				t.Fatalf("after corruption: cached=%v builds=%d sum %s want %s", b.Cached, builds.Load(), b.TreeSHA256, a.TreeSHA256)
			}
			left, _ := filepath.Glob(filepath.Join(cache, ".*"))
			if len(left) != 0 {
				t.Fatalf("leftovers: %v", left)
			}
		})
	}
}

func TestPrepareRemovesAPartialStage(t *testing.T) {
	var builds atomic.Int32
	spec, cache := fakeSpec(t, &builds), t.TempDir()
	stage := spec.Stage
	spec.Stage = func(ctx context.Context, dir string, info map[string]any) error {
		if err := stage(ctx, dir, info); err != nil {
			return err
		}
		return errors.New("network died halfway")
	}
	if _, err := Prepare(context.Background(), spec, cache); err == nil || !strings.Contains(err.Error(), "halfway") {
		t.Fatalf("err = %v", err)
	}
	entries, _ := os.ReadDir(cache)
	if len(entries) != 0 {
		t.Fatalf("cache holds %v after a failed stage", entries)
	}

	// A stage left by a crashed process (no defer ran) is removed by the
	// next Prepare, which then builds.
	crashed := filepath.Join(cache, "."+spec.Key()+".stage-123")
	if err := os.MkdirAll(filepath.Join(crashed, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec.Stage = stage
	if _, err := Prepare(context.Background(), spec, cache); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(crashed); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("crashed stage still there: %v", err)
	}
}

func TestPrepareRefusesAWrongPackagesSum(t *testing.T) {
	var builds atomic.Int32
	spec, cache := fakeSpec(t, &builds), t.TempDir()
	spec.PackagesSHA256 = strings.Repeat("0", 64)
	_, err := Prepare(context.Background(), spec, cache)
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("err = %v, want ErrChecksum", err)
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Fatalf("cache holds %v", entries)
	}
}

func TestLockWaitsForALiveHolderAndBreaksAStaleOne(t *testing.T) {
	var builds atomic.Int32
	spec, cache := fakeSpec(t, &builds), t.TempDir()
	lock := filepath.Join(cache, spec.Key()+".lock")

	// Held by a live process (this one): Prepare waits until its ctx ends.
	me, err := self()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, []byte(me.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := Prepare(ctx, spec, cache); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with a live holder: err = %v", err)
	}
	if builds.Load() != 0 {
		t.Fatal("built while the lock was held")
	}

	// Held by a process that is gone: broken at once.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := me
	dead.PID = cmd.ProcessState.Pid()
	if err := os.WriteFile(lock, []byte(dead.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(context.Background(), spec, cache); err != nil {
		t.Fatalf("with a dead holder: %v", err)
	}

	// Our pid, another start time (a reused pid): stale too.
	reused := me
	reused.Start++
	if err := os.WriteFile(lock, []byte(reused.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(context.Background(), spec, cache); err != nil {
		t.Fatalf("with a reused pid: %v", err)
	}
	if _, err := os.Stat(lock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lock left: %v", err)
	}
}

func TestConcurrentPreparesBuildOnce(t *testing.T) {
	var builds atomic.Int32
	spec, cache := fakeSpec(t, &builds), t.TempDir()
	errs := make(chan error, 4)
	for range 4 {
		go func() { _, err := Prepare(context.Background(), spec, cache); errs <- err }()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if builds.Load() != 1 {
		t.Fatalf("built %d times", builds.Load())
	}
}

func TestTargetNames(t *testing.T) {
	for _, c := range []struct {
		t    Target
		want string
	}{
		{Target{Arch: "amd64", Libc: "glibc", Baseline: false}, "linux-x64"},
		{Target{Arch: "amd64", Libc: "glibc", Baseline: true}, "linux-x64-baseline"},
		{Target{Arch: "amd64", Libc: "musl", Baseline: false}, "linux-x64-musl"},
		{Target{Arch: "amd64", Libc: "musl", Baseline: true}, "linux-x64-baseline-musl"},
		{Target{Arch: "arm64", Libc: "glibc", Baseline: false}, "linux-arm64"},
		{Target{Arch: "arm64", Libc: "musl", Baseline: false}, "linux-arm64-musl"},
		{Target{Arch: "amd64", Libc: "glibc", GlibcLayer: true}, "linux-x64-glibc-layer"},
	} {
		if got := c.t.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.t, got, c.want)
		}
	}
}

// A tree that holds a link cannot be linked into a case or uploaded: it
// fails its preparation and never enters the cache (on main it was cached
// and failed every later run). An entry with one, stamped by an older
// sandproof, is rebuilt.
func TestPrepareNeverCachesATreeThatCannotBeLinked(t *testing.T) {
	var builds atomic.Int32
	spec, cache := fakeSpec(t, &builds), t.TempDir()
	good := spec.Stage
	withLink := func(ctx context.Context, dir string, info map[string]any) error {
		if err := good(ctx, dir, info); err != nil {
			return err
		}
		return os.Symlink("tool", filepath.Join(dir, "bin", "alias"))
	}
	spec.Stage = withLink
	_, err := Prepare(context.Background(), spec, cache)
	if err == nil || !strings.Contains(err.Error(), `"bin/alias" is not a file or directory`) {
		t.Fatalf("prepare of a tree with a link: %v", err)
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Fatalf("cache holds %v after a tree that cannot be linked", entries)
	}

	// An old entry with a link whose stamp covers it.
	spec.Stage = good
	a, err := Prepare(context.Background(), spec, cache)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("tool", filepath.Join(a.Dir, "bin", "alias")); err != nil {
		t.Fatal(err)
	}
	restamp(t, a.Dir)
	b, err := Prepare(context.Background(), spec, cache)
	if err != nil {
		t.Fatal(err)
	}
	if b.Cached || builds.Load() != 3 {
		t.Fatalf("entry with a link: cached=%v builds=%d, want rebuilt", b.Cached, builds.Load())
	}
	if _, err := os.Lstat(filepath.Join(b.Dir, "bin", "alias")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the rebuilt entry still has the link: %v", err)
	}
}

// restamp rewrites the stamp's tree sum to what dir hashes to now.
func restamp(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, StampFile))
	if err != nil {
		t.Fatal(err)
	}
	sum, _, _, err := TreeSum(dir, []string{StampFile})
	if err != nil {
		t.Fatal(err)
	}
	old, _, _ := strings.Cut(strings.SplitAfter(string(b), `"tree_sha256": "`)[1], `"`)
	if err := os.WriteFile(filepath.Join(dir, StampFile), []byte(strings.ReplaceAll(string(b), old, sum)), 0o644); err != nil {
		t.Fatal(err)
	}
}
