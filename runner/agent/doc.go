// Package agent is the session agent's channel (frames, streams, the
// operations' requests and records, Conn.Call and ReadResults for the
// end that opens operations) and its in-sandbox end, Serve, which
// cmd/sandagent runs. The host's end, which speaks the provider's types,
// is runner/host/agenthost; this package imports nothing of the host, so
// the agent binary links none of it (runner/layers_test.go holds it to
// that).
//
// Design. The host starts `sandagent serve` in the sandbox as one
// long-lived, non-TTY exec (a provider's streamed exec); its stdin and
// stdout are one channel. Frames have a 9-byte header (type, stream id, length) and at
// most MaxPayload bytes; both ends send a hello with the protocol Version
// first and refuse another. Many streams share the channel: the host opens
// odd ids (exec, put, get, remove), the agent even ones (one per connection
// accepted on its tunnel listener). Each stream has a credit window per
// direction: a sender sends only what the receiver granted, the receiver
// buffers at most that and grants more as its reader consumes, so a stream
// whose reader is slow holds back only itself; the one reading goroutine
// never waits on a stream. Each direction half-closes on its own; a reset
// ends both; a channel that breaks (EOF, a write error, a frame that breaks
// the rules) fails every stream with ErrBroken. One operation, one stream,
// no engine round trip: that is what the channel is for.
//
// Threat model. Everything inside the sandbox may be hostile, the agent
// included once the harness ran (it is root in the sandbox, and the
// harness may be too). So the host end trusts nothing it reads: frame and
// record lengths are capped before anything is allocated, a sender past
// its window breaks the channel, archives are unpacked by the same
// host-side consumer the providers use (runner/host/agenthost says how)
// and exit statuses are data. The tunnel's destination is the host's
// choice (agenthost.Options.Target, the recording model relay): a tunnel
// stream's request names nothing, so a hostile agent can reach only that
// relay, never the host's other services. The agent itself works only
// inside the sandbox (paths under its --root) and needs no network but
// the sandbox's loopback. Every path its put, get and remove act on as
// root is resolved and acted on with the confined primitive
// (runner/confine): from a descriptor of the root, no link followed at
// any component, never by a path resolved again.
package agent
