package certify

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/canary"
	"github.com/sandproof/sandproof/runner/host/session"
)

// tailRead is how much of the end of an output file is read for its tail:
// more than reports.TailBytes, so the last lines survive a cut line.
const tailRead = 4 * reports.TailBytes

// withheldTail replaces a tail that holds the run's key.
var withheldTail = []string{"[withheld: these lines hold the run's API key canary; see the check secrets.canary]"}

// causes puts the decisive lines of a case that did not pass into its
// evidence (contract §9 reports): warden's runner's own line and the last
// lines of the harness's stderr and stdout, from the activation's captured
// run dir (the install's when the case never got to the activation).
func (cr *caseRun) causes() {
	ev := cr.ev
	if ev.Status == reports.StatusPassed || ev.Status == reports.StatusSkipped {
		return
	}
	capDir := filepath.Join(cr.dir, "capture")
	launch := activation
	if _, err := os.Lstat(filepath.Join(capDir, "run", activation)); err != nil {
		launch = "install"
	}
	if b, err := tailOf(filepath.Join(capDir, "state", launch, "stderr")); err == nil {
		ev.RunnerSaid = reports.Printable(redact(session.RunnerSaid(b), cr.r.key), false)
	}
	run := filepath.Join(capDir, "run", launch)
	ev.HarnessStderrTail = cr.tail(filepath.Join(run, "stderr.log"))
	ev.HarnessStdoutTail = cr.tail(filepath.Join(run, "stdout.log"))
	if ev.HarnessStdoutTail == nil {
		// events mode: stdout is the events file.
		ev.HarnessStdoutTail = cr.tail(filepath.Join(run, "events.jsonl"))
	}
}

// tail is the last lines of a captured file, withheld whole when any
// encoding of the key is in them.
func (cr *caseRun) tail(p string) []string {
	b, err := tailOf(p)
	if err != nil || len(b) == 0 {
		return nil
	}
	for _, k := range []string{cr.r.key, cr.r.opts.APIKey} {
		if k == "" {
			continue
		}
		if _, found := canary.New(k).Find(b); found {
			return withheldTail
		}
	}
	return reports.Tail(b)
}

// tailOf reads the last tailRead bytes of a regular file, without
// following a link (captured files are data, contract §8).
func tailOf(p string) ([]byte, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	off := max(0, fi.Size()-tailRead)
	b := make([]byte, fi.Size()-off)
	n, err := f.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	b = b[:n]
	if off > 0 {
		// The first line is cut: drop it.
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return b, nil
}
