package certify

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/probe"
	"github.com/sandproof/sandproof/runner/witness"
)

// memSandbox is an in-memory provider.Sandbox, the test double of a
// container for the case's verdict rules: a file tree, a process table,
// the image's tools, scripted execs, and the filesystem diff against the
// tree it was made with. The owner's probe is scripted from that state
// (its snapshot hashes the files it is asked about and lists the process
// table), so a rule is broken by changing the sandbox, not the answer.
// Test support only: product code never sees it (a _test.go file).
type memSandbox struct {
	mu      sync.Mutex
	files   map[string]string // path -> content
	image   map[string]string // the tree at creation, for the diff
	procs   []probe.Process
	os      string
	bash    probe.Tool
	python3 probe.Tool
	self    witness.ID // the probe's own process in its snapshot
	// execs answers an exec whose argv starts with the key's words
	// ("/x/probe setup"), before the probe's default snapshot.
	execs map[string]func(provider.ExecSpec) (provider.ExecResult, error)
	// extraChanges are diff entries the tree cannot show (a deleted
	// directory, a path outside it).
	extraChanges []provider.Change
	diffErr      error // what Changes fails with, when set
	// unreported paths are left out of the probe's answer, unreadable
	// ones answered with the error (a probe that could not look).
	unreported map[string]bool
	unreadable map[string]string
	// ids are the files' identities (owner, inode, mode) the probe gives
	// a marker it read; a file without one is given none.
	ids       map[string]probe.FileID
	inodes    uint64 // files uploaded so far
	destroyed bool
	// inspectErr is what Inspect fails with while the sandbox exists
	// (an engine that cannot read it back).
	inspectErr error
	// The writer's looks (--lines, --resolve-sh): where sh resolves
	// ("/usr/bin/dash" unless set), and the snapshot's time (zero unless
	// now is set). A --lines file without an identity (ids) is the task
	// user's, 0644.
	sh  string
	now func() time.Time
}

// newMemSandbox is a sandbox holding files, with the image's tree taken
// as they are.
func newMemSandbox(files map[string]string) *memSandbox {
	m := &memSandbox{files: map[string]string{}, image: map[string]string{}, unreported: map[string]bool{}, unreadable: map[string]string{},
		execs: map[string]func(provider.ExecSpec) (provider.ExecResult, error){}}
	for p, c := range files {
		m.files[p], m.image[p] = c, c
	}
	return m
}

func (m *memSandbox) ID() string { return "mem" }

// Exec runs a scripted exec, or the probe's snapshot over the sandbox's
// state; anything else exits 127.
func (m *memSandbox) Exec(_ context.Context, spec provider.ExecSpec) (provider.ExecResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, fn := range m.execs {
		if w := strings.Fields(k); len(spec.Argv) >= len(w) && slices.Equal(spec.Argv[:len(w)], w) {
			return fn(spec)
		}
	}
	if len(spec.Argv) < 2 || spec.Argv[0] != probePath || spec.Argv[1] != "snapshot" {
		return provider.ExecResult{ExitCode: 127, Stderr: []byte(fmt.Sprintf("mem sandbox: no script for %q", spec.Argv))}, nil
	}
	out, err := json.Marshal(m.probeLocked(spec.Argv))
	return provider.ExecResult{Stdout: out}, err
}

// probeLocked is what `probe snapshot` with argv prints: the markers
// hashed, and the Detail the table's processes carry kept only for the
// uids --detail-uids names (the probe reads no other).
func (m *memSandbox) probeLocked(argv []string) probe.Snapshot {
	var paths []string
	if i := slices.Index(argv, "--markers"); i >= 0 && i+1 < len(argv) {
		paths = strings.Split(argv[i+1], ",")
	}
	var uids []string
	if i := slices.Index(argv, "--detail-uids"); i >= 0 && i+1 < len(argv) {
		uids = strings.Split(argv[i+1], ",")
	}
	s := m.snapshotLocked(paths)
	s.Present = m.presentLocked(argv)
	m.linesLocked(&s, argv)
	for i, p := range s.Processes {
		if !slices.Contains(uids, fmt.Sprint(p.UID)) {
			s.Processes[i].Detail = nil
		}
	}
	return s
}

