// Package pax names the PAX records the session agent's get puts on a tar
// entry it did not read, so that the host records what the agent met.
// The agent (runner/agent) writes them and the host's tar consumer
// (runner/host/provider's Untar) reads them: this package is their one
// owner and imports nothing, so that both ends link it and the agent
// links nothing of the host. The records are data from the sandbox, used
// for the record only.
package pax

const (
	// Withheld marks an entry (a fifo, no content) the read's user may
	// not read; its value is Denied.
	Withheld = "SANDPROOF.withheld"
	// Denied is Withheld's value: the user the read runs as may not read
	// the entry, so nothing of it was read.
	Denied = "denied"
	// LinkAt is the sandbox path of a link met at a component of the
	// asked path (not below it), on the symlink entry that stands for the
	// whole path: the read ended there.
	LinkAt = "SANDPROOF.link_at"
)
