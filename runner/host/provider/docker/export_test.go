package docker

// Fills counts the volume fills (creations) this provider did.
func Fills(p *Provider) int64 { return p.fills.Load() }
