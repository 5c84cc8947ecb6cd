package reports

import (
	"io"
	"path/filepath"

	"github.com/sandproof/sandproof/runner/warden/atomicfile"
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

// WriteFileAtomic writes what render produces to path (mode 0644) through
// a temporary file in the same directory, an fsync, a rename and an fsync
// of the directory; on error the temporary file is removed and path is
// left as it was.
func WriteFileAtomic(path string, render func(io.Writer) error) error {
	return atomicfile.WriteFunc(path, 0o644, render)
}