// linesLocked adds the probe's --lines and --resolve-sh answers in argv
// to s, and its time when the sandbox has a clock.
func (m *memSandbox) linesLocked(s *probe.Snapshot, argv []string) {
	if m.now != nil {
		s.TakenAt = m.now()
	}
	if slices.Contains(argv, "--resolve-sh") {
		s.Sh = cmp.Or(m.sh, "/usr/bin/dash")
	}
	i := slices.Index(argv, "--lines")
	if i < 0 || i+1 >= len(argv) {
		return
	}
	for j, mk := range s.Markers {
		c, ok := m.files[mk.Path]
		if !ok || mk.Error != "" || mk.OverCap || !slices.Contains(strings.Split(argv[i+1], ","), mk.Path) {
			continue
		}
		if mk.File == nil {
			s.Markers[j].File = &probe.FileID{UID: 1000, GID: 1000, Dev: 77, Inode: 999, Mode: syscall.S_IFREG | 0o644}
		}
		lines := strings.Split(c, "\n")
		s.Markers[j].Lines = len(lines) - 1
		if len(lines) > 1 {
			s.Markers[j].LastLine = lines[len(lines)-2]
		}
	}
}

// presentLocked is the probe's --present answer in argv: each path there
// or missing, never hashed.
func (m *memSandbox) presentLocked(argv []string) []probe.Marker {
	i := slices.Index(argv, "--present")
	if i < 0 || i+1 >= len(argv) {
		return nil
	}
	var out []probe.Marker
	for _, p := range strings.Split(argv[i+1], ",") {
		c, ok := m.files[p]
		out = append(out, probe.Marker{Path: p, Missing: !ok, Size: int64(len(c))})
	}
	return out
}

// snapshotLocked is what the probe would print: each path asked for
// hashed (or missing, or over the probe's cap), the process table with
// the probe in it.
func (m *memSandbox) snapshotLocked(paths []string) probe.Snapshot {
	s := probe.Snapshot{Schema: probe.Schema, MaxHash: probe.MaxMarkerBytes, OS: m.os, Bash: m.bash, Python3: m.python3, Self: m.self, Processes: slices.Clone(m.procs)}
	if m.self.PID != 0 {
		s.Processes = append(s.Processes, probe.Process{PID: m.self.PID, StartTime: m.self.StartTime, Comm: "probe", State: "R"})
	}
	for _, p := range paths {
		c, ok := m.files[p]
		switch {
		case m.unreported[p]:
			continue
		case m.unreadable[p] != "":
			s.Markers = append(s.Markers, probe.Marker{Path: p, Error: m.unreadable[p]})
			continue
		case !ok:
			s.Markers = append(s.Markers, probe.Marker{Path: p, Missing: true})
			continue
		}
		var id *probe.FileID
		if fid, ok := m.ids[p]; ok {
			id = &fid
		}
		if len(c) > probe.MaxMarkerBytes {
			// As the probe's bounded reader: over its cap, not hashed.
			s.Markers = append(s.Markers, probe.Marker{Path: p, Size: int64(len(c)), OverCap: true, File: id})
			continue
		}
		sum := sha256.Sum256([]byte(c))
		s.Markers = append(s.Markers, probe.Marker{Path: p, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(c)), File: id})
	}
	return s
}

func (m *memSandbox) Fetch(_ context.Context, p, hostPath string, _ provider.FetchLimits) (provider.Fetched, error) {
	m.mu.Lock()
	data, ok := m.files[p]
	m.mu.Unlock()
	if !ok {
		return provider.Fetched{}, fmt.Errorf("fetch %q: %w", p, provider.ErrPathNotFound)
	}
	return provider.Fetched{}, os.WriteFile(hostPath, []byte(data), 0o600)
}

func (m *memSandbox) Download(ctx context.Context, p, hostPath string) error {
	_, err := m.Fetch(ctx, p, hostPath, provider.FetchLimits{})
	return err
}

