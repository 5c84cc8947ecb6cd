package docker_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/docker/docker/client"

	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/provider/docker"
)

// fakeEngine answers the three questions the witness asks, as an engine
// would: /_ping, an event stream that stays open until restart is
// closed (the engine going away under it), and a container's inspect
// (404 once gone). opened gets each event stream's filters.
type fakeEngine struct {
	srv     *httptest.Server
	restart chan struct{}
	opened  chan string
	mu      sync.Mutex
	gone    bool
}

const witnessID = "c0ffee0123456789abcdef"

func newFakeEngine(t *testing.T) (*fakeEngine, *client.Client) {
	t.Helper()
	f := &fakeEngine{restart: make(chan struct{}), opened: make(chan string, 4)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("API-Version", "1.41")
		switch {
		case r.URL.Path == "/_ping":
			fmt.Fprint(w, "OK")
		case strings.HasSuffix(r.URL.Path, "/events"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			f.opened <- r.URL.Query().Get("filters")
			select {
			case <-f.restart:
			case <-r.Context().Done():
			}
		case strings.HasSuffix(r.URL.Path, "/containers/"+witnessID+"/json"):
			f.mu.Lock()
			gone := f.gone
			f.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			if gone {
				w.WriteHeader(http.StatusNotFound)
				fmt.Fprintf(w, `{"message":"No such container: %s"}`, witnessID)
				return
			}
			fmt.Fprintf(w, `{"Id":%q,"State":{"Running":false,"OOMKilled":true,"ExitCode":137}}`, witnessID)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(func() {
		f.srv.CloseClientConnections()
		f.srv.Close()
	})
	c, err := client.NewClientWithOpts(client.WithHost("tcp://"+f.srv.Listener.Addr().String()), client.WithVersion("1.41"))
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

// The engine's word on a sandbox, for each way the engine can fail it,
// and none for a container that merely died (stopped, OOM-killed: the
// sandbox's failure) or a watch the host ended itself.
func TestEngineWitness(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		act  func(f *fakeEngine, ended <-chan struct{}, stop func())
		want string // in the answer; "" for none
	}{
		{"the engine sound, the container dead inside", func(*fakeEngine, <-chan struct{}, func()) {}, ""},
		{"the engine restarted", func(f *fakeEngine, ended <-chan struct{}, _ func()) {
			close(f.restart)
			<-ended
		}, "event stream"},
		{"the container removed through the engine", func(f *fakeEngine, _ <-chan struct{}, _ func()) {
			f.mu.Lock()
			f.gone = true
			f.mu.Unlock()
		}, "no longer knows container " + witnessID[:12]},
		{"the engine gone", func(f *fakeEngine, ended <-chan struct{}, _ func()) {
			f.srv.CloseClientConnections()
			f.srv.Close()
			<-ended
		}, "does not answer"},
		{"the watch ended by the host (the sandbox's removal)", func(_ *fakeEngine, ended <-chan struct{}, stop func()) {
			stop()
			<-ended
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFakeEngine(t)
			sb, ended, stop := docker.Witnessed(c, "tcp://fake", witnessID)
			defer stop()
			// Positive control: the stream is open, asking for the
			// engine's own events only (nothing flows on it).
			if filters := <-f.opened; !strings.Contains(filters, `"daemon"`) {
				t.Fatalf("the event stream's filters %q, want type daemon", filters)
			}
			var w provider.EngineWitness = sb
			if got := w.EngineFault(ctx); got != "" {
				t.Fatalf("before anything happened: %q, want none", got)
			}
			tc.act(f, ended, stop)
			got := w.EngineFault(ctx)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("the engine's word %q, want %q", got, tc.want)
			}
		})
	}
}

// The provider answers for the engine alone: a ping.
func TestProviderEngineWitness(t *testing.T) {
	f, c := newFakeEngine(t)
	p := &docker.Provider{Client: c}
	if got := p.EngineFault(context.Background()); got != "" {
		t.Fatalf("the engine answers: %q, want none", got)
	}
	f.srv.CloseClientConnections()
	f.srv.Close()
	if got := p.EngineFault(context.Background()); !strings.Contains(got, "does not answer") {
		t.Fatalf("the engine gone: %q, want that it does not answer", got)
	}
}
