package probe

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandproof/sandproof/runner/confine"
	"github.com/sandproof/sandproof/runner/witness"
)

// Schema names the snapshot format.
const Schema = "sandproof.probe/v1"

// Snapshot is what the probe sees at one moment.
type Snapshot struct {
	Schema  string    `json:"schema"`
	TakenAt time.Time `json:"taken_at"`
	// OS is ID-VERSION_ID from /etc/os-release ("debian-12"), ID alone when
	// there is no VERSION_ID, "unknown" when there is no os-release.
	OS     string `json:"os"`
	OSName string `json:"os_name,omitempty"`
	// Path is the PATH the tools were looked up on: the image's, as the
	// container runtime gave it to the probe.
	Path    string   `json:"path"`
	Python3 Tool     `json:"python3"`
	Bash    Tool     `json:"bash"`
	Markers []Marker `json:"markers"`
	// MaxHash is the most the probe read of one marker to hash it
	// (Options.MaxHash); a marker past it is OverCap. Zero in a snapshot
	// from before the field.
	MaxHash int64 `json:"max_hash,omitempty"`
	// Present are the files looked up for presence only (Options.Present):
	// never opened, so never hashed.
	Present []Marker `json:"present,omitempty"`
	// Sh is where `sh` on Path resolves, links followed
	// (Options.ResolveSh; "" when not asked or not found): the image's
	// own shell, which the owner compares with a process's executable.
	Sh        string     `json:"sh,omitempty"`
	Self      witness.ID `json:"self"`
	Processes []Process  `json:"processes"`
}

// Tool is a program found on PATH. The zero Tool means absent and is written
// as the JSON string "none", the way the evidence records it.
type Tool struct {
	// Path is where PATH lookup found it; Resolved is the file after symlinks.
	Path     string `json:"path"`
	Resolved string `json:"resolved"`
	// Version is the first line of `--version` output (stdout and stderr:
	// Python 2 and some builds print it on stderr).
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
	// OverCap says the file has more than MaxToolBytes: it was not hashed
	// (SHA256 is empty) and compares as changed to anything (sameDigest).
	OverCap bool `json:"over_cap,omitempty"`
	// Error says why Version or SHA256 could not be had; empty when they were.
	Error string `json:"error,omitempty"`
}

// None is how an absent tool is written.
const None = "none"

// Absent reports whether the tool was not found.
func (t Tool) Absent() bool { return t.Path == "" }

// String is "none" or "PATH (VERSION)".
func (t Tool) String() string {
	if t.Absent() {
		return None
	}
	return fmt.Sprintf("%s (%s)", t.Path, t.Version)
}

type plainTool Tool

// MarshalJSON writes "none" for an absent tool.
func (t Tool) MarshalJSON() ([]byte, error) {
	if t.Absent() {
		return json.Marshal(None)
	}
	return json.Marshal(plainTool(t))
}

// UnmarshalJSON accepts "none" or an object.
func (t *Tool) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if s != None {
			return fmt.Errorf("decode tool: want %q or an object, got %q", None, s)
		}
		*t = Tool{}
		return nil
	}
	var p plainTool
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("decode tool: %w", err)
	}
	*t = Tool(p)
	return nil
}

// Marker is one file the owner placed and expects to be kept unchanged.
type Marker struct {
	Path    string `json:"path"`
	Missing bool   `json:"missing"`
	SHA256  string `json:"sha256,omitempty"`
	// Size is the bytes hashed, or for a marker over the cap its size by
	// fstat (a file too large to hash is still seen growing).
	Size int64 `json:"size"`
	// OverCap says the file holds more than the snapshot's MaxHash bytes:
	// it was not hashed (SHA256 is empty, Error too: it is there) and it
	// is the same as nothing, itself included (SameContent).
	OverCap bool `json:"over_cap,omitempty"`
	// Error says why a present marker could not be hashed (a link, which
	// is not followed; not a regular file; permission denied).
	Error string `json:"error,omitempty"`
	// File is which file the probe read and whose it is, by fstat on the
	// descriptor it hashed (set when it read it, hashed or over the cap;
	// nil when missing or unreadable): bytes alone cannot tell a file
	// kept from one deleted and put back with the same bytes by another
	// user (the borrowed owner's state, in a directory the harness may
	// write).
	File *FileID `json:"file,omitempty"`
	// Lines and LastLine are given for a marker in Options.Lines, hashed
	// whole: the newlines in it, and its last whole line without the
	// newline (at most MaxLastLine bytes; "" when longer, or when there
	// is none).
	Lines    int    `json:"lines,omitempty"`
	LastLine string `json:"last_line,omitempty"`
}

