// Package harness is warden's harness runner (`warden run`, contract
// §5): it starts a coding-agent CLI as a JSON params file describes, with an
// environment, descriptors and working directory it decides alone, forwards
// TERM, INT and HUP to it (the CLI runs in a process group of its own, so a
// signal to the runner's group reaches it once, through the runner), and in
// events mode records every line the CLI prints as one timestamped JSON line.
//
// Exit statuses: the CLI's own; 128+N when signal N ended it; 125 when the
// runner itself failed (bad params, bad cwd, an output it cannot open, an
// events file it could not write); 126 when the CLI exists but cannot be
// executed; 127 when it is not found. On 125, 126 and 127 before the start,
// nothing was run.
package harness

import (
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/sandproof/sandproof/runner/warden/fds"

	"github.com/sandproof/sandproof/runner/warden/mutant"
)

// Exit statuses of the runner's own failures.
const (
	ExitRunnerFailed = 125
	ExitCannotExec   = 126
	ExitNotFound     = 127
)

const (
	// drainIdle and drainMax bound how long the events reader goes on after
	// the CLI exited: a process the CLI left behind may hold the stdout pipe
	// open forever, and the runner must still return (the supervisor then
	// stops the leftover). What the CLI itself wrote is already in the pipe
	// buffer and is read at once.
	drainIdle = 500 * time.Millisecond
	drainMax  = 5 * time.Second
	readBuf   = 256 << 10
	// memSlack is the memory the runner may use beyond the line cap; the
	// runtime's soft limit is set to the cap plus this, so garbage never
	// piles up next to a full line buffer.
	memSlack = 8 << 20
)

// statusError is a failure with the exit status it maps to.
type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

func fail(status int, format string, args ...any) error {
	if mutant.Is(mutant.ExitCodes) && (status == ExitCannotExec || status == ExitNotFound) {
		status = ExitCannotExec + ExitNotFound - status // 126 and 127 confused
	}
	return &statusError{status, fmt.Errorf(format, args...)}
}

// Main runs `warden run` with args (after "run") and returns the exit status.
// The CLI writes to the runner's own stdout and stderr when params name no
// files; those are os.Stdout and os.Stderr unless stdout and stderr are
// *os.File. Errors are one line on stderr: "warden: run: ...".
func Main(args []string, stdout, stderr io.Writer) int {
	status, err := run(args, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "warden: run: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
	}
	return status
}

func run(args []string, stdout, stderr io.Writer) (int, error) {
	// First, before anything else can be started: descriptors this process
	// inherited without close-on-exec must not reach the CLI.
	if mutant.Is(mutant.FDLeak) {
		// The mutant: descriptors inherited without close-on-exec leak on.
	} else if err := fds.CloexecFrom(3); err != nil {
		return ExitRunnerFailed, err
	}
	// Subscribe before the CLI exists, so a TERM during setup is neither
	// fatal to the runner nor lost.
	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigc)

	fs := flag.NewFlagSet("warden run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	paramsPath := fs.String("params", "", "the JSON params file")
	if err := fs.Parse(args); err != nil {
		return ExitRunnerFailed, fmt.Errorf("parse flags %q: %w (usage: warden run --params FILE)", args, err)
	}
	if fs.NArg() > 0 {
		return ExitRunnerFailed, fmt.Errorf("parse flags: unexpected argument %q (usage: warden run --params FILE)", fs.Arg(0))
	}
	if *paramsPath == "" {
		return ExitRunnerFailed, errors.New("parse flags: --params is required (usage: warden run --params FILE)")
	}
	p, err := LoadParams(*paramsPath)
	if err != nil {
		return ExitRunnerFailed, err
	}
	st, err := p.start(sigc, asFile(stdout, os.Stdout), asFile(stderr, os.Stderr))
	if err != nil {
		var se *statusError
		if errors.As(err, &se) {
			return se.status, err
		}
		return ExitRunnerFailed, err
	}
	return st, nil
}

