package capture_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/sandproof/sandproof/fixtures/agent"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/capture"
	"github.com/sandproof/sandproof/runner/model"
)

// transcript runs the mini-agent's OpenCode-like transcript against the
// scripted model and leaves it open, un-checkpointed: its rows are in -wal.
func transcript(t *testing.T) string {
	t.Helper()
	srv, err := model.Start(model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := t.TempDir()
	db := filepath.Join(dir, "opencode.db")
	tr, err := agent.OpenTranscript(db)
	if err != nil {
		t.Fatal(err)
	}
	_, err = agent.Run(context.Background(), agent.Config{ModelURL: srv.URL(), Model: "fake-model", Shell: "/bin/sh", Dir: dir,
		Prompt: model.CertPrompt(filepath.Join(dir, "deliverable.txt"), "tok123456"), Transcript: tr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return db
}

var ocResult = func() adapter.Result {
	m, err := adapter.Load("../../../fixtures/adapters/miniagent-opencode.yaml")
	if err != nil {
		panic(err)
	}
	return m.Result
}()

// TestSQLiteNeedsItsWAL proves the capture reads rows written after the
// last checkpoint: copied with its -wal the transcript is complete; the
// main file alone (the bug the capture exists to avoid) has no rows, and
// the reader says so instead of reporting an empty success.
func TestSQLiteNeedsItsWAL(t *testing.T) {
	src := transcript(t)
	if fi, err := os.Stat(src + "-wal"); err != nil || fi.Size() == 0 {
		t.Fatalf("positive control: the transcript has no -wal to lose: %v", err)
	}
	whole := filepath.Join(t.TempDir(), "copy.db")
	if err := capture.CopySQLite(src, whole); err != nil {
		t.Fatal(err)
	}
	j := capture.NewJudge(ocResult)
	n, err := capture.ReadSQLite(whole, ocResult.Query, j.Add)
	if err != nil {
		t.Fatal(err)
	}
	out := j.Outcome()
	if n < 4 || !out.Success || out.ItemTypes["function_call"] != 1 || len(out.Observations) != 2 {
		t.Fatalf("with -wal: %d rows, outcome %+v", n, out)
	}
	// The copy is still whole after reading: read-only never checkpoints
	// or deletes the -wal.
	if _, err := os.Stat(whole + "-wal"); err != nil {
		t.Fatalf("reading removed the copy's -wal: %v", err)
	}

	mainOnly := filepath.Join(t.TempDir(), "main.db")
	data, _ := os.ReadFile(src)
	os.WriteFile(mainOnly, data, 0o600)
	_, err = capture.ReadSQLite(mainOnly, ocResult.Query, capture.NewJudge(ocResult).Add)
	if !errors.Is(err, capture.ErrNoRecords) {
		t.Fatalf("main file alone: %v, want ErrNoRecords (rows are only in the -wal)", err)
	}
}

func TestEventsAndPiFailure(t *testing.T) {
	m, err := adapter.Load("../../../fixtures/adapters/miniagent-pi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{
		`{"ts":"t","seq":1,"event":{"type":"agent_start"}}`,
		`{"ts":"t","seq":2,"raw":"not json"}`,
		`{"ts":"t","seq":3,"event":{"type":"message_end","message":{"role":"assistant","stopReason":"error","errorMessage":"400 context_length_exceeded","usage":{"input":3,"output":0}}}}`,
		`{"ts":"t","seq":4,"event":{"type":"agent_end"}}`,
	}
	j := capture.NewJudge(m.Result)
	st, err := capture.ScanEvents(strings.NewReader(strings.Join(lines, "\n")+"\n"), j.Add)
	if err != nil || st.Lines != 4 || st.JSON != 3 || st.Raw != 1 {
		t.Fatalf("stats %+v, %v", st, err)
	}
	out := j.Outcome()
	zero := 0
	if got := capture.ResponseStatus(m.Result, out, &zero); got != capture.ResponseFailed {
		t.Fatalf("exit 0 with stopReason error: %s, want failed (Pi exits 0 on a model error)", got)
	}
	if !strings.Contains(out.FailureMessage, "context_length_exceeded") {
		t.Errorf("failure message %q", out.FailureMessage)
	}
	if !strings.Contains(strings.Join(out.Gaps, ","), capture.GapCachedTokens) {
		t.Errorf("gaps %v: cacheRead was absent", out.Gaps)
	}
}

// BenchmarkReadOpenCodeLike reads an OpenCode-like transcript of 100,000
// parts (in WAL, as captured) through the result rules.
// BenchmarkReadOpenCodeLike reads an OpenCode-like transcript of 100,000
// parts, all of them in the un-checkpointed WAL, through the result rules;
// the scan-only run beside it reads the same rows with nothing judged (the
// floor set by modernc.org/sqlite), so the ratio is what the rules cost.
func BenchmarkReadOpenCodeLike(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "opencode.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT, time_created INTEGER, time_updated INTEGER, data TEXT)`); err != nil {
		b.Fatal(err)
	}
	tx, _ := db.Begin()
	st, _ := tx.Prepare("INSERT INTO part VALUES (?, ?, 's', ?, ?, ?)")
	kinds := []string{`{"type":"text","text":"hello world"}`, `{"type":"tool","tool":"bash","state":{"status":"completed","output":"ok"}}`,
		`{"type":"step-finish","reason":"tool-calls","tokens":{"input":1200,"output":80,"cache":{"read":0}}}`}
	for i := 0; i < 100000; i++ {
		if _, err := st.Exec(fmt.Sprintf("prt_%07d", i), fmt.Sprintf("msg_%d", i/3), i, i, kinds[i%3]); err != nil {
			b.Fatal(err)
		}
	}
	tx.Commit()
	b.Run("rules", func(b *testing.B) {
		for b.Loop() {
			j := capture.NewJudge(ocResult)
			n, err := capture.ReadSQLite(path, ocResult.Query, j.Add)
			if err != nil || n != 100000 {
				b.Fatal(n, err)
			}
			if j.Outcome().ItemTypes["function_call"] != 33333 {
				b.Fatal(j.Outcome().ItemTypes)
			}
		}
	})
	b.Run("scan-only", func(b *testing.B) {
		for b.Loop() {
			n, err := capture.ReadSQLite(path, ocResult.Query, func(string) bool { return true })
			if err != nil || n != 100000 {
				b.Fatal(n, err)
			}
		}
	})
}
