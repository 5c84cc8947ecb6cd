// Package probe looks at a task image from the inside, for the case owner:
// the os, python3, bash, marker files and the whole process table, before and
// after a harness ran, and the difference between the two.
//
// It shares no code with warden's supervision logic on purpose: the probe is
// the independent witness that a warden bug cannot hide itself from, so it
// reads /proc through package witness (the suite's and the soak's reader,
// never warden's runner/warden/proc) and never consults warden's receipts or
// markers.
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
	"strings"
	"sync"
	"syscall"
	"time"

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
	Path      string     `json:"path"`
	Python3   Tool       `json:"python3"`
	Bash      Tool       `json:"bash"`
	Markers   []Marker   `json:"markers"`
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
	Size    int64  `json:"size"`
	// Error says why a present marker could not be hashed (not a regular
	// file, permission denied).
	Error string `json:"error,omitempty"`
}

// Options says where to look. The zero value looks at the running system.
type Options struct {
	// ProcRoot is where /proc is; empty means "/proc".
	ProcRoot string
	// Root is prepended to /etc/os-release; empty means "/".
	Root string
	// Path is the PATH to search; empty means the probe's own $PATH.
	Path string
	// Markers are the files to hash.
	Markers []string
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
}

// Take takes a snapshot. The process table is read last, after the
// `--version` children have been waited for, so they are not in it.
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
	s := Snapshot{Schema: Schema, TakenAt: time.Now().UTC(), Path: o.Path, Markers: []Marker{}}
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
		s.Markers = append(s.Markers, readMarker(m))
	}
	wg.Wait()
	procs, err := readProcesses(o.ProcRoot, o.Detail)
	if err != nil {
		return Snapshot{}, fmt.Errorf("take snapshot: %w", err)
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
	if sum, _, err := hashFile(t.Resolved); err == nil {
		t.SHA256 = sum
	} else {
		errs = append(errs, err.Error())
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

func readMarker(path string) Marker {
	m := Marker{Path: path}
	sum, size, err := hashFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		m.Missing = true
	case err != nil:
		m.Error = err.Error()
	default:
		m.SHA256, m.Size = sum, size
	}
	return m
}

// hashFile returns the sha256 of a regular file and its size. The open
// never blocks: a fifo planted where a marker or the deliverable should be
// is refused, not waited on.
func hashFile(path string) (string, int64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", 0, fmt.Errorf("stat %q: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return "", 0, fmt.Errorf("hash %q: not a regular file (%s)", path, fi.Mode().Type())
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("hash %q: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
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