// FileID is a file's identity and owner as fstat gives them: its owner
// uid and gid, its device and inode (which file it is), and its mode
// (type and permission bits, st_mode). Fixed-size: a marker's record
// stays bounded.
type FileID struct {
	UID   uint32 `json:"uid"`
	GID   uint32 `json:"gid"`
	Dev   uint64 `json:"dev"`
	Inode uint64 `json:"inode"`
	Mode  uint32 `json:"mode"`
}

// String is the identity as a change names it.
func (f FileID) String() string {
	return fmt.Sprintf("owner %d:%d, mode %o, inode %d on device %d", f.UID, f.GID, f.Mode, f.Inode, f.Dev)
}

// fileID is the identity of the open file fi describes.
func fileID(fi os.FileInfo) *FileID {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	return &FileID{UID: st.Uid, GID: st.Gid, Dev: uint64(st.Dev), Inode: st.Ino, Mode: st.Mode}
}

// MaxLastLine bounds a marker's LastLine: the writer's lines ("N EPOCH")
// are under 20 bytes.
const MaxLastLine = 128

// SameContent reports whether m and o hold the same bytes as far as the
// probe can tell: both hashed whole (there, readable, within the cap) with
// the same sha256. It is the one comparison of two looks at a marker: a
// marker over the cap, missing or unreadable is never the same.
func (m Marker) SameContent(o Marker) bool {
	return m.readable() && o.readable() && sameDigest(m.SHA256, o.SHA256, m.OverCap, o.OverCap)
}

// readable says the probe opened and read the marker.
func (m Marker) readable() bool { return !m.Missing && m.Error == "" }

// sameDigest compares two hashes the probe took: a file over its cap has
// none, and is never the same as another (nor as itself at another look).
func sameDigest(a, b string, aOver, bOver bool) bool { return !aOver && !bOver && a == b }

// State is the marker as one line: "missing", "error: ...", "size=N over
// the cap: not hashed" or "sha256=... size=N".
func (m Marker) State() string {
	switch {
	case m.Missing:
		return "missing"
	case m.Error != "":
		return "error: " + m.Error
	case m.OverCap:
		return fmt.Sprintf("size=%d over the cap: not hashed", m.Size)
	default:
		return fmt.Sprintf("sha256=%s size=%d", m.SHA256, m.Size)
	}
}

// Options says where to look. The zero value looks at the running system.
type Options struct {
	// ProcRoot is where /proc is; empty means "/proc".
	ProcRoot string
	// Root is prepended to /etc/os-release; empty means "/".
	Root string
	// Path is the PATH to search; empty means the probe's own $PATH.
	Path string
	// Markers are the files to hash, each read through hashFile: never
	// through a link at its last component, a regular file only, at most
	// MaxHash bytes.
	Markers []string
	// MaxHash caps what is read of one marker; zero means MaxMarkerBytes.
	MaxHash int64
	// Present are files of the image looked up for presence only (the
	// requirements' loaders and libraries, often links): stat follows
	// links, nothing is opened or read.
	Present []string
	// ToolTimeout bounds each `--version` run; zero means 10 seconds.
	ToolTimeout time.Duration
	// NoExec finds and hashes python3 and bash without running them: a
	// session's seed must not start the task's own interpreters (the
	// tripwire specs check it). Version stays empty.
	NoExec bool
	// Detail lists the uids whose processes the table gives with their
	// Detail (command line, executable, tracer; bounded, detail.go); empty
	// reads none.
	Detail []int
	// Lines are markers (of Markers) whose lines are counted and whose
	// last line is given (Marker.Lines, Marker.LastLine) as they are
	// hashed: the owner's look at a file growing a line at a time.
	Lines []string
	// ResolveSh gives Snapshot.Sh.
	ResolveSh bool
}

// MaxMarkerBytes is the most the probe reads of one marker to hash it,
// unless Options.MaxHash says otherwise. What the owner hashes after a
// harness ran is small: a marker is one line, the deliverable one token
// (the host downloads at most 64 KiB of it), the writer's file about 400
// short lines (under 16 KiB) by its deadline, the borrowed state one line.
// 1 MiB is far above all of them and hashes in about a millisecond, so a
// harness that plants a 16 GiB sparse file where one of them should be
// costs the owner one read of 1 MiB, and the file is "changed".
const MaxMarkerBytes = 1 << 20

// MaxToolBytes is the most the probe reads of python3 or bash to hash it:
// an interpreter is a few MiB (Debian 12's python3.11 is 6.6 MiB, a static
// bash 1.5 MiB); 128 MiB hashes in well under the probe's deadline.
const MaxToolBytes = 128 << 20

