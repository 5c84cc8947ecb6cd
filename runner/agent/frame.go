package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frame types. Every frame is a 9-byte header (type, stream id, payload
// length; big-endian) and at most MaxPayload bytes of payload.
const (
	frameHello  byte = 1 // payload: helloMagic, version (u16), window (u32); stream 0
	frameOpen   byte = 2 // payload: the request (JSON); opens the stream
	frameData   byte = 3 // payload: bytes, within the receiver's window
	frameWindow byte = 4 // payload: u32 credit granted to the sender
	frameClose  byte = 5 // no payload: the sender will send no more data
	frameReset  byte = 6 // payload: a reason (text); the stream is over
)

const (
	headerLen = 9
	// MaxPayload caps one frame's payload: a frame is the unit a slow
	// stream can hold back the channel by, so it stays small.
	MaxPayload = 32 << 10
	// Version is the protocol version both ends send in their hello;
	// ends of different versions refuse each other.
	Version = 1
	// maxReason caps a reset's reason and maxOpen an open's request.
	maxReason = 1 << 10
)

var helloMagic = []byte("sandagnt")

// errProtocol is a frame the decoder or the mux refuses: the channel is
// not trusted any further.
var errProtocol = errors.New("agent channel: protocol error")

type frame struct {
	typ     byte
	id      uint32
	payload []byte
}

// readFrame reads one frame into buf (which must hold MaxPayload bytes)
// and checks its shape; payload aliases buf.
func readFrame(r io.Reader, buf []byte) (frame, error) {
	var h [headerLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return frame{}, err
	}
	f := frame{typ: h[0], id: binary.BigEndian.Uint32(h[1:5])}
	n := binary.BigEndian.Uint32(h[5:9])
	if err := checkHeader(f.typ, f.id, n); err != nil {
		return frame{}, err
	}
	f.payload = buf[:n]
	if _, err := io.ReadFull(r, f.payload); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return frame{}, err
	}
	if f.typ == frameHello && !validHello(f.payload) {
		return frame{}, fmt.Errorf("%w: hello payload %q", errProtocol, f.payload)
	}
	return f, nil
}

// checkHeader refuses a header whose length cannot be right for its type,
// before the payload is read.
func checkHeader(typ byte, id, n uint32) error {
	var max uint32
	switch typ {
	case frameHello:
		if id != 0 {
			return fmt.Errorf("%w: hello on stream %d", errProtocol, id)
		}
		max = uint32(helloLen)
	case frameOpen, frameData:
		max = MaxPayload
	case frameWindow:
		if n != 4 {
			return fmt.Errorf("%w: window frame of %d bytes", errProtocol, n)
		}
		max = 4
	case frameClose:
		max = 0
	case frameReset:
		max = maxReason
	default:
		return fmt.Errorf("%w: frame type %d", errProtocol, typ)
	}
	if n > max {
		return fmt.Errorf("%w: frame type %d of %d bytes (at most %d)", errProtocol, typ, n, max)
	}
	if typ != frameHello && id == 0 {
		return fmt.Errorf("%w: frame type %d on stream 0", errProtocol, typ)
	}
	return nil
}

// helloLen is a hello's payload: the magic, the version and the window
// the sender grants each stream (its peer's initial credit).
var helloLen = len(helloMagic) + 2 + 4

func validHello(p []byte) bool {
	return len(p) == helloLen && string(p[:len(helloMagic)]) == string(helloMagic)
}

func helloVersion(p []byte) uint16 { return binary.BigEndian.Uint16(p[len(helloMagic):]) }

func helloWindow(p []byte) uint32 { return binary.BigEndian.Uint32(p[len(helloMagic)+2:]) }

// appendFrame encodes one frame.
func appendFrame(b []byte, typ byte, id uint32, payload []byte) []byte {
	b = append(b, typ)
	b = binary.BigEndian.AppendUint32(b, id)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

func helloPayload(window uint32) []byte {
	b := binary.BigEndian.AppendUint16(append([]byte(nil), helloMagic...), Version)
	return binary.BigEndian.AppendUint32(b, window)
}
