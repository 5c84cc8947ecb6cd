package docker

import "time"

// Fills counts the volume fills (creations) this provider did.
func Fills(p *Provider) int64 { return p.fills.Load() }

// Expire asks the engine to stop the container id after d, as Create does.
func Expire(p *Provider, id string, d time.Duration) { p.expire(id, d) }
