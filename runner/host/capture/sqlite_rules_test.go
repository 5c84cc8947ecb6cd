package capture_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/capture"
	"github.com/sandproof/sandproof/runner/host/hostfile"
)

// The captured databases' read rules that no other test reached (the
// host-path mutants, docs/mutation.md): only tables of the main schema
// are read, and no link is followed, to a device or to a host file.

func all(string) bool { return true }

// A query that names a virtual table anywhere (after FROM, or in a comma
// join the FROM/JOIN scan does not see), or a table of another schema, is
// refused before it runs. The positive control: the table itself, and by
// main's name, is read.
func TestSQLiteOnlyMainTables(t *testing.T) {
	db := makeDB(t, "CREATE TABLE t(data TEXT)", `INSERT INTO t VALUES ('{}')`,
		"CREATE VIRTUAL TABLE vt USING fts5(data)", `INSERT INTO vt VALUES ('{}')`)
	for _, q := range []string{"SELECT data FROM t", "SELECT data FROM main.t", `SELECT data FROM "t"`} {
		if n, err := capture.ReadSQLite(db, q, all); err != nil || n != 1 {
			t.Fatalf("positive control: %s: %d, %v", q, n, err)
		}
	}
	for _, tc := range []struct{ query, want string }{
		{"SELECT data FROM vt", `"vt" is a virtual table`},
		{"SELECT t.data FROM t, vt", `"vt" is a virtual table`},
		{"SELECT data FROM temp.t", `schema "temp": only main is read`},
		{"SELECT data FROM other.t", `schema "other": only main is read`},
	} {
		n, err := capture.ReadSQLite(db, tc.query, all)
		if err == nil || !strings.Contains(err.Error(), tc.want) || n != 0 {
			t.Errorf("%s: %d, %v; want refused: %s", tc.query, n, err, tc.want)
		}
	}
}

// A database whose -wal is a link to a regular host file is refused, not
// only one linked to a device. And a copy never follows a link, the
// database's or a sidecar's. The positive controls: the same files,
// regular, are read and copied.
func TestSQLiteLinksToHostFilesRefused(t *testing.T) {
	real := makeDB(t, "CREATE TABLE part(data TEXT, time_created INT)", `INSERT INTO part VALUES ('{"type":"x"}', 1)`)
	data, err := os.ReadFile(real)
	if err != nil {
		t.Fatal(err)
	}
	hostFile := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(hostFile, []byte("not a wal"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "opencode.db")
	if err := os.WriteFile(db, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := capture.ReadSQLite(db, ocResult.Query, all); err != nil || n != 1 {
		t.Fatalf("positive control: %d, %v", n, err)
	}
	if err := capture.CopySQLite(db, filepath.Join(t.TempDir(), "copy.db")); err != nil {
		t.Fatalf("positive control: copy: %v", err)
	}
	if err := os.Symlink(hostFile, db+"-wal"); err != nil {
		t.Fatal(err)
	}
	if _, err := capture.ReadSQLite(db, ocResult.Query, all); !errors.Is(err, hostfile.ErrNotRegular) {
		t.Errorf("-wal linked to a host file: %v, want ErrNotRegular", err)
	}
	if err := capture.CopySQLite(db, filepath.Join(t.TempDir(), "copy.db")); !errors.Is(err, hostfile.ErrNotRegular) {
		t.Errorf("copy with a -wal linked to a host file: %v, want ErrNotRegular", err)
	}
	link := filepath.Join(dir, "linked.db")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy.db")
	if err := capture.CopySQLite(link, dst); !errors.Is(err, hostfile.ErrNotRegular) {
		t.Errorf("copy of a linked database: %v, want ErrNotRegular", err)
	}
	if _, err := os.Stat(dst); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link's target was copied: %v", err)
	}
}
