// Command probe is the case owner's witness inside a task container: it
// records the os, python3, bash, marker files and the process table before a
// harness runs and after it closed, and reports what changed. It is a static
// binary that needs nothing from the image, and it shares no code with warden.
//
//	probe snapshot [--place SRC,DST] [--markers PATH,...] [--lines PATH,...] [--detail-uids UID,...] [--present PATH,...] [--resolve-sh] [--max-hash BYTES] [--deadline DUR] [--proc-root DIR] [--root DIR] [--no-exec]
//	probe setup --owner UID:GID [--dirs DIR,...] [--write-markers PATH,...] [--markers PATH,...] [--present PATH,...] [--deadline DUR] [--secret PATH] [-- ARGV...]
//	probe diff BEFORE.json AFTER.json
//
// --markers are hashed through the probe's one bounded reader: a link at
// the last component is named, not followed; only a regular file is read,
// at most --max-hash bytes of it (probe.MaxMarkerBytes, 1 MiB, by
// default); a larger one is recorded over_cap with its size, not hashed.
// --present are looked up for presence only (stat, links followed,
// nothing opened): the image's loaders and libraries a requirement names.
//
// snapshot and setup bound their own time: past --deadline
// (probe.DefaultDeadline by default) the run ends with exit 3
// (probe.ExitDeadline) and a line on stderr, whatever it was doing, so a
// run the host stopped waiting for does not go on in the sandbox.
//
// setup makes the owner's directories and marker files (contract §7.1)
// and prints the snapshot taken right after, with the written markers and
// --markers hashed: the whole owner setup in one run. --secret writes the
// one frame it reads from stdin (runner/probe.ReadFrame, tag
// probe.TagSecret, at most 64 KiB) to PATH, mode 0400, owned by --owner:
// the case's challenge, in the same run; nothing of stdin past the frame
// is read.
//
// With `-- ARGV...` setup prints the snapshot as one frame
// (probe.TagSnapshot) and then becomes ARGV (an absolute path; execve, the
// same process): certify's session agent starts this way after the
// baseline, and reads the stdin and writes the stdout the frames leave
// it. Its pid is the snapshot's self, which no baseline holds (probe.Diff),
// so an agent alive at verify is a new process there.
//
// snapshot --place copies SRC to DST (mode 0755, through a new file renamed
// over DST) before the snapshot, so the --markers hashes that follow are of
// the placed file: a session's seed places warden from the owner's volume
// and verifies it in one run.
//
// snapshot --detail-uids gives each process of those uids with its
// command line, executable and tracer (probe.Detail, bounded): the
// owner's witness of what a process runs, read as root. --lines counts
// the lines of those --markers and gives the last (probe.MaxLastLine
// bytes at most), and --resolve-sh where `sh` on the PATH resolves: the
// owner's looks at the scenarios' writer, its file growing and its
// executable the image's shell.
//
// diff exits 0 when nothing changed, 1 when something did, 2 on bad usage.
// snapshot and setup exit 3 when their deadline passed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandproof/sandproof/runner/probe"
)

// usageError marks bad command-line input (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// errDirty is returned by diff when the snapshots differ; main exits 1
// without a message since the report says it all.
var errDirty = errors.New("snapshots differ")

// stdin is what setup --secret reads (a test sets its own).
var stdin io.Reader = os.Stdin

// execve replaces the process with argv after setup's snapshot (a test
// sets its own).
var execve = func(argv []string) error { return syscall.Exec(argv[0], argv, os.Environ()) }

// maxSecret bounds what --secret reads: a challenge is one short line.
const maxSecret = 64 << 10

const usage = `usage: probe snapshot [--place SRC,DST] [--markers PATH,...] [--lines PATH,...] [--detail-uids UID,...] [--present PATH,...] [--resolve-sh] [--max-hash BYTES] [--deadline DUR] [--proc-root DIR] [--root DIR] [--no-exec]
       probe setup --owner UID:GID [--dirs DIR,...] [--write-markers PATH,...] [--markers PATH,...] [--present PATH,...] [--deadline DUR] [--secret PATH] [-- ARGV...]
       probe diff BEFORE.json AFTER.json`

// atDeadline ends the process once a run's deadline passed, for a step
// stuck where no context reaches (a read the kernel does not return
// from). A test sets its own.
var atDeadline = func(d time.Duration) {
	fmt.Fprintf(os.Stderr, "probe: %v (%s)\n", probe.ErrDeadline, d)
	os.Exit(probe.ExitDeadline)
}

// bounded is a run's context, ending at its deadline, and the watchdog
// behind it (atDeadline, a moment after the context: a step that heeds the
// context ends with its own error first). stop ends both.
func bounded(d time.Duration) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t := time.AfterFunc(d+time.Second, func() { atDeadline(d) })
	return ctx, func() { t.Stop(); cancel() }
}

