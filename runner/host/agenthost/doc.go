// Package agenthost is the host's end of the session agent's channel
// (runner/agent holds the channel itself and its in-sandbox end, Serve,
// which cmd/sandagent runs): Host runs operations in the sandbox over the
// channel and forwards the agent's tunnel streams to the one address the
// host chose, and Sandbox is a provider.Sandbox over it.
//
// It is apart from runner/agent so that the agent binary links nothing
// of the host: the provider's types, its host-side tar consumer and its
// errors are used here only.
//
// Threat model. Everything inside the sandbox may be hostile, the agent
// included once the harness ran. So this end trusts nothing it reads:
// records are capped before anything is allocated (agent.ReadResults),
// archives are unpacked by the host-side consumer every provider uses
// (provider.Untar: entries leaving the destination refused, links
// recorded and never created, files cut at the caps) and exit statuses
// are data. A tunnel stream's request names nothing: only Options.Target
// (the recording model relay) is dialled.
package agenthost