func asFile(w io.Writer, def *os.File) *os.File {
	if f, ok := w.(*os.File); ok {
		return f
	}
	return def
}

// files are the descriptors the CLI gets, and the events file.
type files struct {
	stdin, stdout, stderr *os.File
	events                *os.File
	opened                []*os.File
}

func (f *files) open(field, path string, flags int) (*os.File, error) {
	fh, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, fail(ExitRunnerFailed, "open %s %q: %w", field, path, unwrapPath(err))
	}
	f.opened = append(f.opened, fh)
	return fh, nil
}

func (f *files) close() {
	for _, fh := range f.opened {
		fh.Close()
	}
}

// openFiles opens every input and output before anything runs: an output
// that cannot be opened fails the run; it never falls through into running
// the CLI with output going elsewhere.
func (p *Params) openFiles(stdout, stderr *os.File) (*files, error) {
	f := &files{stdout: stdout, stderr: stderr}
	var err error
	in := os.DevNull
	field := "stdin (null)"
	if p.Stdin != nil {
		in, field = *p.Stdin, "stdin"
	}
	if f.stdin, err = f.open(field, in, os.O_RDONLY); err != nil {
		f.close()
		return nil, err
	}
	const wflags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if p.Stdout != "" {
		if f.stdout, err = f.open("stdout", p.Stdout, wflags); err != nil {
			f.close()
			return nil, err
		}
	}
	if p.Stderr != "" {
		if p.Stdout != "" && filepath.Clean(p.Stderr) == filepath.Clean(p.Stdout) {
			f.stderr = f.stdout // two opens would overwrite each other
		} else if f.stderr, err = f.open("stderr", p.Stderr, wflags); err != nil {
			f.close()
			return nil, err
		}
	}
	if p.Mode == ModeEvents {
		if f.events, err = f.open("events", p.Events, wflags); err != nil {
			f.close()
			return nil, err
		}
	}
	return f, nil
}

// start opens the files, starts the CLI, forwards signals and waits.
func (p *Params) start(sigc <-chan os.Signal, stdout, stderr *os.File) (int, error) {
	f, err := p.openFiles(stdout, stderr)
	if err != nil {
		return 0, err
	}
	defer f.close()
	env := p.environ(os.LookupEnv)
	// The runner moves into cwd itself rather than leaving it to the child:
	// a bad cwd is then the runner's failure (125), told apart from a CLI
	// that cannot be executed, and a relative argv[0] resolves against it.
	if p.Cwd != "" {
		if err := os.Chdir(p.Cwd); err != nil {
			return 0, fail(ExitRunnerFailed, "change to cwd %q: %w", p.Cwd, unwrapPath(err))
		}
	}
	path, err := lookPath(p.Argv[0], env)
	if err != nil {
		return 0, err
	}

	ev, err := p.prepareOut(f)
	if err != nil {
		return 0, err
	}
	childOut := f.stdout
	if ev != nil {
		defer ev.r.Close()
		defer ev.w.Close()
		childOut = ev.w
	}
	proc, status, err := p.startCLI(sigc, path, env, []*os.File{f.stdin, childOut, f.stderr})
	if proc == nil {
		return status, err
	}
	if ev != nil {
		childOut.Close() // only the CLI may hold the write end, so EOF comes
		ev.startPump()
	}
	ps, err := p.waitCLI(sigc, proc)
	if err != nil {
		return ExitRunnerFailed, err
	}
	return p.drainEvents(ev, f.events, exitStatus(ps))
}

// eventsPipe is the CLI's stdout in events mode: a pipe whose read end the
// recorder's pump drains into the events file.
type eventsPipe struct {
	r, w *os.File
	rec  *Recorder
	// readDone delivers pump's result; exited tells it the CLI is gone.
	readDone chan error
	exited   chan struct{}
}

