package main

import (
	"bytes"
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
)

// openPTY opens a pseudo-terminal pair whose terminal is cols wide.
func openPTY(t *testing.T, cols uint16) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		testenv.Missing(t, "pseudo-terminals (/dev/ptmx: "+err.Error()+")", "mount devpts (a container needs /dev/pts)")
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty slave: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := unix.IoctlSetWinsize(int(m.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: cols}); err != nil {
		t.Fatalf("set pty size: %v", err)
	}
	return m, s
}

// A terminal gets the live line, as wide as the terminal says; a pipe, a
// file or a buffer (CI) gets none, and with TERM=dumb neither does a
// terminal.
func TestLiveStatusOnlyOnATerminal(t *testing.T) {
	_, tty := openPTY(t, 57)
	t.Setenv("TERM", "xterm")
	if w, ok := terminalWidth(tty); !ok || w != 57 {
		t.Fatalf("pty: width %d, terminal %v; want 57, true", w, ok)
	}
	line, end := liveStatus(tty)
	if line == nil {
		t.Fatal("no live line on a terminal")
	}
	end()

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	file, err := os.CreateTemp(t.TempDir(), "progress")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for name, out := range map[string]any{"pipe": w, "file": file, "buffer": &bytes.Buffer{}} {
		if line, end := liveStatus(out.(interface{ Write([]byte) (int, error) })); line != nil {
			end()
			t.Errorf("%s: a live line where there is no terminal", name)
		}
	}
	t.Setenv("TERM", "dumb")
	if line, end := liveStatus(tty); line != nil {
		end()
		t.Error("TERM=dumb: a live line")
	}
}
