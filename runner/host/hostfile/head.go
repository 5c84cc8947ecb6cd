package hostfile

import (
	"bytes"
	"sync"
)

// HeadBuffer keeps the first Max bytes written to it and drops the rest:
// the start of a sandbox-side process's stderr, enough to explain a
// failure, never a way to fill the host's memory. It is safe for one
// writer (a copier goroutine) and readers at once.
type HeadBuffer struct {
	Max int

	mu      sync.Mutex
	b       bytes.Buffer
	dropped bool
}

// Write keeps what fits under Max and reports all of p written, so the
// writer never stalls on a full buffer.
func (h *HeadBuffer) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	room := h.Max - h.b.Len()
	if len(p) > room {
		h.dropped = true
	}
	if room > 0 {
		h.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// Dropped says whether anything written was not kept.
func (h *HeadBuffer) Dropped() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dropped
}

// Bytes is a copy of what was kept.
func (h *HeadBuffer) Bytes() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return bytes.Clone(h.b.Bytes())
}

func (h *HeadBuffer) String() string { return string(h.Bytes()) }
