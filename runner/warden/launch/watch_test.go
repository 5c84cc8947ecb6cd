package launch

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countWatchers makes newWatcher count its calls and report each on the
// returned channel, for the test's life.
func countWatchers(t *testing.T) (*atomic.Int32, <-chan struct{}) {
	t.Helper()
	var n atomic.Int32
	made := make(chan struct{}, 16)
	orig := newWatcher
	newWatcher = func(dir string) *Watcher {
		n.Add(1)
		w := orig(dir)
		made <- struct{}{}
		return w
	}
	t.Cleanup(func() { newWatcher = orig })
	return &n, made
}

// A file that is already there is found without a watcher: no inotify
// instance, so nothing for the process's exit to pay.
func TestWaitFileFindsAnExistingFileWithoutAWatcher(t *testing.T) {
	n, _ := countWatchers(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "receipt.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !WaitFile(dir, "receipt.json", time.Minute, nil) {
		t.Fatal("WaitFile = false for a file that exists")
	}
	if got := n.Load(); got != 0 {
		t.Fatalf("WaitFile made %d watcher(s) for a file that was already there, want 0", got)
	}
}

// A file that comes after the polling is found through the watcher: the
// file is written only once the watcher exists, and the watch's periodic
// look is stretched to an hour, so only the watcher's event can find it.
func TestWaitFileWatchesAfterPolling(t *testing.T) {
	setFor(t, &watchTick, time.Hour)
	n, made := countWatchers(t)
	dir := t.TempDir()
	found := make(chan bool, 1)
	go func() { found <- WaitFile(dir, "receipt.json", time.Minute, nil) }()
	await(t, made, "WaitFile made no watcher after its polling")
	select {
	case ok := <-found:
		t.Fatalf("WaitFile returned %v before the file was written", ok)
	default:
	}
	writeThenFound(t, dir, found, "while it watched")
	if got := n.Load(); got != 1 {
		t.Fatalf("WaitFile made %d watchers, want 1", got)
	}
}

// A file written while WaitFile polls is found by the poll: the polling
// is stretched to a minute, so no watcher is made in the test's time.
func TestWaitFileFindsAFileWrittenWhileItPolls(t *testing.T) {
	setFor(t, &pollFirst, time.Minute)
	n, _ := countWatchers(t)
	dir := t.TempDir()
	// The check is called after WaitFile's first look: the file is
	// written once it has been, so a later poll must be what finds it.
	looked := make(chan struct{})
	var once sync.Once
	check := func() bool {
		once.Do(func() { close(looked) })
		return false
	}
	found := make(chan bool, 1)
	go func() { found <- WaitFile(dir, "receipt.json", 0, check) }()
	await(t, looked, "WaitFile never called its check")
	writeThenFound(t, dir, found, "while it polled")
	if got := n.Load(); got != 0 {
		t.Fatalf("WaitFile made %d watcher(s) while polling, want 0", got)
	}
}

// While it polls, the timeout and the check end the wait: the polling is
// stretched to a minute, and each must end it well before that, with no
// watcher made.
func TestWaitFileEndsWhilePolling(t *testing.T) {
	setFor(t, &pollFirst, time.Minute)
	n, _ := countWatchers(t)
	dir := t.TempDir()
	ended := func(name string, wait func() bool) {
		t.Helper()
		done := make(chan bool, 1)
		go func() { done <- wait() }()
		if await(t, done, name+": WaitFile did not end while it polled") {
			t.Fatalf("%s: WaitFile = true with no file", name)
		}
	}
	ended("timeout 10 ms", func() bool { return WaitFile(dir, "receipt.json", 10*time.Millisecond, nil) })
	var calls atomic.Int32
	ended("check true at its third call", func() bool {
		return WaitFile(dir, "receipt.json", 0, func() bool { return calls.Add(1) >= 3 })
	})
	if got := n.Load(); got != 0 {
		t.Fatalf("WaitFile made %d watcher(s) while polling, want 0", got)
	}
}

// await returns what c gives, failing with what when nothing comes in
// 30 s.
func await[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(30 * time.Second):
		t.Fatal(what)
	}
	panic("unreachable")
}

// writeThenFound writes dir/receipt.json and expects the WaitFile behind
// found to report it, when it has been written "when".
func writeThenFound(t *testing.T, dir string, found <-chan bool, when string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "receipt.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !await(t, found, "WaitFile did not see the file written "+when) {
		t.Fatal("WaitFile = false for a file written " + when)
	}
}

// setFor sets *v to d for the test's life.
func setFor(t *testing.T, v *time.Duration, d time.Duration) {
	t.Helper()
	old := *v
	*v = d
	t.Cleanup(func() { *v = old })
}

// The timeout and the check end the wait with false when the file never
// comes, in the polling phase and in the watching one.
func TestWaitFileEndsOnTimeoutAndCheck(t *testing.T) {
	dir := t.TempDir()
	if WaitFile(dir, "receipt.json", time.Nanosecond, nil) {
		t.Fatal("WaitFile = true with no file (timeout 1 ns)")
	}
	if WaitFile(dir, "receipt.json", pollFirst+100*time.Millisecond, nil) {
		t.Fatal("WaitFile = true with no file (timeout past the polling)")
	}
	var calls atomic.Int32
	if WaitFile(dir, "receipt.json", 0, func() bool { return calls.Add(1) > 3 }) {
		t.Fatal("WaitFile = true with no file (check true)")
	}
	n, _ := countWatchers(t)
	if WaitFile(dir, "receipt.json", 0, func() bool { return n.Load() > 0 }) {
		t.Fatal("WaitFile = true with no file (check true once watching)")
	}
}

// The polling watcher (no inotify) reports a name that appears, and a
// request written again under its name (a stop, then a stop of the
// services: the same file, a new modification time), once each; nothing
// when nothing changed. The positive control: the first listing records
// what is there.
func TestPollChangesSeesARequestWrittenAgain(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string, mtime time.Time) {
		t.Helper()
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(tmp, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	write("receipt.json", "{}", t0)
	seen := map[string]time.Time{}
	if got := pollChanges(dir, seen); len(got) != 1 || got[0] != "receipt.json" || len(seen) != 1 {
		t.Fatalf("positive control: the first listing %q, seen %v", got, seen)
	}
	write("stop", `{}`, t0)
	if got := pollChanges(dir, seen); len(got) != 1 || got[0] != "stop" {
		t.Errorf("a new stop request: %q, want [stop]", got)
	}
	if got := pollChanges(dir, seen); len(got) != 0 {
		t.Errorf("nothing changed: %q, want none", got)
	}
	write("stop", `{"services":true}`, t0.Add(time.Second))
	if got := pollChanges(dir, seen); len(got) != 1 || got[0] != "stop" {
		t.Errorf("the stop request written again: %q, want [stop]", got)
	}
}