// Upload writes p as a new file of uid:gid with mode (another inode than
// any before it), as an engine's copy does.
func (m *memSandbox) Upload(_ context.Context, p string, r io.Reader, _ int64, mode os.FileMode, uid, gid int) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m.write(p, string(b))
	m.mu.Lock()
	m.inodes++
	ino := m.inodes
	m.mu.Unlock()
	m.identify(p, probe.FileID{UID: uint32(uid), GID: uint32(gid), Dev: 77, Inode: 1000 + ino, Mode: syscall.S_IFREG | uint32(mode.Perm())})
	return nil
}

func (m *memSandbox) Mkdir(context.Context, string, os.FileMode, int, int) error { return nil }

func (m *memSandbox) Inspect(context.Context) (provider.Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inspectErr != nil && !m.destroyed {
		return provider.Info{}, m.inspectErr
	}
	return provider.Info{ID: "mem", Exists: !m.destroyed, Running: !m.destroyed}, nil
}

func (m *memSandbox) Destroy(context.Context) error {
	m.mu.Lock()
	m.destroyed = true
	m.mu.Unlock()
	return nil
}

// write and remove change the tree (what a harness would do).
func (m *memSandbox) write(p, content string) {
	m.mu.Lock()
	m.files[p] = content
	m.mu.Unlock()
}

func (m *memSandbox) remove(p string) {
	m.mu.Lock()
	delete(m.files, p)
	delete(m.ids, p)
	m.mu.Unlock()
}

// identify gives the file p the identity id (its owner, inode and mode),
// as the probe would fstat it.
func (m *memSandbox) identify(p string, id probe.FileID) {
	m.mu.Lock()
	if m.ids == nil {
		m.ids = map[string]probe.FileID{}
	}
	m.ids[p] = id
	m.mu.Unlock()
}

// spawn adds a process to the table.
func (m *memSandbox) spawn(p probe.Process) {
	m.mu.Lock()
	m.procs = append(m.procs, p)
	m.mu.Unlock()
}

// changes is the tree's diff against the image: added, modified and
// deleted files, then the extra entries.
func (m *memSandbox) changes() []provider.Change {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []provider.Change
	for p, c := range m.files {
		switch was, ok := m.image[p]; {
		case !ok:
			out = append(out, provider.Change{Path: p, Kind: provider.ChangeAdded})
		case was != c:
			out = append(out, provider.Change{Path: p, Kind: provider.ChangeModified})
		}
	}
	for p := range m.image {
		if _, ok := m.files[p]; !ok {
			out = append(out, provider.Change{Path: p, Kind: provider.ChangeDeleted})
		}
	}
	slices.SortFunc(out, func(a, b provider.Change) int { return strings.Compare(a.Path, b.Path) })
	return append(out, m.extraChanges...)
}

// memDiffer is a memSandbox that reports its diff (a provider.Differ);
// the bare memSandbox is a provider that cannot.
type memDiffer struct{ *memSandbox }

func (d memDiffer) Changes(context.Context) ([]provider.Change, string, error) {
	if d.diffErr != nil {
		return nil, "", d.diffErr
	}
	return d.changes(), "mem", nil
}

// Start runs a scripted exec as a streamed one (the probe's setup run
// that becomes the agent): its stdin is what the host writes, its stdout
// what the script printed, then EOF (no agent follows in memory).
func (m *memSandbox) Start(ctx context.Context, spec provider.ExecSpec, stderr io.Writer) (*provider.Process, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan provider.ExecResult, 1)
	go func() {
		spec.Stdin = inR
		res, err := m.Exec(ctx, spec)
		if err != nil {
			res.ExitCode = 126
		}
		if stderr != nil {
			stderr.Write(res.Stderr)
		}
		outW.Write(res.Stdout)
		outW.Close()
		done <- res
	}()
	return &provider.Process{Stdin: inW, Stdout: outR, Wait: func() (int, error) { return (<-done).ExitCode, nil }}, nil
}
