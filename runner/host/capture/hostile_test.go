package capture_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/host/capture"
	"github.com/sandproof/sandproof/runner/host/hostfile"
)

// makeDB writes a real SQLite database with the statements.
func makeDB(t *testing.T, stmts ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hostile.db")
	db, err := sql.Open("sqlite", p)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return p
}

// endlessView is a recursive CTE view that never ends, named like the
// table the OpenCode-like manifest reads.
const endlessView = `CREATE VIEW part AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n) SELECT '{"type":"x"}' AS data, i AS time_created FROM n`

// A captured database whose "table" is an endless view is refused before
// the query runs: a failed read with the reason, in bounded time.
func TestSQLiteEndlessViewRefused(t *testing.T) {
	db := makeDB(t, endlessView)
	// Positive control: the view really never ends; read plainly under a
	// short deadline, the engine is still running at the deadline (and
	// the interrupt on cancel works: the call comes back).
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	var n int
	err = raw.QueryRowContext(ctx, "SELECT count(*) FROM part").Scan(&n)
	cancel()
	raw.Close()
	if err == nil {
		t.Fatalf("positive control: the view ended (%d rows)", n)
	}
	start := time.Now()
	rows, err := capture.ReadSQLite(db, ocResult.Query, func(string) bool { return true })
	took := time.Since(start)
	if !errors.Is(err, capture.ErrNotTable) || rows != 0 || !strings.Contains(err.Error(), `"part" is a view`) {
		t.Fatalf("read = %d, %v; want refused as a view", rows, err)
	}
	if took > 5*time.Second {
		t.Errorf("refusal took %s", took)
	}
	// A view reached by a comma join (missed by the FROM/JOIN scan) too.
	db2 := makeDB(t, "CREATE TABLE t(data TEXT)", "INSERT INTO t VALUES ('{}')", endlessView)
	if _, err := capture.ReadSQLite(db2, "SELECT t.data FROM t, part", func(string) bool { return true }); !errors.Is(err, capture.ErrNotTable) {
		t.Errorf("comma-joined view: %v, want refused", err)
	}
}

// The time budget interrupts a read that runs too long (a slow query on
// real tables), and the row cap stops a read with too many rows.
func TestSQLiteTimeAndRowBudget(t *testing.T) {
	stmts := []string{"CREATE TABLE t(data TEXT)", "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 2000) INSERT INTO t SELECT '{}' FROM n"}
	db := makeDB(t, stmts...)
	start := time.Now()
	_, err := capture.ReadSQLiteLimit(context.Background(), db, "SELECT count(*) FROM t a, t b, t c", capture.SQLiteLimits{Timeout: 500 * time.Millisecond}, func(string) bool { return true })
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "time budget") {
		t.Fatalf("8e9-row join under 500ms: %v, want the time budget", err)
	}
	if took > 5*time.Second {
		t.Errorf("interrupt took %s", took)
	}
	n, err := capture.ReadSQLiteLimit(context.Background(), db, "SELECT data FROM t", capture.SQLiteLimits{Rows: 100}, func(string) bool { return true })
	if !errors.Is(err, capture.ErrTooLarge) || n != 100 {
		t.Errorf("row cap 100 on 2000 rows: %d, %v", n, err)
	}
	// Positive control: within the cap the same read is whole.
	if n, err := capture.ReadSQLite(db, "SELECT data FROM t", func(string) bool { return true }); err != nil || n != 2000 {
		t.Errorf("uncapped read: %d, %v", n, err)
	}
}

// trusted_schema is off on every captured database the reader opens.
func TestSQLiteTrustedSchemaOff(t *testing.T) {
	path := makeDB(t, "CREATE TABLE t(x)")
	// Positive control: the engine's default is on.
	plain, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var def int
	if err := plain.QueryRow("PRAGMA trusted_schema").Scan(&def); err != nil || def != 1 {
		t.Fatalf("positive control: default trusted_schema = %d, %v; want 1", def, err)
	}
	plain.Close()
	db, err := capture.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var on int
	if err := db.QueryRow("PRAGMA trusted_schema").Scan(&on); err != nil || on != 0 {
		t.Fatalf("trusted_schema = %d, %v; want 0", on, err)
	}
}

