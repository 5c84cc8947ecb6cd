package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// A frame is what the probe's setup run reads from, or writes to, a
// stream it shares with the session agent it becomes (contract §7 session
// agent): the host writes the challenge as a frame on the exec's stdin
// and the agent's frames follow it; the probe prints the baseline as a
// frame on its stdout and the agent's frames follow that. A frame is a
// 4-byte tag, a 4-byte big-endian length and that many bytes, so a reader
// takes exactly it (io.ReadFull, never a buffered read that would take
// the next owner's bytes) and knows a stream that is not what it expects
// at once.
const frameHeader = 8

// Frame tags.
const (
	TagSecret   = "SPsc" // the challenge, host -> probe
	TagSnapshot = "SPsn" // the baseline snapshot's JSON, probe -> host
)

// ErrFrame marks a frame that is malformed, cut short or too large.
var ErrFrame = errors.New("bad frame")

// WriteFrame writes data as one frame tagged tag (4 bytes).
func WriteFrame(w io.Writer, tag string, data []byte) error {
	if len(tag) != 4 {
		return fmt.Errorf("write frame: tag %q: want 4 bytes", tag)
	}
	if uint64(len(data)) > 1<<32-1 {
		return fmt.Errorf("write %s frame: %d bytes: too large", tag, len(data))
	}
	b := make([]byte, frameHeader, frameHeader+len(data))
	copy(b, tag)
	binary.BigEndian.PutUint32(b[4:], uint32(len(data)))
	if _, err := w.Write(append(b, data...)); err != nil {
		return fmt.Errorf("write %s frame: %w", tag, err)
	}
	return nil
}

// ReadFrame reads one frame tagged tag of at most max bytes from r and
// nothing past it. A stream that ends before the header is io.EOF (the
// writer sent nothing, as a probe that failed before printing); every
// other failure wraps ErrFrame and says what was found.
func ReadFrame(r io.Reader, tag string, max int) ([]byte, error) {
	var h [frameHeader]byte
	switch n, err := io.ReadFull(r, h[:]); {
	case err == io.EOF:
		return nil, io.EOF
	case err == io.ErrUnexpectedEOF:
		return nil, fmt.Errorf("read %s frame: %w: the stream ended after %d of the header's %d bytes (%q)", tag, ErrFrame, n, frameHeader, h[:n])
	case err != nil:
		return nil, fmt.Errorf("read %s frame: %w", tag, err)
	}
	if got := string(h[:4]); got != tag {
		return nil, fmt.Errorf("read %s frame: %w: tag %q, want %q", tag, ErrFrame, h[:4], tag)
	}
	size := binary.BigEndian.Uint32(h[4:])
	if uint64(size) > uint64(max) {
		return nil, fmt.Errorf("read %s frame: %w: %d bytes, over the cap of %d", tag, ErrFrame, size, max)
	}
	data := make([]byte, size)
	if n, err := io.ReadFull(r, data); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("read %s frame: %w: the stream ended after %d of %d bytes", tag, ErrFrame, n, size)
		}
		return nil, fmt.Errorf("read %s frame: %w", tag, err)
	}
	return data, nil
}
