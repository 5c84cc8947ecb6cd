package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandproof/sandproof/reports"
)

// mergeOptions are `sandproof report merge`'s flags and arguments.
type mergeOptions struct {
	out, runID string
	runs       []string // the shards' run directories (or evidence files)
}

// newReportMergeCmd binds merge's flags; runMerge does the work.
func newReportMergeCmd(stdout, _ io.Writer) *cobra.Command {
	var o mergeOptions
	cmd := &cobra.Command{
		Use:   "merge --out DIR RUN_DIR...",
		Short: "Join the runs of certify --shard i/N into one run",
		Long: `merge joins the run directories of the shards of one matrix (certify
--shard 1/N ... N/N, on one machine or many) into one run directory: its
evidence.jsonl (each case's last attempt, once; run_id set to the merged run,
the shard's own in shard_run_id), the cases' files, and report.html,
report.md and junit.xml.

It refuses, exit 2, naming the runs: records not written by a sharded
certify; shards of different matrices (other --adapter or --image flags,
another adapter or image digest); a shard given twice or missing; a case in
two runs; fewer cases than the matrix holds (finish a shard with certify
--resume); and provenance that must agree but does not: the suite version,
warden's digest and each adapter's digest (the host and times may differ).
DIR must not hold an evidence.jsonl already.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("report merge: give the shards' run directories")
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			o.runs = args
			return runMerge(stdout, o)
		},
	}
	cmd.Flags().StringVar(&o.out, "out", "", "the merged run directory (required)")
	cmd.Flags().StringVar(&o.runID, "run-id", "", "the merged run's id (default: merged-<the first shard's run id>)")
	return cmd
}

// runMerge reads the shards, merges their records (reports.Merge refuses
// what does not join, exit 2), copies the cases' files and writes the
// merged run's evidence and reports.
func runMerge(stdout io.Writer, o mergeOptions) error {
	if o.out == "" {
		return usagef("--out: required")
	}
	if _, err := os.Stat(filepath.Join(o.out, reports.EvidenceFile)); err == nil {
		return usagef("--out: %q already holds %s", o.out, reports.EvidenceFile)
	}
	var inputs []reports.MergeInput
	for _, a := range o.runs {
		p, err := evidencePath(a)
		if err != nil {
			return err
		}
		recs, err := readRecords(p)
		if err != nil {
			return err
		}
		inputs = append(inputs, reports.MergeInput{Name: a, Records: recs})
	}
	runID := o.runID
	if runID == "" {
		runID = "merged-" + firstRunID(inputs)
	}
	merged, err := reports.Merge(inputs, runID)
	if err != nil {
		return usageError{err}
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if err := copyCaseDirs(inputs, o.out); err != nil {
		return err
	}
	err = reports.WriteFileAtomic(filepath.Join(o.out, reports.EvidenceFile), func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, e := range merged {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if _, err := reports.WriteAll(o.out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "merged %d run(s), %d case(s) into %s (run %s)\n", len(inputs), len(merged), o.out, runID)
	return nil
}

// copyCaseDirs brings the cases' files along into out, so the reports'
// links work.
func copyCaseDirs(inputs []reports.MergeInput, out string) error {
	for _, in := range inputs {
		dir := in.Name
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			dir = filepath.Dir(dir)
		}
		for _, e := range in.Records {
			if e.CaseDir == "" || !filepath.IsLocal(e.CaseDir) {
				continue
			}
			if err := copyTree(filepath.Join(dir, e.CaseDir), filepath.Join(out, e.CaseDir)); err != nil {
				return err
			}
		}
	}
	return nil
}

func readRecords(path string) ([]*reports.Evidence, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var recs []*reports.Evidence
	for e, err := range reports.ReadEvidence(f) {
		if err != nil {
			var le *reports.LineError
			if errors.As(err, &le) {
				le.File = path
			}
			return nil, usageError{err}
		}
		recs = append(recs, e)
	}
	return recs, nil
}

func firstRunID(inputs []reports.MergeInput) string {
	for _, in := range inputs {
		for _, e := range in.Records {
			return strings.TrimPrefix(e.RunID, "merged-")
		}
	}
	return "run"
}

// copyTree copies the regular files and directories below src to dst;
// anything else (a link a capture recorded, say) is left out, as captured
// files are data and never links to follow.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == src {
			return filepath.SkipDir
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			outf, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			if _, err := io.Copy(outf, in); err != nil {
				outf.Close()
				return err
			}
			return outf.Close()
		}
		return nil
	})
}