// prepareOut makes the events pipe and its recorder, and bounds the
// runtime's memory by the line cap; nil outside events mode.
func (p *Params) prepareOut(f *files) (*eventsPipe, error) {
	if p.Mode != ModeEvents {
		return nil, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fail(ExitRunnerFailed, "create stdout pipe: %w", err)
	}
	lineCap := DefaultLineCap
	if p.LineCap != nil {
		lineCap = int(*p.LineCap)
	}
	debug.SetMemoryLimit(int64(lineCap) + memSlack)
	return &eventsPipe{r: pr, w: pw, rec: NewRecorder(f.events, lineCap)}, nil
}

// startPump starts recording the CLI's stdout.
func (ev *eventsPipe) startPump() {
	ev.readDone = make(chan error, 1)
	ev.exited = make(chan struct{})
	go func() { ev.readDone <- pump(ev.r, ev.rec, ev.exited) }()
}

// startCLI starts the CLI with stdio as its descriptors 0, 1 and 2, unless
// a TERM or INT came during setup; without a process it returns the status
// and error start returns.
func (p *Params) startCLI(sigc <-chan os.Signal, path string, env []string, stdio []*os.File) (*os.Process, int, error) {
	// A TERM or INT that came during setup: the CLI never starts.
	select {
	case s := <-sigc:
		return nil, 128 + int(s.(syscall.Signal)), fmt.Errorf("start %q: got %v before the start; not started", p.Argv[0], s)
	default:
	}
	proc, err := os.StartProcess(path, p.Argv, &os.ProcAttr{
		Env:   env,
		Files: stdio,
		// A group of its own: a TERM sent to the runner's group (a terminal's
		// ^C, a supervisor's group signal) reaches the CLI once, through the
		// runner, instead of twice.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		return nil, 0, execError(p.Argv[0], path, err)
	}
	return proc, 0, nil
}

// waitCLI forwards every signal the runner gets to the CLI until the CLI
// exits, and returns how it ended.
func (p *Params) waitCLI(sigc <-chan os.Signal, proc *os.Process) (*os.ProcessState, error) {
	waitDone := make(chan *os.ProcessState, 1)
	waitErr := make(chan error, 1)
	go func() {
		ps, err := proc.Wait()
		if err != nil {
			waitErr <- err
			return
		}
		waitDone <- ps
	}()
	var ps *os.ProcessState
	for ps == nil {
		select {
		case s := <-sigc:
			// ESRCH-like errors mean the CLI already exited; Wait tells.
			_ = proc.Signal(s)
		case ps = <-waitDone:
		case err := <-waitErr:
			return nil, fmt.Errorf("wait for %q (pid %d): %w", p.Argv[0], proc.Pid, err)
		}
	}
	return ps, nil
}

// drainEvents, in events mode, lets the pump read what the CLI left in the
// pipe and syncs the events file; it returns the CLI's status, or the
// runner's failure when the events could not be recorded.
func (p *Params) drainEvents(ev *eventsPipe, events *os.File, status int) (int, error) {
	if ev == nil {
		return status, nil
	}
	close(ev.exited)
	// Wake a read blocked on a pipe that a leftover of the CLI holds
	// open; pump extends this while data keeps coming.
	ev.r.SetReadDeadline(time.Now().Add(drainIdle))
	if err := <-ev.readDone; err != nil {
		return ExitRunnerFailed, fmt.Errorf("record events %q (the CLI exited with status %d): %w", p.Events, status, err)
	}
	if err := events.Sync(); err != nil {
		return ExitRunnerFailed, fmt.Errorf("sync events %q (the CLI exited with status %d): %w", p.Events, status, unwrapPath(err))
	}
	return status, nil
}

// pump feeds the CLI's stdout to rec until EOF, or until the pipe stays idle
// for drainIdle (or drainMax passes) after exited is closed. It drains the
// pipe to the end even when writing events fails, so the CLI never blocks,
// and returns the first write error.
func pump(r *os.File, rec *Recorder, exited <-chan struct{}) error {
	buf := make([]byte, readBuf)
	var werr error
	var hardStop time.Time
	for {
		select {
		case <-exited:
			now := time.Now()
			if hardStop.IsZero() {
				hardStop = now.Add(drainMax)
			}
			d := now.Add(drainIdle)
			if d.After(hardStop) {
				d = hardStop
			}
			r.SetReadDeadline(d)
		default:
		}
		n, err := r.Read(buf)
		if n > 0 && werr == nil {
			_, werr = rec.Write(buf[:n])
			if werr == nil && n < len(buf) {
				// The pipe is drained for now: let readers of the events
				// file see what there is, one write per burst.
				werr = rec.Flush()
			}
		}
		if err != nil {
			// EOF, or a deadline after the exit: the final line without LF
			// still counts.
			if cerr := rec.Close(); werr == nil {
				werr = cerr
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) && werr == nil {
				werr = fmt.Errorf("read CLI stdout: %w", err)
			}
			return werr
		}
	}
}

func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// lookPath finds the CLI the way execvp does, but in the CLI's PATH (with
// path_prefix), not the runner's, and only in absolute directories. A file
// found but not executable gives 126, as in a shell; nothing found, 127.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		if _, err := os.Stat(name); err != nil {
			status := ExitCannotExec // it may exist: a directory on the way is not searchable
			if errors.Is(err, fs.ErrNotExist) {
				status = ExitNotFound
			}
			return "", fail(status, "find argv[0] %q: %w", name, unwrapPath(err))
		}
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	var notExec string
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) && !mutant.Is(mutant.RelPath) {
			continue
		}
		cand := filepath.Join(dir, name)
		fi, err := os.Stat(cand)
		if err != nil || fi.IsDir() {
			continue
		}
		if fi.Mode()&0o111 != 0 {
			return cand, nil
		}
		if notExec == "" {
			notExec = cand
		}
	}
	if notExec != "" {
		return "", fail(ExitCannotExec, "execute argv[0] %q: %q is not executable", name, notExec)
	}
	return "", fail(ExitNotFound, "find argv[0] %q: not in PATH %q", name, path)
}

