package certify

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/sandproof/sandproof/reports"
)

// evidenceFile appends one validated record per line, fsyncing each, so a
// case already written survives a crash of the host process.
type evidenceFile struct {
	mu     sync.Mutex
	f      *os.File
	closed bool
}

// lastAttempt is a case's last attempt in the evidence file.
type lastAttempt struct {
	status  reports.Status
	attempt int
}

// openEvidence reads an existing evidence file for --resume: each case's
// last attempt (the highest; a record without one is attempt 1) and the
// run id. It reads as every report does (reports.ReadEvidence): a line
// over the readers' limit is its case's unknown record, so --resume runs
// that case again rather than trust a record no report can read. A torn
// last line (a crash in the middle of a write) is cut off. Without
// resume, an existing non-empty file is refused.
func openEvidence(path string, resume bool) (map[string]lastAttempt, string, error) {
	done := map[string]lastAttempt{}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return done, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read evidence: %w", err)
	}
	defer f.Close()
	empty, err := cutTornLine(f, resume)
	if err != nil || empty {
		return done, "", err
	}
	if !resume {
		return nil, "", fmt.Errorf("%s: %w", path, ErrOutExists)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, "", fmt.Errorf("read evidence: %w", err)
	}
	runID := ""
	for ev, err := range reports.ReadEvidence(f) {
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", path, err)
		}
		if runID != "" && ev.RunID != runID {
			return nil, "", fmt.Errorf("%s:%d: run %q after run %q: --resume finishes one run", path, ev.Line, ev.RunID, runID)
		}
		runID = ev.RunID
		if a := ev.AttemptNumber(); a > done[ev.CaseID].attempt {
			done[ev.CaseID] = lastAttempt{ev.Status, a}
		}
	}
	return done, runID, nil
}

// cutTornLine reports whether the file holds nothing but white space
// and, when it does not and cut is set, cuts a last line that has no
// newline (its write never finished: its case runs again). It reads the
// file from its end, a block at a time.
func cutTornLine(f *os.File, cut bool) (empty bool, err error) {
	st, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("read evidence: %w", err)
	}
	buf := make([]byte, 64<<10)
	end, lastNL, content := st.Size(), int64(-1), false
	for off := end; off > 0 && (lastNL < 0 || !content); {
		n := min(off, int64(len(buf)))
		off -= n
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			return false, fmt.Errorf("read evidence: %w", err)
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 && lastNL < 0 {
			lastNL = off + int64(i)
		}
		content = content || len(bytes.TrimSpace(buf[:n])) > 0
	}
	if !content {
		return true, nil
	}
	if cut && lastNL+1 < end {
		if err := f.Truncate(lastNL + 1); err != nil {
			return false, fmt.Errorf("cut torn evidence line: %w", err)
		}
	}
	return false, nil
}

func appendEvidence(path string) (*evidenceFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open evidence: %w", err)
	}
	return &evidenceFile{f: f}, nil
}

// Write seals ev (sealRecord: the keys redacted, the record bounded and
// within its budget, the case failed on the check that says why) and
// appends it as one line, then fsyncs. It refuses only a record that is
// not valid or whose own identity holds a key; what the harness put in a
// record never keeps it out of the file.
func (e *evidenceFile) Write(ev *reports.Evidence, keys ...string) error {
	b, err := sealRecord(ev, keys)
	if err != nil {
		return err
	}
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("write evidence: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write evidence: %w", err)
	}
	if err := e.f.Sync(); err != nil {
		return fmt.Errorf("sync evidence: %w", err)
	}
	return nil
}

func (e *evidenceFile) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	return e.f.Close()
}