// DefaultDeadline bounds one probe run (cmd/probe --deadline's default):
// a snapshot takes well under a second; what is still running at the
// deadline ends with ErrDeadline (exit ExitDeadline), never later.
const DefaultDeadline = 60 * time.Second

// ExitDeadline is cmd/probe's exit status when its own deadline passed:
// the host reads it as "the owner could not look", not as a finding.
const ExitDeadline = 3

// ErrDeadline is what a run cut at its deadline ends with.
var ErrDeadline = errors.New("the probe's deadline passed")

// Take takes a snapshot. The process table is read last, after the
// `--version` children have been waited for, so they are not in it. It
// ends with ErrDeadline (wrapped) once ctx's deadline passed, whatever it
// was doing; a marker's read stops at ctx's end.
func Take(ctx context.Context, o Options) (Snapshot, error) {
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.Root == "" {
		o.Root = "/"
	}
	if o.Path == "" {
		o.Path = os.Getenv("PATH")
	}
	if o.ToolTimeout == 0 {
		o.ToolTimeout = 10 * time.Second
	}
	if o.MaxHash <= 0 {
		o.MaxHash = MaxMarkerBytes
	}
	s := Snapshot{Schema: Schema, TakenAt: time.Now().UTC(), Path: o.Path, Markers: []Marker{}, MaxHash: o.MaxHash}
	s.OS, s.OSName = readOSRelease(o.Root)
	// python3 and bash are looked at side by side, each in a goroutine of
	// its own (hash, then `--version`), while the markers are hashed: the
	// owner's setup and verify wait for this run, and two interpreters'
	// starts one after the other were most of it. Each tool is still
	// looked at whole, and all of them are done before the process table
	// is read.
	var wg sync.WaitGroup
	for _, t := range []struct {
		name string
		dst  *Tool
	}{{"python3", &s.Python3}, {"bash", &s.Bash}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			*t.dst = findTool(ctx, t.name, o.Path, o.ToolTimeout, o.NoExec)
		}()
	}
	for _, m := range o.Markers {
		s.Markers = append(s.Markers, readMarkerLines(ctx, m, o.MaxHash, slices.Contains(o.Lines, m)))
	}
	if o.ResolveSh {
		s.Sh = resolveSh(o.Path)
	}
	for _, p := range o.Present {
		s.Present = append(s.Present, lookUp(p))
	}
	wg.Wait()
	if err := deadline(ctx); err != nil {
		return Snapshot{}, err
	}
	procs, err := readProcesses(o.ProcRoot, o.Detail)
	if err != nil {
		return Snapshot{}, fmt.Errorf("take snapshot: %w", err)
	}
	if err := deadline(ctx); err != nil {
		return Snapshot{}, err
	}
	s.Processes = procs
	s.Self = witness.ID{PID: os.Getpid()}
	for _, p := range procs {
		if p.PID == s.Self.PID {
			s.Self.StartTime = p.StartTime
		}
	}
	return s, nil
}

// deadline is ErrDeadline, wrapped, once ctx ended; a snapshot that
// went on past it would hold what a half-finished look saw.
func deadline(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("take snapshot: %w (%v)", ErrDeadline, err)
	}
	return nil
}

// readOSRelease returns ID-VERSION_ID and PRETTY_NAME from etc/os-release
// (or usr/lib/os-release, its documented fallback) under root.
func readOSRelease(root string) (id, pretty string) {
	var b []byte
	var err error
	for _, p := range []string{"etc/os-release", "usr/lib/os-release"} {
		if b, err = readCapped(filepath.Join(root, p), maxFile); err == nil {
			break
		}
	}
	if err != nil {
		return "unknown", ""
	}
	kv := ParseOSRelease(b)
	id = kv["ID"]
	if id == "" {
		id = "unknown"
	}
	if v := kv["VERSION_ID"]; v != "" {
		id += "-" + v
	}
	return id, kv["PRETTY_NAME"]
}

// ParseOSRelease parses os-release(5) KEY=value lines; values may be quoted
// with " or ' and use backslash escapes inside double quotes.
func ParseOSRelease(b []byte) map[string]string {
	kv := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if n := len(v); n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n-1] == v[0] {
			q := v[0]
			v = v[1 : n-1]
			if q == '"' {
				var sb strings.Builder
				for i := 0; i < len(v); i++ {
					if v[i] == '\\' && i+1 < len(v) {
						i++
					}
					sb.WriteByte(v[i])
				}
				v = sb.String()
			}
		}
		kv[k] = v
	}
	return kv
}

