package harness

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sandproof/sandproof/runner/warden/mutant"
)

// DefaultLineCap is the longest line kept whole in events mode (64 MiB).
const DefaultLineCap = 64 << 20

const (
	// smallGrowMax is where the line buffer stops doubling and jumps straight
	// to the cap. Doubling all the way would hold the old half and the new
	// buffer at once (1.5 x cap); jumping from 1 MiB holds at most cap + 1 MiB.
	smallGrowMax = 1 << 20
	// writeBuf is the events writer's buffer; big lines stream through it.
	writeBuf = 64 << 10
)

// Recorder turns the byte stream a CLI writes to stdout into event lines
// (contract §5), one JSON object per input line:
//
//	{"ts":"2026-11-29T10:00:00.123456789Z","seq":1,"event":{"type":"text"}}
//	{"ts":"...","seq":2,"raw":"not json"}
//	{"ts":"...","seq":3,"raw_b64":"//4=","truncated":true,"bytes":104857600}
//
// It is an io.Writer, so input may arrive in chunks of any size. Each byte is
// looked at a bounded number of times, whatever the line length (the bash
// runner it replaces stripped CR in time quadratic in the line), and it never
// holds more than one line buffer of at most the cap: a longer line is counted
// but not stored, and the encoding of a big line streams straight into the
// buffered writer. Errors writing the events are sticky: Write keeps
// accepting input (so the CLI is never blocked) and reports the first error.
type Recorder struct {
	w   *bufio.Writer
	cap int
	// Now stamps each line when it ends; nil means time.Now.
	Now func() time.Time

	line   []byte // the stored part of the current line, at most cap bytes
	total  int64  // the current line's full length so far
	lastCR bool   // the current line's last byte was a CR
	seq    int64
	err    error

	scratch []byte // reused for the prefix of each event line
	b64     *base64Encoder
}

// NewRecorder writes event lines to w, keeping at most lineCap bytes of each
// line (lineCap <= 0 means DefaultLineCap).
func NewRecorder(w io.Writer, lineCap int) *Recorder {
	if lineCap <= 0 {
		lineCap = DefaultLineCap
	}
	bw := bufio.NewWriterSize(w, writeBuf)
	return &Recorder{w: bw, cap: lineCap, b64: newBase64Encoder(bw)}
}

// Seq returns the number of lines recorded so far.
func (r *Recorder) Seq() int64 { return r.seq }

// Write records every line p completes and keeps the rest for the next call.
func (r *Recorder) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			r.add(p)
			break
		}
		if len(r.line) == 0 && r.total == 0 {
			// The whole line is in p: record it without copying.
			r.emitWhole(p[:i])
		} else {
			r.add(p[:i])
			r.endLine()
		}
		p = p[i+1:]
	}
	return n, r.err
}

// Flush writes buffered event lines to the underlying writer.
func (r *Recorder) Flush() error {
	if r.err == nil {
		r.err = r.w.Flush()
	}
	return r.err
}

// Close records a final line that had no LF, then flushes. It does not close
// the underlying writer.
func (r *Recorder) Close() error {
	if r.total > 0 {
		// A CR at the very end without an LF is content, not a line end.
		r.lastCR = false
		r.endLine()
	}
	return r.Flush()
}

// add appends part of a line, storing only what fits under the cap.
func (r *Recorder) add(p []byte) {
	if len(p) == 0 {
		return
	}
	r.total += int64(len(p))
	r.lastCR = p[len(p)-1] == '\r'
	room := r.cap - len(r.line)
	if room <= 0 {
		return
	}
	if len(p) > room {
		p = p[:room]
	}
	if need := len(r.line) + len(p); need > cap(r.line) {
		r.grow(need)
	}
	r.line = append(r.line, p...)
	if mutant.Is(mutant.QuadraticCR) {
		// The field's bug: every CR rewrites the whole line so far.
		for _, c := range p {
			if c == '\r' {
				r.line = append(make([]byte, 0, cap(r.line)), r.line...)
			}
		}
	}
}

func (r *Recorder) grow(need int) {
	n := 2 * cap(r.line)
	if n < 64<<10 {
		n = 64 << 10
	}
	if n > smallGrowMax {
		n = r.cap
	}
	n = min(max(n, need), r.cap)
	// The buffer is kept for later lines, never freed: a freed 64 MiB buffer
	// and a fresh one could both be resident before the GC runs.
	nl := make([]byte, len(r.line), n)
	copy(nl, r.line)
	r.line = nl
}

