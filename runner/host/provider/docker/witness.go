package docker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"

	"github.com/sandproof/sandproof/runner/host/provider"
)

// witnessTimeout bounds each question the witness asks the engine: an
// engine that takes longer to answer a ping than this is not answering.
const witnessTimeout = 10 * time.Second

// engineWatch is one event stream the host holds open to the engine from
// a sandbox's creation to its removal. Nothing flows on it (it asks for
// the engine's own daemon events, which only a configuration reload
// sends); it ends only when the engine's end of it does: the engine
// stopped or restarted, or the host's connection to it broke. It is never
// reopened: once it ended, the sandbox's engine was interrupted while the
// sandbox was in use, which is what the witness reports. A restart that
// came back before anyone asked (a supervisor restarting the engine, an
// engine with live restore that kept the container running) is seen here
// and nowhere else.
type engineWatch struct {
	cancel context.CancelFunc
	opened time.Time
	done   chan struct{} // closed once the stream is over, for whatever reason
	mu     sync.Mutex
	ended  error // why the stream ended; nil while it is open
	at     time.Time
}

// watchEngine opens the stream in the background (a slow engine does not
// hold up the sandbox's creation) and keeps it until stop.
func watchEngine(c *client.Client) *engineWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &engineWatch{cancel: cancel, opened: time.Now(), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		msgs, errs := c.Events(ctx, events.ListOptions{Filters: filters.NewArgs(filters.Arg("type", "daemon"))})
		for {
			select {
			case <-msgs:
			case err := <-errs:
				if ctx.Err() == nil {
					w.mu.Lock()
					w.ended, w.at = err, time.Now()
					w.mu.Unlock()
				}
				return
			}
		}
	}()
	return w
}

// stop ends the watch (the sandbox is being removed); a stream ended by
// stop is not the engine's doing.
func (w *engineWatch) stop() {
	if w != nil {
		w.cancel()
	}
}

// endedText says when and why the stream ended; "" while it is open.
func (w *engineWatch) endedText() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.at.IsZero() {
		return ""
	}
	return fmt.Sprintf("the engine's event stream, held open since the sandbox was made, ended %s after it opened (the engine stopped or restarted, or the host's connection to it broke): %v",
		w.at.Sub(w.opened).Round(time.Millisecond), w.ended)
}

var (
	_ provider.EngineWitness = (*Sandbox)(nil)
	_ provider.EngineWitness = (*Provider)(nil)
)

// EngineFault is the engine's word on itself (provider.EngineWitness),
// with no sandbox to ask about: whether it answers a ping.
func (p *Provider) EngineFault(ctx context.Context) string {
	return ping(ctx, p.Client, p.Endpoint.Host)
}

// EngineFault is the engine's word on the sandbox (provider.EngineWitness),
// in this order: the engine does not answer a ping; its event stream held
// since the sandbox was made ended (it stopped or restarted meanwhile);
// it no longer knows the container (removed through the engine: nothing
// inside the container can do that); it cannot say (an inspect that
// fails). "" when the engine answers, stayed up and holds the container,
// whatever state the container is in: a container whose processes died
// (a root harness, the OOM killer inside its memory limit) is the
// sandbox's failure, not the engine's.
func (s *Sandbox) EngineFault(ctx context.Context) string {
	if why := ping(ctx, s.client, s.engine); why != "" {
		return why
	}
	if why := s.watch.endedText(); why != "" {
		return why
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), witnessTimeout)
	defer cancel()
	_, err := s.client.ContainerInspect(ctx, s.id)
	switch {
	case errdefs.IsNotFound(err):
		return fmt.Sprintf("the engine no longer knows container %s: it was removed through the engine, which nothing inside it can reach", shortID(s.id))
	case err != nil:
		return fmt.Sprintf("the engine does not answer an inspect of container %s: %v", shortID(s.id), err)
	}
	return ""
}

// ping asks the engine at host for its /_ping, within witnessTimeout
// whatever ctx says (the witness is asked after a failure, maybe after
// the case's context ended).
func ping(ctx context.Context, c *client.Client, host string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), witnessTimeout)
	defer cancel()
	if _, err := c.Ping(ctx); err != nil {
		return fmt.Sprintf("the engine at %s does not answer: %v", host, err)
	}
	return ""
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
