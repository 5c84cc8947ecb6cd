package agent

import "github.com/sandproof/sandproof/runner/confine"

// What the package's external tests (package agent_test: they drive the
// in-sandbox end with the host's, runner/host/agenthost, which imports
// this package) reach inside for: the confinement's hooks (runner/confine's),
// and the frames and records a hostile peer writes by hand.
var (
	StepHook       = &confine.StepHook
	Openat2Missing = &confine.Openat2Missing
	ErrProtocol    = errProtocol
	NewConn        = newConn
	ReadRequest    = readRequest
	BeUint32       = beUint32
)

const (
	HeaderLen  = headerLen
	FrameHello = frameHello
	FrameData  = frameData
	FrameReset = frameReset
	RecOut     = recOut
	RecErr     = recErr
	RecResult  = recResult
)

// WriteFrame writes a raw frame on s's stream, credit or not: what a
// peer that breaks the rules sends.
func (s *Stream) WriteFrame(typ byte, payload []byte) error {
	return s.c.writeFrame(typ, s.id, payload)
}