// endLine records the buffered line (its LF already consumed).
func (r *Recorder) endLine() {
	total := r.total
	if r.lastCR {
		total--
	}
	content := r.line
	if int64(len(content)) > total {
		content = content[:total] // the dropped CR was stored
	}
	r.emit(content, total)
	r.line = r.line[:0]
	r.total = 0
	r.lastCR = false
}

// emitWhole records a line that arrived whole in one Write.
func (r *Recorder) emitWhole(l []byte) {
	total := int64(len(l))
	if total > 0 && l[total-1] == '\r' {
		total--
	}
	content := l[:total]
	if total > int64(r.cap) {
		content = l[:r.cap]
	}
	r.emit(content, total)
}

// emit writes one event line for content, the first bytes of a line of total
// bytes (the line was cut when total is longer than content).
func (r *Recorder) emit(content []byte, total int64) {
	r.seq++
	if r.err != nil {
		return
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	s := append(r.scratch[:0], `{"ts":"`...)
	s = now().UTC().AppendFormat(s, time.RFC3339Nano)
	s = append(s, `","seq":`...)
	s = strconv.AppendInt(s, r.seq, 10)
	truncated := total > int64(len(content))
	valid := utf8.Valid(content)
	switch {
	case !truncated && valid && (json.Valid(content) || mutant.Is(mutant.JSONBraces) && len(content) > 1 && content[0] == '{' && content[len(content)-1] == '}'):
		s = append(s, `,"event":`...)
		r.w.Write(s)
		writeEventValue(r.w, content)
	case mutant.Is(mutant.NonJSONStop):
		r.err = fmt.Errorf("line %d is not JSON", r.seq) // the mutant stops here
		return
	case valid:
		s = append(s, `,"raw":"`...)
		r.w.Write(s)
		writeJSONString(r.w, content)
		r.w.WriteByte('"')
	default:
		s = append(s, `,"raw_b64":"`...)
		r.w.Write(s)
		r.b64.encode(content)
		r.w.WriteByte('"')
	}
	s = s[:0]
	if truncated {
		s = append(s, `,"truncated":true,"bytes":`...)
		s = strconv.AppendInt(s, total, 10)
	}
	s = append(s, "}\n"...)
	_, err := r.w.Write(s)
	r.scratch = s
	if err != nil {
		r.err = err
	}
}

// writeEventValue embeds a JSON line as is, except for CR bytes: in valid JSON
// a CR can only be insignificant whitespace (inside a string it must be
// escaped), and a bare CR splits the events line for readers that honour
// old-Mac line ends (Python's universal newlines).
func writeEventValue(w *bufio.Writer, v []byte) {
	for {
		i := bytes.IndexByte(v, '\r')
		if i < 0 {
			w.Write(v)
			return
		}
		w.Write(v[:i])
		v = v[i+1:]
	}
}

// safe[b] reports whether ASCII byte b goes into a JSON string unescaped.
var safe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// writeJSONString writes valid UTF-8 s as the inside of a JSON string, in
// runs, without building an escaped copy. U+2028 and U+2029 are escaped as
// encoding/json does, so the line is also valid JavaScript.
func writeJSONString(w *bufio.Writer, s []byte) {
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if safe[b] {
				i++
				continue
			}
			w.Write(s[start:i])
			switch b {
			case '"', '\\':
				w.WriteByte('\\')
				w.WriteByte(b)
			case '\n':
				w.WriteString(`\n`)
			case '\r':
				w.WriteString(`\r`)
			case '\t':
				w.WriteString(`\t`)
			default:
				w.WriteString(`\u00`)
				w.WriteByte(hexDigits[b>>4])
				w.WriteByte(hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		if b == 0xE2 && i+2 < len(s) && s[i+1] == 0x80 && s[i+2]&^1 == 0xA8 {
			w.Write(s[start:i])
			w.WriteString(`\u202`)
			w.WriteByte(hexDigits[s[i+2]&0xf])
			i += 3
			start = i
			continue
		}
		i++
	}
	w.Write(s[start:])
}

// base64Encoder streams standard base64 into w through a small fixed
// buffer; base64.NewEncoder would allocate per line.
type base64Encoder struct {
	w   *bufio.Writer
	buf [3 * 1024 * 4 / 3]byte
}

func newBase64Encoder(w *bufio.Writer) *base64Encoder { return &base64Encoder{w: w} }

func (e *base64Encoder) encode(p []byte) {
	const chunk = 3 * 1024 // a multiple of 3, so chunks join without padding
	for len(p) > 0 {
		n := min(len(p), chunk)
		m := base64.StdEncoding.EncodedLen(n)
		base64.StdEncoding.Encode(e.buf[:m], p[:n])
		e.w.Write(e.buf[:m])
		p = p[n:]
	}
}
