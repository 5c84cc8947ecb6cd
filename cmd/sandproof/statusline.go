package main

import (
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/runner/host/statusline"
)

// liveStatus returns certify's live status line on w when w is a terminal
// (and TERM is not "dumb"), with a func that stops its clock and ends the
// line; nil when w is no terminal (CI, a pipe, a file): certify then
// prints its plain progress lines, as before.
func liveStatus(w io.Writer) (*statusline.Line, func()) {
	width, ok := terminalWidth(w)
	if !ok || os.Getenv("TERM") == "dumb" {
		return nil, func() {}
	}
	line := statusline.New(w, time.Now, width)
	done := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				line.Tick()
			}
		}
	}()
	return line, func() {
		close(done)
		<-ticked
		line.Close()
	}
}

// terminalWidth is w's width in columns when w is a terminal (0 when the
// terminal does not say); false when it is not one.
func terminalWidth(w io.Writer) (int, bool) {
	f, ok := w.(*os.File)
	if !ok {
		return 0, false
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0, false
	}
	return int(ws.Col), true
}
