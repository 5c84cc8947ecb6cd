package receipt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandproof/sandproof/runner/warden/stop"
)

func TestWriteOnceAndAtomically(t *testing.T) {
	dir := t.TempDir()
	if err := Reserve(dir); err != nil {
		t.Fatal(err)
	}
	r := New("l1", "test")
	r.Cause = CauseExited
	r.ReturnCode = Int(0)
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, r); !errors.Is(err, ErrExists) {
		t.Fatalf("second write: %v, want ErrExists", err)
	}
	got, _, err := Read(dir)
	if err != nil || got.LaunchID != "l1" || got.ReturnCode == nil || *got.ReturnCode != 0 {
		t.Fatalf("read back %+v, %v", got, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("dir holds %d entries, want only receipt.json (no temp, no reserve)", len(entries))
	}
}

// When no new file can be created (a full disk), the receipt goes into the
// space reserved at claim time.
func TestWriteFallsBackToReservedSpace(t *testing.T) {
	dir := t.TempDir()
	if err := Reserve(dir); err != nil {
		t.Fatal(err)
	}
	// Block the temp file the way ENOSPC would: its name is taken by a dir.
	if err := os.Mkdir(filepath.Join(dir, fmt.Sprintf(".receipt.%d.tmp", os.Getpid())), 0o700); err != nil {
		t.Fatal(err)
	}
	r := New("l2", "test")
	r.Cause = CauseDeadline
	for i := 0; i < 20000; i++ { // far more than fits in the reserve
		r.Reached = append(r.Reached, stop.Member{PID: i + 2, StartTime: 1, Comm: "sleep", Why: "orphan"})
	}
	if err := Write(dir, r); err != nil {
		t.Fatal(err)
	}
	got, data, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Truncated || len(got.Reached) == 0 || len(data) > ReserveSize || got.Cause != CauseDeadline {
		t.Fatalf("truncated=%v reached=%d size=%d cause=%q", got.Truncated, len(got.Reached), len(data), got.Cause)
	}
}

func TestParseAcceptsUnknownFieldsAndChecksSchema(t *testing.T) {
	if _, err := Parse([]byte(`{"schema":"warden.receipt/v1","future":1,"cause":"exited","return_code":null}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse([]byte(`{"schema":"other"}`)); err == nil {
		t.Fatal("wrong schema accepted")
	}
}
