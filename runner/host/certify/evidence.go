package certify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
// run id. A torn last line (a
// crash in the middle of a write) is cut off. Without resume, an existing
// non-empty file is refused.
func openEvidence(path string, resume bool) (map[string]lastAttempt, string, error) {
	done := map[string]lastAttempt{}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return done, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read evidence: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return done, "", nil
	}
	if !resume {
		return nil, "", fmt.Errorf("%s: %w", path, ErrOutExists)
	}
	good := bytes.LastIndexByte(data, '\n') + 1
	if good < len(data) {
		// The last write never finished: its case runs again.
		if err := os.Truncate(path, int64(good)); err != nil {
			return nil, "", fmt.Errorf("cut torn evidence line: %w", err)
		}
		data = data[:good]
	}
	runID := ""
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ev reports.Evidence
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, "", fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		if err := ev.Validate(); err != nil {
			return nil, "", fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		if runID != "" && ev.RunID != runID {
			return nil, "", fmt.Errorf("%s:%d: run %q after run %q: --resume finishes one run", path, i+1, ev.RunID, runID)
		}
		runID = ev.RunID
		if a := ev.AttemptNumber(); a > done[ev.CaseID].attempt {
			done[ev.CaseID] = lastAttempt{ev.Status, a}
		}
	}
	return done, runID, nil
}

func appendEvidence(path string) (*evidenceFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open evidence: %w", err)
	}
	return &evidenceFile{f: f}, nil
}

// Write validates ev and appends it as one line, then fsyncs. A record
// that holds the key is refused (nothing is written).
func (e *evidenceFile) Write(ev *reports.Evidence, key string) error {
	if err := ev.Validate(); err != nil {
		return fmt.Errorf("write evidence: %w", err)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("write evidence of %s: %w", ev.CaseID, err)
	}
	if key != "" && bytes.Contains(b, []byte(key)) {
		return fmt.Errorf("write evidence of %s: %w", ev.CaseID, ErrCanaryLeaked)
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
