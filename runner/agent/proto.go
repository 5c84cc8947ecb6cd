package agent

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Operations a stream's open request names.
const (
	OpExec   = "exec"   // host opens: run argv; stdin up, records down
	OpPut    = "put"    // host opens: a tar of entries up, a result down
	OpGet    = "get"    // host opens: nothing up, a tar of a path down
	OpRemove = "remove" // host opens: remove as root, confined (Argv: rmtree's arguments); removed paths down
	OpTunnel = "tunnel" // agent opens: raw bytes of one accepted connection
)

// maxRequest caps a request (its JSON, which leads the stream of an
// operation the host opens, after its u32 length).
const maxRequest = 4 << 20

// Request is an operation's request (JSON). A tunnel stream's open
// payload is one too, naming nothing but the op.
type Request struct {
	Op      string   `json:"op"`
	Argv    []string `json:"argv,omitempty"`
	User    string   `json:"user,omitempty"`
	Env     []string `json:"env,omitempty"`
	Workdir string   `json:"workdir,omitempty"`
	Stdin   bool     `json:"stdin,omitempty"`
	Path    string   `json:"path,omitempty"`
}

// Result is an operation's last record.
type Result struct {
	Code     int    `json:"code"`
	Error    string `json:"error,omitempty"`
	NotFound bool   `json:"notfound,omitempty"`
}

// Record kinds on the agent-to-host direction of exec, put, get and remove: a
// 5-byte header (kind, u32 length) and the bytes. The last record is
// always recResult.
const (
	recOut    byte = 'o' // stdout, or the tar of a get
	recErr    byte = 'e' // stderr
	recResult byte = 'r' // result (JSON)
)

// maxRecord caps a record the host accepts: the agent writes at most
// MaxPayload at a time, and a result is small.
const maxRecord = MaxPayload

// recordWriter writes records on a stream; several writers (stdout and
// stderr) share one.
type recordWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (rw *recordWriter) write(kind byte, p []byte) error {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	for first := true; first || len(p) > 0; first = false {
		n := min(len(p), maxRecord)
		var h [5]byte
		h[0] = kind
		binary.BigEndian.PutUint32(h[1:], uint32(n))
		if _, err := rw.w.Write(h[:]); err != nil {
			return err
		}
		if _, err := rw.w.Write(p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

func (rw *recordWriter) Result(r Result) error {
	b, _ := json.Marshal(r)
	return rw.write(recResult, b)
}

// kindWriter is an io.Writer of one record kind.
type kindWriter struct {
	rw   *recordWriter
	kind byte
}

func (k kindWriter) Write(p []byte) (int, error) {
	if err := k.rw.write(k.kind, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// readRecord reads one record into buf (of maxRecord bytes). The records
// come from the sandbox: a length past the cap breaks the exchange.
func readRecord(r io.Reader, buf []byte) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // the result record never came
		}
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > maxRecord || (h[0] != recOut && h[0] != recErr && h[0] != recResult) {
		return 0, nil, fmt.Errorf("%w: record kind %q of %d bytes", errProtocol, h[0], n)
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		return 0, nil, err
	}
	return h[0], buf[:n], nil
}

// readRequest reads the request that leads a stream the host opened.
func readRequest(r io.Reader) (Request, error) {
	var req Request
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return req, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > maxRequest {
		return req, fmt.Errorf("%w: request of %d bytes", errProtocol, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return req, err
	}
	if err := json.Unmarshal(b, &req); err != nil {
		return req, errors.Join(errProtocol, err)
	}
	return req, nil
}