// execError maps a failed start to 127 (the file is gone) or 126 (it exists
// but the kernel would not run it: no permission, a directory, a bad format,
// a missing interpreter). Fork failures are the runner's own (125).
func execError(name, path string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.EAGAIN, syscall.ENOMEM:
			return fail(ExitRunnerFailed, "start argv[0] %q: %w", name, errno)
		case syscall.ENOENT:
			if _, serr := os.Stat(path); serr != nil {
				return fail(ExitNotFound, "find argv[0] %q: %w", name, errno)
			}
			// The file is there: the kernel could not find what runs
			// it. Say which, since "no such file or directory" about a
			// file that exists sends people the wrong way.
			if interp, kind := interpreterOf(path); interp != "" {
				if _, serr := os.Stat(interp); serr != nil {
					return fail(ExitCannotExec, "execute argv[0] %q (%q): %w: its %s %q is missing%s", name, path, errno, kind, interp, interpHint(kind))
				}
			}
		}
		return fail(ExitCannotExec, "execute argv[0] %q (%q): %w", name, path, errno)
	}
	return fail(ExitCannotExec, "execute argv[0] %q (%q): %w", name, path, unwrapPath(err))
}

// interpreterOf returns what the kernel needs to run the file at path: an
// ELF binary's program interpreter (its dynamic loader) or a script's #!
// interpreter, and which of the two it is; "" when there is none or the file
// cannot be read.
func interpreterOf(path string) (interp, kind string) {
	f, err := os.Open(path)
	if err != nil {
		return "", ""
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if line, ok := bytes.CutPrefix(head, []byte("#!")); ok {
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		if fields := strings.Fields(string(line)); len(fields) > 0 {
			return fields[0], "#! interpreter"
		}
		return "", ""
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return "", ""
	}
	for _, p := range ef.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(p.Open(), 4096))
		if err != nil {
			return "", ""
		}
		return string(bytes.TrimRight(b, "\x00")), "ELF interpreter"
	}
	return "", ""
}

func interpHint(kind string) string {
	if kind == "ELF interpreter" {
		return " (the binary is linked against a libc the image lacks: declare it in the adapter's requires)"
	}
	return ""
}
