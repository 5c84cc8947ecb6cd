// Package model is the scripted model server: a real HTTP server on loopback
// that speaks the wire formats of runner/wire's table (OpenAI Chat
// Completions, streaming and plain, the Responses API, Anthropic Messages,
// and GET /v1/models), and answers the certification task of contract §7
// the way a real model would (one tool call that writes the deliverable,
// then "done"), or with a scripted fault (429, 400
// context_length_exceeded, 500, a stall, a malformed stream). Every request
// is recorded; the evidence's model_calls come from Server.Calls.
//
// Each format is one file, wire_<name>.go: its request decoder, its
// answers and its registration. The recording relay reads the same bodies
// with decoders of its own (runner/host/relay's transcript_<name>.go),
// never these structs: it is the witness, and a shared decoder would read
// back the model's own mistakes as right. The two share only the routes
// and the keys (runner/wire).
package model