// LookPath finds name on the given PATH value the way execvp does: the first
// executable regular file wins; an empty element means the current directory.
func LookPath(name, path string) (string, bool) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

func findTool(ctx context.Context, name, path string, timeout time.Duration, noExec bool) Tool {
	p, ok := LookPath(name, path)
	if !ok {
		return Tool{}
	}
	t := Tool{Path: p, Resolved: p}
	var errs []string
	if r, err := filepath.EvalSymlinks(p); err == nil {
		t.Resolved = r
	} else {
		errs = append(errs, fmt.Sprintf("resolve %q: %v", p, err))
	}
	// Resolved has no link left, so hashFile's no-follow open reads it.
	switch h, err := hashFile(ctx, t.Resolved, MaxToolBytes); {
	case err != nil:
		errs = append(errs, err.Error())
	case h.over:
		t.OverCap = true
		errs = append(errs, fmt.Sprintf("hash %q: %d bytes, over the cap of %d: not hashed", t.Resolved, h.size, int64(MaxToolBytes)))
	default:
		t.SHA256 = h.sum
	}
	// Run it by the name PATH gave, not the resolved file: a venv's python
	// finds its environment through the path it was started by.
	if !noExec {
		v, err := version(ctx, p, path, timeout)
		t.Version = v
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	t.Error = strings.Join(errs, "; ")
	return t
}

func version(ctx context.Context, prog, path string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, "--version")
	cmd.Env = append(withoutPath(os.Environ()), "PATH="+path)
	cmd.Stdin = nil
	out, err := cmd.CombinedOutput()
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	first = strings.TrimSpace(first)
	if err != nil {
		return first, fmt.Errorf("run %q --version: %w", prog, err)
	}
	return first, nil
}

func withoutPath(env []string) []string {
	out := env[:0:0]
	for _, e := range env {
		if !strings.HasPrefix(e, "PATH=") {
			out = append(out, e)
		}
	}
	return out
}

func readMarker(ctx context.Context, path string, max int64) Marker {
	return readMarkerLines(ctx, path, max, false)
}

// readMarkerLines is readMarker, with the marker's lines counted and its
// last line kept when lines is set (and the file is hashed whole).
func readMarkerLines(ctx context.Context, path string, max int64, lines bool) Marker {
	m := Marker{Path: path}
	var lt *lineTail
	var also io.Writer
	if lines {
		lt = &lineTail{}
		also = lt
	}
	h, err := hashMarker(ctx, path, max, also)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		m.Missing = true
	case err != nil:
		m.Error = err.Error()
	default:
		m.SHA256, m.Size, m.OverCap, m.File = h.sum, h.size, h.over, h.id
		if lt != nil && !h.over {
			m.Lines, m.LastLine = lt.lines, lt.last()
		}
	}
	return m
}

// lineTail counts the newlines written to it and keeps the last bytes, so
// the last whole line of at most MaxLastLine bytes can be given.
type lineTail struct {
	lines int
	tail  []byte // the last MaxLastLine+2 bytes written, or fewer
	cut   bool   // bytes before tail were written
}

func (t *lineTail) Write(p []byte) (int, error) {
	t.lines += bytes.Count(p, []byte{'\n'})
	const keep = MaxLastLine + 2 // the line, its newline and the one before it
	if len(p) >= keep {
		t.tail, t.cut = append(t.tail[:0], p[len(p)-keep:]...), true
		return len(p), nil
	}
	t.tail = append(t.tail, p...)
	if n := len(t.tail); n > keep {
		t.tail, t.cut = append(t.tail[:0], t.tail[n-keep:]...), true
	}
	return len(p), nil
}

// last is the last whole line, "" when there is none or it is longer
// than MaxLastLine (its start is not in the tail).
func (t *lineTail) last() string {
	end := bytes.LastIndexByte(t.tail, '\n')
	if end < 0 {
		return ""
	}
	start := bytes.LastIndexByte(t.tail[:end], '\n')
	if start < 0 && t.cut {
		return ""
	}
	return string(t.tail[start+1 : end])
}

// resolveSh is where `sh` on path resolves, links followed; "" when it
// is not there or does not resolve.
func resolveSh(path string) string {
	p, ok := LookPath("sh", path)
	if !ok {
		return ""
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return ""
	}
	return r
}

// lookUp is a Present file: there or missing, its size, by stat (links
// followed); a file that is not regular is there with an error.
func lookUp(path string) Marker {
	m := Marker{Path: path}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		m.Missing = true
	case err != nil:
		m.Error = err.Error()
	case !fi.Mode().IsRegular():
		m.Error = fmt.Sprintf("look up %q: not a regular file (%s)", path, fi.Mode().Type())
	default:
		m.Size = fi.Size()
	}
	return m
}

