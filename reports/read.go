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

// MaxLineBytes bounds one evidence line a reader decodes. Writers keep a
// record within MaxRecordBytes, a sixteenth of it; a longer line (evidence
// written before the record budget, or a corrupt file) is read as an
// unreadable record (Unreadable), not decoded, so it cannot take memory
// nor the rest of the file with it.
const MaxLineBytes = 16 << 20

// unreadablePrefix is how much of an over-long line is kept to name its
// case: a record's identity fields come first in its JSON.
const unreadablePrefix = 64 << 10

// CheckRecordReadable is the check an unreadable record carries.
const CheckRecordReadable = "record.readable"

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
// A line longer than MaxLineBytes is not decoded: it yields the
// Unreadable record of its case, status unknown (its identity read from
// the line's start), and reading goes on. The first bad line ends the
// sequence with a *LineError; the line buffer is reused and never grows
// past MaxLineBytes, so memory does not grow with the size of the input.
func ReadEvidence(r io.Reader) iter.Seq2[*Evidence, error] {
	return func(yield func(*Evidence, error) bool) {
		br := bufio.NewReaderSize(r, 64<<10)
		var buf []byte
		for line := 1; ; line++ {
			var size int64
			var err error
			buf, size, err = readLine(br, buf[:0])
			if err != nil && !errors.Is(err, io.EOF) {
				yield(nil, &LineError{Line: line, Err: fmt.Errorf("read evidence: %w", err)})
				return
			}
			if b := bytes.TrimSpace(buf); size > MaxLineBytes {
				if !yield(Unreadable(b, size, line), nil) {
					return
				}
			} else if len(b) > 0 {
				e, verr := decodeRecord(b, line)
				if !yield(e, verr) || verr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
}

// readLine reads one line (without its newline) into buf, keeping at most
// MaxLineBytes of it, and returns the line's whole size; err is io.EOF
// at the end of the input.
func readLine(br *bufio.Reader, buf []byte) ([]byte, int64, error) {
	var size int64
	for {
		chunk, err := br.ReadSlice('\n')
		size += int64(len(chunk))
		chunk = bytes.TrimSuffix(chunk, []byte("\n"))
		if room := MaxLineBytes + 1 - len(buf); room > 0 {
			buf = append(buf, chunk[:min(len(chunk), room)]...)
		}
		switch {
		case err == nil:
			return buf, size - 1, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		}
		return buf, size, err
	}
}

func decodeRecord(b []byte, line int) (*Evidence, error) {
	e := new(Evidence)
	if err := json.Unmarshal(b, e); err != nil {
		return nil, &LineError{Line: line, Err: fmt.Errorf("decode record: %w", err)}
	}
	if err := e.Validate(); err != nil {
		return nil, &LineError{Line: line, Err: err}
	}
	e.Line = line
	return e, nil
}

// Unreadable is the record that stands for a line of size bytes too long
// to read (line is its 1-based number, start the line's first bytes): its
// case's identity as the line's start gives it (schema, run_id, case_id,
// attempt, harness, image, scenario, shard: a record's first fields), a
// placeholder for what the start does not give, status unknown, and one
// unknown check, record.readable, saying why. Its case is then neither
// passed nor lost: reports show it unknown, report diff counts it, and
// certify --resume runs it again.
func Unreadable(start []byte, size int64, line int) *Evidence {
	id := identityOf(start[:min(len(start), unreadablePrefix)])
	e := &Evidence{Schema: Schema, RunID: id.RunID, CaseID: id.CaseID, TaskID: id.TaskID, Attempt: max(0, id.Attempt),
		Shard: id.Shard, ShardRunID: id.ShardRunID, MatrixSHA256: id.MatrixSHA256, MatrixCases: id.MatrixCases,
		Harness: id.Harness, Image: id.Image, Scenario: id.Scenario, Status: StatusUnknown, Line: line}
	fill := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	fill(&e.RunID, "unreadable")
	fill(&e.CaseID, fmt.Sprintf("unreadable-line-%d", line))
	fill(&e.Harness, "unknown")
	fill(&e.Image, "unknown")
	t := "record_unreadable"
	e.ErrorType = &t
	e.Checks = []Check{{ID: CheckRecordReadable, Status: StatusUnknown, Clause: "§8 evidence",
		Detail: fmt.Sprintf("line %d is %d bytes, over the readers' limit of %d (a record written before the record budget of %d bytes); its checks were not read, so the case is unknown and --resume runs it again",
			line, size, MaxLineBytes, MaxRecordBytes)}}
	return e
}

// identityOf reads a record's leading top-level fields from the start of
// its line, as far as they are whole; the rest is not looked at.
func identityOf(start []byte) Evidence {
	var id Evidence
	d := json.NewDecoder(bytes.NewReader(start))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return id
	}
	want := map[string]any{"run_id": &id.RunID, "case_id": &id.CaseID, "task_id": &id.TaskID, "attempt": &id.Attempt,
		"shard": &id.Shard, "shard_run_id": &id.ShardRunID, "matrix_sha256": &id.MatrixSHA256, "matrix_cases": &id.MatrixCases,
		"harness": &id.Harness, "image": &id.Image, "scenario": &id.Scenario}
	for d.More() {
		t, err := d.Token()
		k, ok := t.(string)
		if err != nil || !ok {
			return id
		}
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return id
		}
		if p, ok := want[k]; ok {
			json.Unmarshal(v, p)
		}
	}
	return id
}
