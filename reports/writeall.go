package reports

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// File names WriteAll uses inside a run directory.
const (
	EvidenceFile = "evidence.jsonl"
	HTMLFile     = "report.html"
	MarkdownFile = "report.md"
	JUnitFile    = "junit.xml"
)

// WriteAll reads DIR/evidence.jsonl and writes report.html, report.md and
// junit.xml beside it; certify calls it at the end of a run. Each file is
// written to a temporary name and renamed, so a reader (a CI upload step)
// never sees half a report. The returned Report lets the caller pick its
// exit status from Report.Status.
func WriteAll(dir string) (*Report, error) {
	rep, err := ReadFiles(filepath.Join(dir, EvidenceFile))
	if err != nil {
		return nil, err
	}
	for _, f := range Formats {
		if f.File == "" {
			continue
		}
		if err := WriteFileAtomic(filepath.Join(dir, f.File), func(w io.Writer) error { return f.Render(w, rep) }); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// Format is one way to render a report: the name `sandproof report
// --format` takes, the file WriteAll writes in a run dir ("" for none),
// and the renderer.
type Format struct {
	Name   string
	File   string
	Render func(io.Writer, *Report) error
}

// Formats is the one list of report formats: WriteAll and the CLI both read
// it, so a new format is added here once.
var Formats = []Format{
	{Name: "junit", File: JUnitFile, Render: WriteJUnit},
	{Name: "md", File: MarkdownFile, Render: WriteMarkdown},
	{Name: "html", File: HTMLFile, Render: WriteHTML},
	{Name: "json", Render: WriteJSON},
}

// LookupFormat returns the format named name.
func LookupFormat(name string) (Format, bool) {
	for _, f := range Formats {
		if f.Name == name {
			return f, true
		}
	}
	return Format{}, false
}

// WriteFileAtomic writes what render produces to path through a temporary
// file in the same directory and a rename; on error the temporary file is
// removed and path is left as it was.
func WriteFileAtomic(path string, render func(io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("create report: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 64<<10)
	if err := render(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write report %q: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("write report %q: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write report %q: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write report %q: %w", path, err)
	}
	return nil
}
