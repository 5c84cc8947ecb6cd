package main

import (
	"bytes"
	"sync/atomic"
	"syscall"
	"testing"
)

// Work that a signal cancelled exits 128+N whatever error it ended with
// (contract §9: interrupted > infrastructure > failed): here a report
// of evidence that is not there, a usage error (2) when no signal was
// caught, the positive control.
func TestSignalOutranksTheErrorItCaused(t *testing.T) {
	t.Cleanup(func() { caught = atomic.Value{} })
	args := []string{"report", "/nonexistent/sandproof/evidence.jsonl"}
	var out, errb bytes.Buffer
	if code := run(&out, &errb, args); code != exitUsage {
		t.Fatalf("positive control: no signal: exit %d (%q), want %d", code, errb.String(), exitUsage)
	}
	for sig, want := range map[syscall.Signal]int{syscall.SIGTERM: exitSIGTERM, syscall.SIGINT: exitSIGINT} {
		caught.Store(sig)
		errb.Reset()
		if code := run(&out, &errb, args); code != want {
			t.Errorf("after %v: exit %d (%q), want %d", sig, code, errb.String(), want)
		}
	}
}
