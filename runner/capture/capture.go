// Package capture reads what a session downloaded at close: the events file
// `warden run` wrote (one wrapped JSON line per stdout line of the harness),
// SQLite databases copied with their -wal, -shm and -journal files, and the
// adapter's result rules (docs/adapters.md) applied to either, giving the
// evidence's response status, usage observations, output item types and
// observation gaps.
package capture

import (
	"bufio"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"

	"github.com/tidwall/gjson"
	_ "modernc.org/sqlite" // pure Go: the host needs no libsqlite3
)

// SQLiteSidecars are the files that belong to a database: rows written
// after the last checkpoint live in the -wal file.
var SQLiteSidecars = []string{"-wal", "-shm", "-journal"}

// ErrNoRecords means a source held nothing to read (a database copied
// without its -wal has no schema, for example).
var ErrNoRecords = errors.New("no records")

// EventStats counts the lines of an events file.
type EventStats struct {
	Lines int // every line
	JSON  int // lines whose "event" is a JSON value
	Raw   int // "raw" or "raw_b64" lines
	// Truncated counts lines cut at the runner's cap.
	Truncated int
}

// ReadEvents calls fn with the `event` value of each line of the events
// file (as raw JSON); lines that were not JSON are counted, not passed.
// fn returning false stops the read.
func ReadEvents(path string, fn func(event string) bool) (EventStats, error) {
	var st EventStats
	f, err := os.Open(path)
	if err != nil {
		return st, fmt.Errorf("read events: %w", err)
	}
	defer f.Close()
	return ScanEvents(f, fn)
}

// ScanEvents is ReadEvents over a reader.
func ScanEvents(r io.Reader, fn func(event string) bool) (EventStats, error) {
	var st EventStats
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadString('\n')
		if len(line) > 0 {
			st.Lines++
			if gjson.Get(line, "truncated").Bool() {
				st.Truncated++
			}
			ev := gjson.Get(line, "event")
			switch {
			case ev.Exists():
				st.JSON++
				if fn != nil && !fn(ev.Raw) {
					return st, nil
				}
			default:
				st.Raw++
			}
		}
		if err == io.EOF {
			return st, nil
		}
		if err != nil {
			return st, fmt.Errorf("read events: %w", err)
		}
	}
}

// CopySQLite copies the database at src and whichever of its sidecar files
// exist to dst (and dst-wal, ...). A database is only whole with them.
func CopySQLite(src, dst string) error {
	if err := copyFile(src, dst); err != nil {
		return err
	}
	for _, suf := range SQLiteSidecars {
		err := copyFile(src+suf, dst+suf)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy %q: %w", src, err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("copy %q: %w", src, err)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("copy %q: %w", src, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %q: %w", src, err)
	}
	return out.Close()
}

// OpenSQLite opens a captured database read-only. It never uses
// immutable=1, which would ignore the -wal file and with it every row
// written after the last checkpoint. The caller closes the handle.
func OpenSQLite(path string) (*sql.DB, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open captured database: %w", err)
	}
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=ro&_pragma=busy_timeout(5000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open captured database %q: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// ReadSQLite runs query on the captured database at path and calls fn with
// the first column of each row (a JSON document). It closes the database
// before returning. A database with no such table (the main file copied
// without its -wal) is an error wrapping ErrNoRecords.
func ReadSQLite(path, query string, fn func(doc string) bool) (rows int, err error) {
	db, err := OpenSQLite(path)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close captured database %q: %w", path, cerr)
		}
	}()
	var tables int
	if err := db.QueryRow("SELECT count(*) FROM sqlite_schema").Scan(&tables); err != nil {
		return 0, fmt.Errorf("read captured database %q: %w", path, err)
	}
	if tables == 0 {
		return 0, fmt.Errorf("read captured database %q: no schema (was it copied without its -wal?): %w", path, ErrNoRecords)
	}
	rs, err := db.Query(query)
	if err != nil {
		return 0, fmt.Errorf("query captured database %q: %w", path, err)
	}
	defer rs.Close()
	cols, err := rs.Columns()
	if err != nil || len(cols) == 0 {
		return 0, fmt.Errorf("query captured database %q: no columns: %v", path, err)
	}
	var doc sql.RawBytes
	dest := make([]any, len(cols))
	dest[0] = &doc
	for i := 1; i < len(cols); i++ {
		dest[i] = new(sql.RawBytes)
	}
	for rs.Next() {
		if err := rs.Scan(dest...); err != nil {
			return rows, fmt.Errorf("read row of %q: %w", path, err)
		}
		rows++
		if !fn(string(doc)) {
			break
		}
	}
	if err := rs.Err(); err != nil {
		return rows, fmt.Errorf("read rows of %q: %w", path, err)
	}
	return rows, nil
}
