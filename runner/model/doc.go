// Package model is the scripted model server: a real HTTP server on loopback
// that speaks the OpenAI Chat Completions API (streaming and plain), the
// Responses API and GET /v1/models, and answers the certification task of
// contract §7 the way a real model would (one tool call that writes the
// deliverable, then "done"), or with a scripted fault (429, 400
// context_length_exceeded, 500, a stall, a malformed stream). Every request
// is recorded; the evidence's model_calls come from Server.Calls.
package model
