// Package capture reads what a session downloaded at close: the events file
// `warden run` wrote (one wrapped JSON line per stdout line of the harness),
// SQLite databases copied with their -wal, -shm and -journal files, and the
// adapter's result rules (docs/adapters.md) applied to either, giving the
// evidence's response status, usage observations, output item types and
// observation gaps.
package capture

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	_ "modernc.org/sqlite" // pure Go: the host needs no libsqlite3

	"github.com/sandproof/sandproof/runner/host/hostfile"
)

// SQLiteSidecars are the files that belong to a database: rows written
// after the last checkpoint live in the -wal file.
var SQLiteSidecars = []string{"-wal", "-shm", "-journal"}

// ErrNoRecords means a source held nothing to read (a database copied
// without its -wal has no schema, for example).
var ErrNoRecords = errors.New("no records")

// Event reads are bounded: an events file is data from the sandbox and
// may be endless (a link to /dev/zero that some copy followed) or one line
// without a newline.
const (
	// MaxEventLine is the longest line passed on; a longer one is counted
	// in EventStats.Oversized and skipped without being held.
	MaxEventLine = 16 << 20
	// MaxEventsBytes is the most a read takes from an events file.
	MaxEventsBytes = 64 << 20
)

// ErrTooLarge means a capture held more than a read takes; what was read
// up to the cap was used.
var ErrTooLarge = hostfile.ErrTooLarge

// EventStats counts the lines of an events file.
type EventStats struct {
	Lines int // every line
	JSON  int // lines whose "event" is a JSON value
	Raw   int // "raw" or "raw_b64" lines
	// Truncated counts lines cut at the runner's cap.
	Truncated int
	// Oversized counts lines longer than the reader's cap, skipped.
	Oversized int
	// Bytes is what was read.
	Bytes int64
}

// ReadEvents calls fn with the `event` value of each line of the events
// file (as raw JSON); lines that were not JSON are counted, not passed.
// fn returning false stops the read. The file is opened without following
// a symlink and must be a regular file; the read is bounded
// (MaxEventLine, MaxEventsBytes).
func ReadEvents(path string, fn func(event string) bool) (EventStats, error) {
	var st EventStats
	f, err := hostfile.Open(path)
	if err != nil {
		return st, fmt.Errorf("read events: %w", err)
	}
	defer f.Close()
	return ScanEvents(f, fn)
}

// ScanEvents is ReadEvents over a reader, with the default caps.
func ScanEvents(r io.Reader, fn func(event string) bool) (EventStats, error) {
	return ScanEventsLimit(r, fn, MaxEventLine, MaxEventsBytes)
}