func main() {
	err := run(os.Stdout, os.Stderr, os.Args[1:])
	var ue usageError
	switch {
	case err == nil:
	case errors.Is(err, errDirty):
		os.Exit(1)
	case errors.Is(err, probe.ErrDeadline):
		fmt.Fprintf(os.Stderr, "probe: %v\n", err)
		os.Exit(probe.ExitDeadline)
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "probe: %v\n%s\n", err, usage)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "probe: %v\n", err)
		os.Exit(1)
	}
}

func run(stdout, stderr io.Writer, args []string) error {
	if len(args) == 0 {
		return usagef("missing command")
	}
	switch args[0] {
	case "snapshot":
		return snapshot(stdout, stderr, args[1:])
	case "setup":
		return setup(stdout, stderr, args[1:])
	case "diff":
		return diff(stdout, stderr, args[1:])
	default:
		return usagef("unknown command %q", args[0])
	}
}

func snapshot(stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("snapshot", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	markers := fs.String("markers", "", "comma-separated marker files to hash")
	present := fs.String("present", "", "comma-separated files to look up (stat only)")
	maxHash := fs.Int64("max-hash", probe.MaxMarkerBytes, "the most read of one marker to hash it")
	deadline := fs.Duration("deadline", probe.DefaultDeadline, "the run's own deadline")
	procRoot := fs.String("proc-root", "/proc", "where /proc is")
	root := fs.String("root", "/", "root under which etc/os-release is read")
	noExec := fs.Bool("no-exec", false, "find and hash python3 and bash without running them")
	place := fs.String("place", "", "SRC,DST: copy SRC to DST before the snapshot")
	detailUIDs := fs.String("detail-uids", "", "comma-separated uids whose processes are given with their detail")
	lines := fs.String("lines", "", "comma-separated markers whose lines are counted, the last given")
	resolveSh := fs.Bool("resolve-sh", false, "give where sh on the PATH resolves")
	if err := fs.Parse(args); err != nil {
		return usagef("snapshot: %v", err)
	}
	detail, err := uidList(*detailUIDs)
	if err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("snapshot: unexpected argument %q", fs.Arg(0))
	}
	if *maxHash < 1 || *deadline <= 0 {
		return usagef("snapshot: --max-hash %d, --deadline %s: want both above zero", *maxHash, *deadline)
	}
	ms, err := pathList("--markers", *markers)
	if err != nil {
		return err
	}
	ps, err := pathList("--present", *present)
	if err != nil {
		return err
	}
	ls, err := pathList("--lines", *lines)
	if err != nil {
		return err
	}
	for _, l := range ls {
		if !slices.Contains(ms, l) {
			return usagef("snapshot: --lines: %q is not one of --markers", l)
		}
	}
	ctx, stop := bounded(*deadline)
	defer stop()
	if *place != "" {
		ps, err := pathList("--place", *place)
		if err != nil || len(ps) != 2 {
			return usagef("snapshot: --place: bad value %q (want SRC,DST, two absolute paths)", *place)
		}
		if err := probe.Place(ps[0], ps[1]); err != nil {
			return err
		}
	}
	s, err := probe.Take(ctx, probe.Options{ProcRoot: *procRoot, Root: *root, Markers: ms, Present: ps, MaxHash: *maxHash, NoExec: *noExec, Detail: detail,
		Lines: ls, ResolveSh: *resolveSh})
	if err != nil {
		return err
	}
	return writeJSON(stdout, s)
}

// uidList splits --detail-uids: numeric uids, comma-separated.
func uidList(v string) ([]int, error) {
	if v == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, usagef("snapshot: --detail-uids: bad value %q (want numeric uids, comma-separated)", v)
		}
		out = append(out, n)
	}
	return out, nil
}

