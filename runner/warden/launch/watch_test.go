package launch

import (
	"os"
	"path/filepath"
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
// file is written only once the watcher exists, so the poll cannot be
// what finds it.
func TestWaitFileWatchesAfterPolling(t *testing.T) {
	n, made := countWatchers(t)
	dir := t.TempDir()
	found := make(chan bool, 1)
	go func() { found <- WaitFile(dir, "receipt.json", time.Minute, nil) }()
	select {
	case <-made:
	case <-time.After(30 * time.Second):
		t.Fatal("WaitFile made no watcher after its polling")
	}
	select {
	case ok := <-found:
		t.Fatalf("WaitFile returned %v before the file was written", ok)
	default:
	}
	if err := os.WriteFile(filepath.Join(dir, "receipt.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-found:
		if !ok {
			t.Fatal("WaitFile = false for a file written while it watched")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WaitFile did not see the file written while it watched")
	}
	if got := n.Load(); got != 1 {
		t.Fatalf("WaitFile made %d watchers, want 1", got)
	}
}

// A file written while WaitFile polls is found (by the poll or, on a slow
// host, the watcher).
func TestWaitFileFindsAFileWrittenWhileItPolls(t *testing.T) {
	dir := t.TempDir()
	found := make(chan bool, 1)
	go func() { found <- WaitFile(dir, "receipt.json", time.Minute, nil) }()
	if err := os.WriteFile(filepath.Join(dir, "receipt.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-found:
		if !ok {
			t.Fatal("WaitFile = false for a file that was written")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("WaitFile did not see the file")
	}
}

// The timeout and the check end the wait with false when the file never
// comes, in the polling phase and in the watching one.
func TestWaitFileEndsOnTimeoutAndCheck(t *testing.T) {
	dir := t.TempDir()
	if WaitFile(dir, "receipt.json", time.Nanosecond, nil) {
		t.Fatal("WaitFile = true with no file (timeout 1 ns)")
	}
	if WaitFile(dir, "receipt.json", PollFirst+100*time.Millisecond, nil) {
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
