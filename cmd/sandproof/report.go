package main

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandproof/sandproof/reports"
)

func init() { addCommand(newReportCmd) }

// reportFormatNames lists --format's values (reports.Formats), sorted.
func reportFormatNames() string {
	names := make([]string, 0, len(reports.Formats))
	for _, f := range reports.Formats {
		names = append(names, f.Name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func newReportCmd(stdout, stderr io.Writer) *cobra.Command {
	var format, out string
	cmd := &cobra.Command{
		Use:   "report [--format md|html|junit|json] [--out FILE] EVIDENCE.jsonl|RUN_DIR [...]",
		Short: "Render evidence files as Markdown, HTML, JUnit XML or JSON",
		Long: `report reads one or more evidence.jsonl files (schema sandproof.evidence/v1)
and renders their result tree. A case with no checks, or a run with no cases,
is unknown; a failed check fails its case whatever the record says. Duplicate
cases and malformed records are rejected with their file and line (exit 2).
A line over 16 MiB (a record written before the 1 MiB record budget) is read
as its case's unknown record, check record.readable, and reading goes on.
A run directory stands for its evidence.jsonl. The exit status does not
depend on the verdict; use "report diff" as a gate.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("report: give at least one EVIDENCE.jsonl")
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			f, ok := reports.LookupFormat(format)
			render := f.Render
			if !ok {
				return usagef("--format: bad value %q (want one of %s)", format, reportFormatNames())
			}
			paths := make([]string, len(args))
			for i, a := range args {
				p, err := evidencePath(a)
				if err != nil {
					return err
				}
				paths[i] = p
			}
			rep, err := reports.ReadFiles(paths...)
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				bw := bufio.NewWriter(stdout)
				if err := render(bw, rep); err != nil {
					return err
				}
				return bw.Flush()
			}
			return reports.WriteFileAtomic(out, func(w io.Writer) error { return render(w, rep) })
		},
	}
	cmd.Flags().StringVar(&format, "format", "md", "output format: "+reportFormatNames())
	cmd.Flags().StringVarP(&out, "out", "o", "", "write to FILE (atomically) instead of stdout")
	cmd.AddCommand(newReportDiffCmd(stdout, stderr), newReportMergeCmd(stdout, stderr))
	return cmd
}

// evidencePath resolves an argument naming an evidence file or a run
// directory (which holds evidence.jsonl). A path that names nothing is a
// usage error; one that cannot be read is left to the reader (exit 3).
func evidencePath(arg string) (string, error) {
	fi, err := os.Stat(arg)
	if errors.Is(err, os.ErrNotExist) {
		return "", usagef("%q: no such evidence file or run directory", arg)
	}
	if err != nil || !fi.IsDir() {
		return arg, nil
	}
	p := filepath.Join(arg, reports.EvidenceFile)
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return "", usagef("%q: a directory without %s (not a run directory)", arg, reports.EvidenceFile)
	}
	return p, nil
}

// diffFormats maps report diff's --format values to writers.
var diffFormats = map[string]func(io.Writer, *reports.DiffResult) error{
	"text": reports.WriteDiff,
	"md":   reports.WriteDiffMarkdown,
	"json": reports.WriteDiffJSON,
}

func newReportDiffCmd(stdout, _ io.Writer) *cobra.Command {
	var format string
	var allowMissing bool
	cmd := &cobra.Command{
		Use:   "diff [--format text|md|json] [--allow-missing] OLD NEW",
		Short: "Compare two runs case by case; exit 1 on any regression",
		Long: `diff pairs the cases of two runs by image, harness and task id. OLD and NEW
are evidence.jsonl files or run directories (certify --out). It lists, each
on its own: regressions (passed in OLD; failed, unknown or skipped in NEW, or
missing from NEW unless --allow-missing), fixes (not passed in OLD, passed in
NEW), new cases (NEW only) and missing cases (OLD only), with the checks that
changed and each run's pass rate. The lists are symmetric: swapping OLD and
NEW swaps fixes with regressions and new with missing. --format md renders
GitHub tables for a pull request or a step summary.

` + exitCodeHelp,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef("report diff: want OLD NEW (evidence files or run directories), got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			write, ok := diffFormats[format]
			if !ok {
				return usagef("--format: bad value %q (want text, md or json)", format)
			}
			var sides [2]*reports.Report
			for i, a := range args {
				p, err := evidencePath(a)
				if err != nil {
					return err
				}
				if sides[i], err = reports.ReadFiles(p); err != nil {
					return err
				}
			}
			d, err := reports.Diff(sides[0], sides[1], reports.DiffOptions{AllowMissing: allowMissing})
			if err != nil {
				return usageError{err}
			}
			bw := bufio.NewWriter(stdout)
			if err := write(bw, d); err != nil {
				return err
			}
			if err := bw.Flush(); err != nil {
				return err
			}
			if d.Regressed() {
				return exitError{code: exitFailed}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text, md or json")
	cmd.Flags().BoolVar(&allowMissing, "allow-missing", false, "a passing case missing from NEW is listed as missing, not as a regression")
	return cmd
}
