package certify_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/host/images"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// refusingProvider keeps volumes but makes no sandbox: every case fails
// at setup, at once and without an engine, which is all a watcher needs.
type refusingProvider struct{}

var errNoSandbox = errors.New("this provider makes no sandbox")

func (refusingProvider) Name() string { return "refusing" }
func (refusingProvider) Create(context.Context, provider.CreateSpec) (provider.Sandbox, error) {
	return nil, errNoSandbox
}
func (refusingProvider) Open(context.Context, string) (provider.Sandbox, error) {
	return nil, errNoSandbox
}
func (refusingProvider) Volume(_ context.Context, key, _ string) (string, error) {
	return "vol-" + key, nil
}

// watchLog records what a Watcher is told, in order.
type watchLog struct {
	mu    sync.Mutex
	lines []string
}

func (w *watchLog) add(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, fmt.Sprintf(format, args...))
}
func (w *watchLog) Planned(n int)                         { w.add("planned %d", n) }
func (w *watchLog) CaseStarted(id string)                 { w.add("started %s", id) }
func (w *watchLog) CaseEnded(id string, s reports.Status) { w.add("ended %s %s", id, s) }

// The watcher hears of the plan, then of each case's start before its end
// with the status its evidence records.
func TestCertifyTellsTheWatcher(t *testing.T) {
	imgs := []images.Image{{Name: "img-a", Ref: "example/img-a"}, {Name: "img-b", Ref: "example/img-b"}}
	var log watchLog
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sum, err := certify.Run(ctx, certify.Options{
		Adapters: load(t, "fake-noloop"), Images: imgs, Provider: refusingProvider{},
		Warden: "/bin/true", Probe: "/bin/true", Agent: "/bin/true", Out: t.TempDir(), Watcher: &log,
	})
	if err != nil && sum == nil {
		t.Fatalf("certify: %v", err)
	}
	if sum.Counts[reports.StatusFailed] != 2 {
		t.Fatalf("summary %+v, want 2 failed cases", sum.Counts)
	}
	if len(log.lines) != 5 || log.lines[0] != "planned 2" {
		t.Fatalf("watcher heard %q, want the plan of 2 and a start and an end per case", log.lines)
	}
	for _, img := range []string{"img-a", "img-b"} {
		id := certify.CaseID(img, "fake-noloop", certify.ScenarioChallenge)
		start, end := slices.Index(log.lines, "started "+id), slices.Index(log.lines, "ended "+id+" failed")
		if start < 1 || end < start {
			t.Errorf("%s: started at %d, ended failed at %d in %q", id, start, end, log.lines)
		}
	}
}