// ScanEventsLimit is ScanEvents with caps: lines longer than maxLine are
// skipped (held no further than maxLine), and past maxTotal bytes the read
// stops with an error wrapping ErrTooLarge.
func ScanEventsLimit(r io.Reader, fn func(event string) bool, maxLine int, maxTotal int64) (EventStats, error) {
	var st EventStats
	lr := &io.LimitedReader{R: r, N: maxTotal + 1}
	br := bufio.NewReaderSize(lr, 64<<10)
	var line []byte
	over := false
	for {
		part, err := br.ReadSlice('\n')
		st.Bytes += int64(len(part))
		if !over {
			if len(line)+len(part) > maxLine {
				over, line = true, line[:0]
			} else {
				line = append(line, part...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if st.Bytes > maxTotal {
			return st, fmt.Errorf("read events: more than %d bytes: %w", maxTotal, ErrTooLarge)
		}
		if len(line) > 0 || over {
			st.Lines++
			switch {
			case over:
				st.Oversized++
			default:
				if gjson.GetBytes(line, "truncated").Bool() {
					st.Truncated++
				}
				ev := gjson.GetBytes(line, "event")
				if ev.Exists() {
					st.JSON++
					if fn != nil && !fn(ev.Raw) {
						return st, nil
					}
				} else {
					st.Raw++
				}
			}
		}
		line, over = line[:0], false
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
	in, err := hostfile.Open(src)
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

// SQLite reads are bounded in time and rows.
const (
	DefaultSQLiteTimeout = 30 * time.Second
	DefaultSQLiteRows    = 100000
)

// ErrNotTable means the query names something that is not a table of the
// captured database (a view, which could run forever, or nothing at all).
var ErrNotTable = errors.New("not a table")

// SQLiteLimits bound one read; zero fields mean the defaults.
type SQLiteLimits struct {
	Timeout time.Duration
	Rows    int
}

// OpenSQLite opens a captured database read-only with trusted_schema off
// (no function the schema names runs with side effects), after checking
// the file and its sidecars are regular files (never a link). It never
// uses immutable=1, which would ignore the -wal file and with it every
// row written after the last checkpoint. The caller closes the handle.
func OpenSQLite(path string) (*sql.DB, error) {
	f, err := hostfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open captured database: %w", err)
	}
	f.Close()
	for _, suf := range SQLiteSidecars {
		if fi, err := os.Lstat(path + suf); err == nil && !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("open captured database: %q: %s: %w", path+suf, fi.Mode().Type(), hostfile.ErrNotRegular)
		}
	}
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?mode=ro&_pragma=busy_timeout(5000)&_pragma=trusted_schema(0)&_pragma=query_only(1)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open captured database %q: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// tableRef finds the names after FROM and JOIN in a manifest's query.
var tableRef = regexp.MustCompile("(?i)\\b(?:FROM|JOIN)\\s+((?:[A-Za-z_][A-Za-z0-9_]*|\"[^\"]+\"|`[^`]+`|\\[[^\\]]+\\])(?:\\s*\\.\\s*(?:[A-Za-z_][A-Za-z0-9_]*|\"[^\"]+\"|`[^`]+`|\\[[^\\]]+\\]))?)")

// queryWords are the identifiers of a query, bare or quoted.
var queryWords = regexp.MustCompile("[A-Za-z_][A-Za-z0-9_]*|\"[^\"]+\"|`[^`]+`|\\[[^\\]]+\\]")

// QueryTables returns the names the query reads FROM or JOINs, unquoted;
// a schema other than main is refused.
func QueryTables(query string) ([]string, error) {
	var out []string
	for _, m := range tableRef.FindAllStringSubmatch(query, -1) {
		parts := strings.Split(m[1], ".")
		for i := range parts {
			parts[i] = strings.Trim(strings.TrimSpace(parts[i]), "\"`[]")
		}
		name := parts[len(parts)-1]
		if len(parts) == 2 && !strings.EqualFold(parts[0], "main") {
			return nil, fmt.Errorf("query %q: schema %q: only main is read", query, parts[0])
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("query %q names no table", query)
	}
	return out, nil
}

// ReadSQLite is ReadSQLiteLimit with the default limits.
func ReadSQLite(path, query string, fn func(doc string) bool) (rows int, err error) {
	return ReadSQLiteLimit(context.Background(), path, query, SQLiteLimits{}, fn)
}

// ReadSQLiteLimit runs query on the captured database at path and calls
// fn with the first column of each row (a JSON document). Every name the
// query reads must be a table of the database (sqlite_schema type
// 'table'): a view or a missing name is refused before the query runs.
// The read runs under lim.Timeout (the engine is interrupted at the
// deadline) and stops with an error past lim.Rows rows. It closes the
// database before returning. A database with no schema (the main file
// copied without its -wal) is an error wrapping ErrNoRecords.
func ReadSQLiteLimit(ctx context.Context, path, query string, lim SQLiteLimits, fn func(doc string) bool) (rows int, err error) {
	if lim.Timeout <= 0 {
		lim.Timeout = DefaultSQLiteTimeout
	}
	if lim.Rows <= 0 {
		lim.Rows = DefaultSQLiteRows
	}
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	names, err := QueryTables(query)
	if err != nil {
		return 0, fmt.Errorf("read captured database %q: %w", path, err)
	}
	db, err := OpenSQLite(path)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close captured database %q: %w", path, cerr)
		}
		if ctx.Err() != nil && err != nil {
			err = fmt.Errorf("%w (time budget %s)", err, lim.Timeout)
		}
	}()
	if err := checkQueryTables(ctx, db, path, query, names); err != nil {
		return 0, err
	}
	return readRows(ctx, db, path, query, lim.Rows, fn)
}

// checkQueryTables refuses a query of db that reads anything but tables:
// every name in names (the query's FROM/JOIN tables) must be one, and no
// word of the query may name a view or a virtual table. A database
// without a schema has no records.
func checkQueryTables(ctx context.Context, db *sql.DB, path, query string, names []string) error {
	var tables int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&tables); err != nil {
		return fmt.Errorf("read captured database %q: %w", path, err)
	}
	if tables == 0 {
		return fmt.Errorf("read captured database %q: no schema (was it copied without its -wal?): %w", path, ErrNoRecords)
	}
	// Every name the query reads must be a table; and no word of the
	// query may name a view or a virtual table (a comma join, a
	// subquery: whatever the FROM/JOIN scan missed).
	kinds := map[string]string{}
	krs, err := db.QueryContext(ctx, "SELECT lower(name), CASE WHEN type = 'table' AND sql LIKE 'CREATE VIRTUAL%' THEN 'virtual table' ELSE type END FROM sqlite_schema WHERE type IN ('table','view')")
	if err != nil {
		return fmt.Errorf("read captured database %q: %w", path, err)
	}
	for krs.Next() {
		var n, k string
		if err := krs.Scan(&n, &k); err != nil {
			krs.Close()
			return fmt.Errorf("read captured database %q: %w", path, err)
		}
		kinds[n] = k
	}
	if err := krs.Close(); err != nil {
		return fmt.Errorf("read captured database %q: %w", path, err)
	}
	for _, w := range queryWords.FindAllString(query, -1) {
		w = strings.ToLower(strings.Trim(w, "\"`[]"))
		if k := kinds[w]; k != "" && k != "table" {
			return fmt.Errorf("read captured database %q: %q is a %s, refused: %w", path, w, k, ErrNotTable)
		}
	}
	for _, n := range names {
		switch k := kinds[strings.ToLower(n)]; k {
		case "table":
		case "":
			return fmt.Errorf("read captured database %q: %q: %w (no such table)", path, n, ErrNoRecords)
		default:
			return fmt.Errorf("read captured database %q: %q is a %s, refused: %w", path, n, k, ErrNotTable)
		}
	}
	return nil
}

// readRows runs query on db and calls fn with each row's first column,
// until fn returns false; more than maxRows rows is ErrTooLarge.
func readRows(ctx context.Context, db *sql.DB, path, query string, maxRows int, fn func(doc string) bool) (rows int, err error) {
	rs, err := db.QueryContext(ctx, query)
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
		if rows >= maxRows {
			return rows, fmt.Errorf("read rows of %q: more than %d rows: %w", path, maxRows, ErrTooLarge)
		}
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