// pathList splits a comma-separated list of absolute paths.
func pathList(flagName, v string) ([]string, error) {
	var ps []string
	if v == "" {
		return nil, nil
	}
	for _, p := range strings.Split(v, ",") {
		if p == "" || !strings.HasPrefix(p, "/") {
			return nil, usagef("%s: bad value %q (want absolute paths, comma-separated)", flagName, v)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

func setup(stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("setup", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	owner := fs.String("owner", "", "UID:GID owning the dirs and markers")
	dirs := fs.String("dirs", "", "comma-separated dirs to make, in order")
	write := fs.String("write-markers", "", "comma-separated marker files to write")
	markers := fs.String("markers", "", "comma-separated further files to hash")
	present := fs.String("present", "", "comma-separated files to look up (stat only)")
	deadline := fs.Duration("deadline", probe.DefaultDeadline, "the run's own deadline, up to the exec")
	secret := fs.String("secret", "", "file to write from stdin, mode 0400, owned by --owner")
	if err := fs.Parse(args); err != nil {
		return usagef("setup: %v", err)
	}
	then, err := thenArgv(args, fs.Args())
	if err != nil {
		return err
	}
	us, gs, ok := strings.Cut(*owner, ":")
	uid, uerr := strconv.Atoi(us)
	gid, gerr := strconv.Atoi(gs)
	if !ok || uerr != nil || gerr != nil || uid < 0 || gid < 0 {
		return usagef("setup: --owner %q: want UID:GID, numeric", *owner)
	}
	o := probe.SetupOptions{UID: uid, GID: gid}
	if o.Dirs, err = pathList("--dirs", *dirs); err != nil {
		return err
	}
	if o.Markers, err = pathList("--write-markers", *write); err != nil {
		return err
	}
	more, err := pathList("--markers", *markers)
	if err != nil {
		return err
	}
	ps, err := pathList("--present", *present)
	if err != nil {
		return err
	}
	if *deadline <= 0 {
		return usagef("setup: --deadline %s: want above zero", *deadline)
	}
	ctx, stop := bounded(*deadline)
	defer stop()
	if *secret != "" {
		if o.Secret, err = onePath("--secret", *secret); err != nil {
			return err
		}
		if o.SecretData, err = readSecret(stdin); err != nil {
			return err
		}
	}
	if err := probe.Setup(o); err != nil {
		return err
	}
	s, err := probe.Take(ctx, probe.Options{Markers: append(append([]string{}, o.Markers...), more...), Present: ps})
	if err != nil {
		return err
	}
	if then == nil {
		return writeJSON(stdout, s)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	if err := probe.WriteFrame(stdout, probe.TagSnapshot, b); err != nil {
		return err
	}
	// What it becomes has no deadline of the probe's.
	stop()
	if err := execve(then); err != nil {
		return fmt.Errorf("setup: exec %q: %w", then[0], err)
	}
	return nil
}

// thenArgv is what setup becomes after its snapshot: the arguments after
// an explicit "--" (rest is what the flags left), an absolute path first;
// nil when there is no "--". Any other argument is bad usage.
func thenArgv(args, rest []string) ([]string, error) {
	if len(rest) == 0 {
		if len(args) > 0 && args[len(args)-1] == "--" {
			return nil, usagef("setup: nothing after --")
		}
		return nil, nil
	}
	if i := len(args) - len(rest) - 1; i < 0 || args[i] != "--" {
		return nil, usagef("setup: unexpected argument %q (a command to become goes after --)", rest[0])
	}
	if !strings.HasPrefix(rest[0], "/") {
		return nil, usagef("setup: -- %q: want an absolute path", rest[0])
	}
	return rest, nil
}

// onePath is a flag's one absolute path.
func onePath(flagName, v string) (string, error) {
	ps, err := pathList(flagName, v)
	if err != nil || len(ps) != 1 {
		return "", usagef("%s: bad value %q (want one absolute path)", flagName, v)
	}
	return ps[0], nil
}

// readSecret reads the secret's one frame and nothing past it (what
// follows on stdin is the agent's, when setup becomes it); a bad, short or
// empty frame, or one over maxSecret, is refused (a truncated or empty
// challenge would fail the case later for a reason that is not the
// harness's).
func readSecret(r io.Reader) ([]byte, error) {
	b, err := probe.ReadFrame(r, probe.TagSecret, maxSecret)
	switch {
	case errors.Is(err, io.EOF):
		return nil, fmt.Errorf("setup: --secret: nothing on stdin")
	case err != nil:
		return nil, fmt.Errorf("setup: --secret from stdin: %w", err)
	case len(b) == 0:
		return nil, fmt.Errorf("setup: --secret: an empty frame on stdin")
	}
	return b, nil
}

func diff(stdout, stderr io.Writer, args []string) error {
	if len(args) != 2 {
		return usagef("diff: want BEFORE.json AFTER.json, got %d arguments", len(args))
	}
	var snaps [2]probe.Snapshot
	for i, p := range args {
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read snapshot: %w", err)
		}
		if err := json.Unmarshal(b, &snaps[i]); err != nil {
			return fmt.Errorf("decode snapshot %q: %w", p, err)
		}
		if snaps[i].Schema != probe.Schema {
			return fmt.Errorf("decode snapshot %q: schema %q, want %q", p, snaps[i].Schema, probe.Schema)
		}
	}
	r := probe.Diff(snaps[0], snaps[1])
	if err := writeJSON(stdout, r); err != nil {
		return err
	}
	if !r.Clean {
		return errDirty
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