// A captured database (or its -wal) that is a symlink on the host is not
// opened, so a link to a host database is never read.
func TestSQLiteLinkRefused(t *testing.T) {
	real := makeDB(t, "CREATE TABLE part(data TEXT, time_created INT)", `INSERT INTO part VALUES ('{"type":"host"}', 1)`)
	dir := t.TempDir()
	link := filepath.Join(dir, "opencode.db")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	// Positive control: following the link reads the host's row.
	if n, err := capture.ReadSQLite(real, ocResult.Query, func(string) bool { return true }); err != nil || n != 1 {
		t.Fatalf("positive control: %d, %v", n, err)
	}
	if _, err := capture.ReadSQLite(link, ocResult.Query, func(string) bool { return true }); !errors.Is(err, hostfile.ErrNotRegular) {
		t.Errorf("linked database: %v, want ErrNotRegular", err)
	}
	copyTo := filepath.Join(dir, "copy.db")
	data, _ := os.ReadFile(real)
	os.WriteFile(copyTo, data, 0o600)
	os.Symlink("/dev/zero", copyTo+"-wal")
	if _, err := capture.ReadSQLite(copyTo, ocResult.Query, func(string) bool { return true }); !errors.Is(err, hostfile.ErrNotRegular) {
		t.Errorf("-wal linked to /dev/zero: %v, want ErrNotRegular", err)
	}
}

// zeros is /dev/zero without a file: an endless line.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// The events reader is bounded: an endless line (a link to /dev/zero a
// copy followed) stops at the total cap with ErrTooLarge and the heap
// stays near the line cap; a link is never opened.
func TestEventsBounded(t *testing.T) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	st, err := capture.ScanEventsLimit(zeros{}, func(string) bool { return true }, 1<<20, 32<<20)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, capture.ErrTooLarge) || st.Bytes <= 32<<20 {
		t.Fatalf("endless line: %+v, %v; want stopped past 32 MiB with ErrTooLarge", st, err)
	}
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 8<<20 {
		t.Errorf("heap grew %d bytes reading an endless line (line cap 1 MiB)", grew)
	}
	t.Logf("endless line: stopped after %d bytes in %s, heap in use %d -> %d", st.Bytes, took, before.HeapInuse, after.HeapInuse)

	// An oversized line is skipped; the lines around it are read.
	in := `{"event":{"a":1}}` + "\n" + `{"event":"` + strings.Repeat("x", 3000) + `"}` + "\n" + `{"event":{"b":2}}` + "\n"
	var got []string
	st, err = capture.ScanEventsLimit(strings.NewReader(in), func(e string) bool { got = append(got, e); return true }, 1024, 1<<20)
	if err != nil || st.Lines != 3 || st.Oversized != 1 || len(got) != 2 || got[1] != `{"b":2}` {
		t.Errorf("oversized line: %+v %v %q", st, err, got)
	}

	// ReadEvents never opens a link (here to /dev/zero).
	dir := t.TempDir()
	link := filepath.Join(dir, "events.jsonl")
	os.Symlink("/dev/zero", link)
	if f, err := os.Open(link); err != nil {
		t.Fatalf("positive control: %v", err)
	} else {
		b := make([]byte, 4)
		io.ReadFull(f, b)
		f.Close()
	}
	start = time.Now()
	if _, err := capture.ReadEvents(link, nil); !errors.Is(err, hostfile.ErrNotRegular) {
		t.Errorf("events linked to /dev/zero: %v, want ErrNotRegular", err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("refusing a link took %s", time.Since(start))
	}
}
