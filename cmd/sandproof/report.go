package main

import (
	"bufio"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandproof/sandproof/reports"
)

func init() { addCommand(newReportCmd) }

// reportFormats maps --format values to renderers.
var reportFormats = map[string]func(io.Writer, *reports.Report) error{
	"md":    reports.WriteMarkdown,
	"html":  reports.WriteHTML,
	"junit": reports.WriteJUnit,
	"json":  reports.WriteJSON,
}

func reportFormatNames() string {
	names := make([]string, 0, len(reportFormats))
	for n := range reportFormats {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func newReportCmd(stdout, stderr io.Writer) *cobra.Command {
	var format, out string
	cmd := &cobra.Command{
		Use:   "report [--format md|html|junit|json] [--out FILE] EVIDENCE.jsonl [...]",
		Short: "Render evidence files as Markdown, HTML, JUnit XML or JSON",
		Long: `report reads one or more evidence.jsonl files (schema sandproof.evidence/v1)
and renders their result tree. A case with no checks, or a run with no cases,
is unknown; a failed check fails its case whatever the record says. Duplicate
cases and malformed records are rejected with their file and line (exit 1).
The exit status does not depend on the verdict; use "report diff" as a gate.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("report: give at least one EVIDENCE.jsonl")
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			render, ok := reportFormats[format]
			if !ok {
				return usagef("--format: bad value %q (want one of %s)", format, reportFormatNames())
			}
			rep, err := reports.ReadFiles(args...)
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
	cmd.AddCommand(newReportDiffCmd(stdout, stderr))
	return cmd
}

func newReportDiffCmd(stdout, _ io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "diff OLD.jsonl NEW.jsonl",
		Short: "Compare two evidence runs case by case; exit 1 on any regression",
		Long: `diff pairs the cases of two runs by image, harness and task id, and prints
the pass->fail and fail->pass lists with the checks that changed, and each
run's pass rate. It exits 1 when anything regressed (a case that passed and
no longer does, or a case of OLD missing from NEW), 0 otherwise.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef("report diff: want OLD.jsonl NEW.jsonl, got %d argument(s)", len(args))
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			old, err := reports.ReadFiles(args[0])
			if err != nil {
				return err
			}
			cur, err := reports.ReadFiles(args[1])
			if err != nil {
				return err
			}
			d, err := reports.Diff(old, cur)
			if err != nil {
				return err
			}
			if err := reports.WriteDiff(stdout, d); err != nil {
				return err
			}
			if d.Regressed() {
				return exitError{code: 1}
			}
			return nil
		},
	}
}
