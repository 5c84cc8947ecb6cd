package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/reports"
)

// shardDirs splits the smoke evidence into two shards' run directories
// (alternate records), each case with a file under its case dir.
func shardDirs(t *testing.T) (a, b string, cases int) {
	t.Helper()
	f, err := os.Open(reportTestdata + "smoke.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, b = t.TempDir(), t.TempDir()
	files := map[string]*os.File{}
	for _, d := range []string{a, b} {
		w, err := os.Create(filepath.Join(d, reports.EvidenceFile))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		files[d] = w
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		dir, shard := a, "1/2"
		if cases%2 == 1 {
			dir, shard = b, "2/2"
		}
		caseDir := "cases/" + strings.ReplaceAll(rec["case_id"].(string), "/", "__")
		rec["shard"], rec["matrix_sha256"], rec["case_dir"] = shard, "m0", caseDir
		if err := os.MkdirAll(filepath.Join(dir, caseDir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, caseDir, "events.jsonl"), []byte(rec["case_id"].(string)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cases++
		line, _ := json.Marshal(rec)
		files[dir].Write(append(line, '\n'))
	}
	// Every record knows the matrix's size.
	for _, d := range []string{a, b} {
		files[d].Close()
		data, _ := os.ReadFile(filepath.Join(d, reports.EvidenceFile))
		fixed := strings.ReplaceAll(string(data), `"matrix_sha256":"m0"`, `"matrix_sha256":"m0","matrix_cases":`+itoa(cases))
		if err := os.WriteFile(filepath.Join(d, reports.EvidenceFile), []byte(fixed), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return a, b, cases
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestReportMergeJoinsShards(t *testing.T) {
	a, b, cases := shardDirs(t)
	out := filepath.Join(t.TempDir(), "merged")
	code, stdout, stderr := runReport(t, "report", "merge", "--out", out, b, a)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	rep, err := reports.ReadFiles(filepath.Join(out, reports.EvidenceFile))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Counts.Cases != cases || len(rep.Runs) != 1 {
		t.Fatalf("merged report has %d cases in %d runs, want %d in one", rep.Counts.Cases, len(rep.Runs), cases)
	}
	for _, f := range []string{reports.HTMLFile, reports.MarkdownFile, reports.JUnitFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("no %s: %v", f, err)
		}
	}
	// The cases' files came along (both shards').
	matches, _ := filepath.Glob(filepath.Join(out, "cases", "*", "events.jsonl"))
	if len(matches) != cases {
		t.Errorf("%d case files copied, want %d", len(matches), cases)
	}
	// A second merge into the same directory is refused.
	if code, _, stderr := runReport(t, "report", "merge", "--out", out, a, b); code != 2 || !strings.Contains(stderr, "already holds") {
		t.Errorf("merge into a used dir: exit %d, %q", code, stderr)
	}
}

func TestReportMergeMissingShardIsAnError(t *testing.T) {
	a, _, _ := shardDirs(t)
	out := filepath.Join(t.TempDir(), "merged")
	code, _, stderr := runReport(t, "report", "merge", "--out", out, a)
	if code != 2 || !strings.Contains(stderr, "shard 2/2 missing") {
		t.Fatalf("exit %d, stderr %q; want 2 naming the missing shard", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, reports.EvidenceFile)); err == nil {
		t.Error("a refused merge wrote evidence")
	}
}
