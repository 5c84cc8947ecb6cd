package docker

import (
	"context"
	"time"

	"github.com/docker/docker/client"

	"github.com/sandproof/sandproof/runner/host/provider"
)

// Fills counts the volume fills (creations) this provider did.
func Fills(p *Provider) int64 { return p.fills.Load() }

// Expire asks the engine to stop the container id after d, as Create does.
func Expire(p *Provider, id string, d time.Duration) { p.expire(id, d) }

// Witnessed is a sandbox of container id on the engine c reaches (host
// is its address), its engine watched as Create watches it; ended is
// closed once the watch's stream is over, stop ends the watch as Destroy
// does.
func Witnessed(c *client.Client, host, id string) (sb *Sandbox, ended <-chan struct{}, stop func()) {
	w := watchEngine(c)
	return &Sandbox{client: c, id: id, engine: host, watch: w}, w.done, w.stop
}

// FrozenEngineChanges is the engine's diff as Changes reads it when the
// upper dir cannot be walked: with the container frozen.
func FrozenEngineChanges(ctx context.Context, s *Sandbox) ([]provider.Change, error) {
	return s.frozenEngineChanges(ctx, s.client)
}

// UpperDir is the container's overlay upper dir, as the engine names it.
func UpperDir(ctx context.Context, s *Sandbox) (string, error) {
	c, err := s.client.ContainerInspect(ctx, s.id)
	if err != nil {
		return "", err
	}
	return c.GraphDriver.Data["UpperDir"], nil
}
