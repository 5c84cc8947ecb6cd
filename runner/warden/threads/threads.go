// Package threads keeps a Go program alive at a pids limit. Go's runtime
// aborts the process ("failed to create new OS thread") when it needs a
// thread and clone fails, and a process tree sitting at its pids limit
// makes every clone fail. A program that must outlive such a tree (warden's
// detached supervisor; the suite's fork-bomb harness, which must reach its
// deadline for the stop to be a deadline stop) makes its threads first.
package threads

import (
	"runtime"
	"sync"
)

// Reserve makes n OS threads now and leaves them idle. Each goroutine below
// holds its own thread (LockOSThread) until all n exist; unlocked, the
// threads return to the runtime's idle list, which it draws from before it
// makes a new one and never shrinks.
func Reserve(n int) {
	var held sync.WaitGroup
	release := make(chan struct{})
	held.Add(n)
	var done sync.WaitGroup
	done.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			held.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	held.Wait()
	close(release)
	done.Wait()
}