// hashed is what hashFile found: the sha256 of the whole file and its
// size, or (over) that it holds more than the cap, with its size by
// fstat; and the file's identity by the same fstat (id).
type hashed struct {
	sum  string
	size int64
	over bool
	id   *FileID
}

// hashFile is the probe's one reader of a file it hashes (markers, the
// deliverable, the writer's file, python3 and bash). It opens path
// without following a link at its last component (O_NOFOLLOW: a link is
// an error naming it, never read) and without blocking (O_NONBLOCK: a
// fifo is not waited on), reads only a regular file (fstat: a device is
// refused, not read), and hashes at most max bytes of it (hashPrefix). A
// larger file is not hashed: over, with its size by fstat.
func hashFile(ctx context.Context, path string, max int64) (hashed, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, syscall.ELOOP) {
		target, _ := os.Readlink(path)
		return hashed{}, fmt.Errorf("hash %q: a symbolic link to %q, not followed", path, target)
	}
	if err != nil {
		return hashed{}, err
	}
	return hashOpened(ctx, f, path, max, nil)
}

// hashMarker is hashFile for a path the harness could have written above
// (a marker in its home, the deliverable, the writer's file): opened
// through the confined primitive (runner/confine), following no link at
// any component, so a directory the harness swapped for a link does not
// steer root's read to a file of its choosing (its hash and size would
// reach the evidence). also, when not nil, is given the bytes hashed.
func hashMarker(ctx context.Context, path string, max int64, also io.Writer) (hashed, error) {
	rel := strings.TrimPrefix(filepath.Clean(path), "/")
	if !filepath.IsAbs(path) || rel == "" {
		return hashed{}, fmt.Errorf("hash %q: not an absolute file path", path)
	}
	root, err := confine.OpenRoot("/")
	if err != nil {
		return hashed{}, err
	}
	defer syscall.Close(root)
	f, err := confine.OpenFile(root, rel)
	var le *confine.LinkError
	if errors.As(err, &le) {
		return hashed{}, fmt.Errorf("hash %q: a symbolic link at /%s (to %q), not followed", path, le.At, le.Target)
	}
	if err != nil {
		return hashed{}, err
	}
	return hashOpened(ctx, f, path, max, also)
}

// hashOpened hashes f (path is its name for errors), which it closes:
// a regular file only, at most max bytes, also (when not nil) given the
// bytes hashed.
func hashOpened(ctx context.Context, f *os.File, path string, max int64, also io.Writer) (hashed, error) {
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return hashed{}, fmt.Errorf("stat %q: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return hashed{}, fmt.Errorf("hash %q: not a regular file (%s)", path, fi.Mode().Type())
	}
	h, err := hashPrefixTo(ctx, f, max, also)
	if err != nil {
		return hashed{}, fmt.Errorf("hash %q: %w", path, err)
	}
	h.id = fileID(fi)
	if h.over {
		// The size from fstat, after the read: a file still growing
		// is seen at its latest.
		if fi, err := f.Stat(); err == nil && fi.Size() > h.size {
			h.size = fi.Size()
		}
	}
	return h, nil
}

// hashPrefix hashes r when it holds at most max bytes, reading at most
// max+1 of them (the one past max says it is over); ctx ending stops it
// between reads.
func hashPrefix(ctx context.Context, r io.Reader, max int64) (hashed, error) {
	return hashPrefixTo(ctx, r, max, nil)
}

// hashPrefixTo is hashPrefix, also (when not nil) given the bytes read.
func hashPrefixTo(ctx context.Context, r io.Reader, max int64, also io.Writer) (hashed, error) {
	h := sha256.New()
	var w io.Writer = h
	if also != nil {
		w = io.MultiWriter(h, also)
	}
	n, err := io.CopyBuffer(w, ctxReader{ctx, io.LimitReader(r, max+1)}, make([]byte, 32<<10))
	if err != nil {
		return hashed{}, err
	}
	if n > max {
		return hashed{size: n, over: true}, nil
	}
	return hashed{sum: hex.EncodeToString(h.Sum(nil)), size: n}, nil
}

// ctxReader ends a read once ctx ended.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, fmt.Errorf("%w (%v)", ErrDeadline, err)
	}
	return c.r.Read(p)
}

// maxFile caps how much of one small file (os-release) is read, so that a
// hostile or broken image cannot cost memory.
const maxFile = 64 << 10

// readCapped reads a whole file, at most max bytes, without a stat first.
func readCapped(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}
