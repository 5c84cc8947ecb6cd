package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// Call opens a stream for req, the request leading its data, and resets
// the stream when ctx ends; done (call it when the operation is over)
// closes it. This is the opening half of every operation the host runs
// (exec, put, get, remove); ReadResults is the other.
func (c *Conn) Call(ctx context.Context, req Request) (s *Stream, done func(), err error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, nil, err
	}
	if len(b) > maxRequest {
		return nil, nil, fmt.Errorf("%s request of %d bytes (argv and env): at most %d", req.Op, len(b), maxRequest)
	}
	// The request leads the stream's data (an open frame would cap it
	// at MaxPayload; a harness's env can be larger).
	s, err = c.Open(nil)
	if err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, s.Reset)
	if _, err := s.Write(binary.BigEndian.AppendUint32(nil, uint32(len(b)))); err == nil {
		_, err = s.Write(b)
	}
	if err != nil {
		stop()
		s.Reset()
		return nil, nil, err
	}
	return s, func() { stop(); s.Close() }, nil
}

// ReadResults reads the records of an operation's stream: stdout (or a
// get's tar) to out, stderr to errw, up to its Result. Each record is
// capped before it is read: a hostile agent cannot make the host
// allocate more.
func ReadResults(s *Stream, out, errw io.Writer) (Result, error) {
	buf := make([]byte, maxRecord)
	for {
		kind, p, err := readRecord(s, buf)
		if err != nil {
			return Result{}, err
		}
		switch kind {
		case recOut:
			if _, err := out.Write(p); err != nil {
				return Result{}, err
			}
		case recErr:
			if _, err := errw.Write(p); err != nil {
				return Result{}, err
			}
		case recResult:
			var r Result
			if err := json.Unmarshal(p, &r); err != nil {
				return r, fmt.Errorf("%w: result %q: %v", errProtocol, p, err)
			}
			return r, nil
		}
	}
}
