package reports

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
)

// MaxLineBytes bounds one evidence line. A record is a few kilobytes; the
// bound only keeps a corrupt file (a missing newline, a binary blob) from
// taking all memory.
const MaxLineBytes = 16 << 20

// LineError locates a rejected record: the file (empty when unknown), the
// 1-based line and why.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// ReadEvidence yields the records of an evidence.jsonl stream one line at a
// time, each decoded and validated, with Line set. Blank lines are skipped.
// The first bad line ends the sequence with a *LineError; the line buffer is
// reused, so memory does not grow with the size of the input.
func ReadEvidence(r io.Reader) iter.Seq2[*Evidence, error] {
	return func(yield func(*Evidence, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
		line := 0
		for sc.Scan() {
			line++
			b := bytes.TrimSpace(sc.Bytes())
			if len(b) == 0 {
				continue
			}
			e := new(Evidence)
			if err := json.Unmarshal(b, e); err != nil {
				yield(nil, &LineError{Line: line, Err: fmt.Errorf("decode record: %w", err)})
				return
			}
			if err := e.Validate(); err != nil {
				yield(nil, &LineError{Line: line, Err: err})
				return
			}
			e.Line = line
			if !yield(e, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				err = fmt.Errorf("record longer than %d bytes: %w", MaxLineBytes, err)
			} else {
				err = fmt.Errorf("read evidence: %w", err)
			}
			yield(nil, &LineError{Line: line + 1, Err: err})
		}
	}
}
