// Package session is the host side of one adapter in one sandbox (contract
// §6): seed (upload or place warden, verify its sha256 inside the sandbox,
// create the adapter's private session dir, provide bash privately, run the
// adapter's install under warden), activate (launch the harness under
// `warden supervise --detach --lease`, join or replay the same activation
// id, never run it twice), close (stop, require a confirmed receipt,
// download the captures, remove the session dir) and release (destroy an
// owned sandbox, leave a borrowed one).
//
// Layout inside the sandbox, under BaseDir (default /var/lib/sandproof,
// outside the task's HOME and XDG dirs; the verifier allows it in its
// filesystem diff):
//
//	BaseDir/SESSION/          root 0755
//	    bin/warden            verified by sha256 in the sandbox (uploaded, or placed by the probe from Binaries.WardenAt)
//	    bin/bash              bash-static, only when the adapter needs bash and the image has none
//	    bin/rmtree            the optional removal helper (when the sandbox has no session agent)
//	    tools/probe           the hashing witness
//	    home/                 the adapter's private HOME, owned by the harness user
//	    state/ID/             warden's state dir per launch (root only: the harness cannot rewrite its receipt)
//	    run/ID/               params.json, events.jsonl, stderr.log, owned by the harness user
//	    seeded                written last by seed; a session without it is refused
//
// Every provider failure is returned wrapped, so errors.As finds the
// *provider.ProviderError and certify stops the case instead of verifying.
package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/warden/harness"
	"github.com/sandproof/sandproof/runner/warden/launch"
	"github.com/sandproof/sandproof/runner/warden/receipt"
)

// DefaultBaseDir is the parent of every session dir.
const DefaultBaseDir = "/var/lib/sandproof"

// TaskDir is the task dir every case's sandbox has (adapter.Context's
// TaskDir): it holds what the harness was asked to change, so no scratch
// path an adapter names may lie at or below it. Its one home is here,
// beside DefaultBaseDir, where certify, adapter and the suite all look.
const TaskDir = "/task"

// Errors callers branch on.
var (
	// ErrNotSeeded refuses access to a session whose seed did not finish
	// (or failed): nothing in it can be trusted.
	ErrNotSeeded = errors.New("session not seeded")
	// ErrClosed refuses an activation after close.
	ErrClosed = errors.New("session closed")
	// ErrBadDeadline refuses a non-finite, non-positive or too large
	// deadline before anything is launched.
	ErrBadDeadline = errors.New("bad deadline")
	// ErrBadID refuses an activation or session id warden would refuse.
	ErrBadID = errors.New("bad id")
	// ErrHashMismatch means the warden (or bash) in the sandbox is not the
	// file the host uploaded.
	ErrHashMismatch = errors.New("sha256 mismatch in the sandbox")
	// ErrCannotVerify means the sandbox offers no way to hash a file (no
	// probe given, no sha256sum in the image).
	ErrCannotVerify = errors.New("cannot verify sha256 in the sandbox")
	// ErrNoBinary means no build was given for the sandbox's arch.
	ErrNoBinary = errors.New("no binary for the sandbox's architecture")
	// ErrSupervisorGone means the supervisor died without a receipt
	// (warden exit 4): SIGKILL or OOM inside the sandbox.
	ErrSupervisorGone = errors.New("supervisor gone without a receipt")
	// ErrNoReceipt means no receipt appeared before the host's backstop.
	ErrNoReceipt = errors.New("no receipt before the host backstop")
	// ErrNotConfirmed means a receipt did not confirm cleanup.
	ErrNotConfirmed = errors.New("cleanup not confirmed")
	// ErrInstallFailed means the adapter's install step did not exit 0.
	ErrInstallFailed = errors.New("adapter install failed")
	// ErrNotRemoved means the session dir is still there after close.
	ErrNotRemoved = errors.New("session dir not removed")
)

// Binaries are host paths of the static builds to upload, by GOARCH.
type Binaries struct {
	Warden map[string]string
	// Probe hashes warden inside the sandbox (`probe snapshot --markers`).
	// Without one, the image's sha256sum is used if it has one.
	Probe map[string]string
	// ProbeAt is the sandbox path of a probe build the sandbox already
	// holds read-only (certify's owner volume), by GOARCH: used in place
	// of uploading Probe's build, whose bytes are then not sent (they
	// were most of seed's one transfer after warden's). The caller
	// vouches that it is the same build.
	ProbeAt map[string]string
	// WardenAt is the sandbox path of a warden build the sandbox already
	// holds read-only (certify's owner volume), by GOARCH: seed places it
	// at bin/warden with a copy inside the sandbox (the probe's, in the
	// run that then hashes the placed file) instead of uploading Warden's
	// 3.5 MB for every session. Warden's build is still required: its
	// sha256 is what the placed file must have (ErrHashMismatch if the
	// sandbox's copy is another build). Used only with a probe (Probe or
	// ProbeAt); without one warden is uploaded.
	WardenAt map[string]string
	// Bash is a static bash (Debian's bash-static), uploaded when the
	// adapter needs bash and the image has none.
	Bash map[string]string
	// Rmtree is the optional removal helper (runner/rmtree, the
	// confined primitive runner/confine), used at close when the
	// sandbox is not the session agent's (provider.Remover). With
	// neither, close removes the scratch with the image's sh and rm as
	// the harness's user and leaves the session dir (ErrNotRemoved):
	// root never removes by path.
	Rmtree map[string]string
}

// Env is what an adapter sees when it builds a launch. Paths are as the
// processes in the sandbox see them.
type Env struct {
	SessionID string
	Dir       string // the session dir
	Bin       string // private bin (warden, bash when provided)
	Home      string // the adapter's private home
	RunDir    string // this launch's outputs dir
	Prompt    string
	// BashProvided is set when bash came from the session's bin.
	BashProvided bool
}

// Step is a launch an adapter asks for: what to run and its deadline.
type Step struct {
	Params   harness.Params
	Deadline float64 // seconds
}

// Capture is a file the adapter declares for download at close. Path is
// absolute in the sandbox (without any provider prefix).
type Capture struct {
	Path string
	// SQLite also downloads Path-wal, Path-shm and Path-journal when they
	// exist: rows written after the last checkpoint live in the -wal file.
	SQLite bool
	// Optional captures may be missing without making close fail.
	Optional bool
}

// Adapter is what the session needs from a harness adapter.
type Adapter struct {
	Name      string
	NeedsBash bool
	// Files are uploaded under the session dir before install; the key
	// is the path relative to the session dir.
	Files map[string]File
	// Dirs are made under the session dir in the same transfer, owned by
	// the harness user with mode 0700, each missing parent too (the
	// harness's private state dirs under the session's home, say); the
	// paths are relative to the session dir.
	Dirs []string
	// Install, when set, is run once under warden during seed.
	Install func(Env) (Step, error)
	// Launch builds the activation's params from the prompt. Mode,
	// Events, Stdout and Stderr left empty are filled in: events mode,
	// RunDir/events.jsonl, RunDir/stderr.log.
	Launch func(Env) (harness.Params, error)
	// Captures returns the files to download at close.
	Captures func(Env) []Capture
	// Scratch are absolute paths outside the session dir the harness
	// writes and the adapter owns, a glob only in the last element (the
	// manifest's parse refuses any that could reach the task or the
	// system): close removes their matches after the captures.
	Scratch []string
}

// File is a host file or bytes to upload.
type File struct {
	HostPath string
	Data     []byte
	Mode     os.FileMode
}

// Config configures a session.
type Config struct {
	// ID is the session id; "" means random.
	ID string
	// BaseDir is the parent of session dirs; "" means DefaultBaseDir.
	BaseDir  string
	Binaries Binaries
	// User runs the harness as "UID[:GID]" (numeric); "" means the user
	// the provider's exec runs as (which also runs warden).
	User string
	// Lease is the supervisor's lease; zero means 30 s. It is renewed
	// every third of it for as long as the session is open. 30 s, not
	// 10: in a loaded make certify two cases' renewals all failed for 10 s
	// at the same moment and both healthy launches ended with cause lease.
	Lease time.Duration
	// Grace is the TERM-to-KILL grace of every stop; zero means 2 s.
	Grace time.Duration
	// Slice is how long one `warden wait` blocks; zero means 2 s.
	Slice time.Duration
	// Owned says the session created the sandbox and release destroys
	// it. A borrowed sandbox (false) is left to its owner.
	Owned bool
	// CaptureDir is the host directory captures are downloaded into.
	CaptureDir string
	// CaptureLimits bound what close downloads, all captures together
	// sharing one byte budget and one entry budget; zero fields mean
	// provider's defaults (fresh DefaultCaseBytes and DefaultCaseEntries
	// budgets for the close). Its Confined and User are close's own.
	CaptureLimits provider.FetchLimits
	// UnconfinedCaptures, set, lets close download as the provider does
	// (the docker engine's archive resolves links above a path in the
	// container and reads as root; the local provider reads by name):
	// only for a harness the caller trusts, such as a suite's own
	// fixture. Unset, every capture is a confined read (no link
	// followed at any component; the harness's own files and run dirs
	// read with User's ids, the state dirs with the provider's), and a
	// sandbox that cannot do one (provider.ErrUnconfined) fails the
	// capture rather than follow: certify's session agent can.
	UnconfinedCaptures bool
}

type phase int

const (
	phaseNew phase = iota
	phaseSeeding
	phaseSeeded
	phaseBroken
	phaseClosed
)

// Session is one adapter in one sandbox.
type Session struct {
	sb      provider.Sandbox
	adapter Adapter
	cfg     Config
	id      string
	dir     string // sandbox path
	prefix  string // host-side prefix of sandbox paths (local provider)
	uid     int
	gid     int
	arch    string

	bashProvided bool
	// seededHere is set when this handle's Seed made the session dir, so
	// no launch of this process's ids can predate it (see launch).
	seededHere bool
	installRan bool // the install step was launched
	wardenSHA  string
	seedDur    time.Duration

	mu       sync.Mutex
	phase    phase
	acts     map[string]*activation
	leases   map[string]bool // state dirs being renewed
	renewing bool
	stopRenw chan struct{}
	renewWG  sync.WaitGroup
	closeRes *CloseResult
	closeErr error
}

// New prepares a session on sb; nothing in the sandbox changes until Seed.
func New(sb provider.Sandbox, adapter Adapter, cfg Config) (*Session, error) {
	if cfg.ID == "" {
		var b [8]byte
		rand.Read(b[:])
		cfg.ID = "s-" + hex.EncodeToString(b[:])
	}
	if !launch.ValidID(cfg.ID) {
		return nil, fmt.Errorf("new session: id %q: %w (want [A-Za-z0-9._-]{1,64})", cfg.ID, ErrBadID)
	}
	if cfg.BaseDir == "" {
		cfg.BaseDir = DefaultBaseDir
	}
	if !path.IsAbs(cfg.BaseDir) {
		return nil, fmt.Errorf("new session: base dir %q: not absolute", cfg.BaseDir)
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 2 * time.Second
	}
	if cfg.Slice <= 0 {
		cfg.Slice = 2 * time.Second
	}
	if cfg.CaptureDir == "" {
		return nil, errors.New("new session: CaptureDir is required (captures are kept on the host)")
	}
	uid, gid, err := parseUser(cfg.User)
	if err != nil {
		return nil, err
	}
	if adapter.Launch == nil {
		return nil, fmt.Errorf("new session: adapter %q has no Launch", adapter.Name)
	}
	return &Session{
		sb: sb, adapter: adapter, cfg: cfg, id: cfg.ID,
		dir: path.Join(cfg.BaseDir, cfg.ID), uid: uid, gid: gid,
		acts: map[string]*activation{}, leases: map[string]bool{},
		stopRenw: make(chan struct{}),
	}, nil
}

func parseUser(u string) (int, int, error) {
	if u == "" {
		return 0, 0, nil
	}
	us, gs, ok := strings.Cut(u, ":")
	uid, err := strconv.Atoi(us)
	gid := uid
	if err == nil && ok {
		gid, err = strconv.Atoi(gs)
	}
	if err != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("new session: user %q: want UID[:GID], numeric", u)
	}
	return uid, gid, nil
}

// ID is the session id.
func (s *Session) ID() string { return s.id }

// Dir is the session dir as a sandbox path.
func (s *Session) Dir() string { return s.dir }

// HostPath is p as the processes in the sandbox see it (the provider's
// prefix in front; the same path for a container).
func (s *Session) HostPath(p string) string { return s.prefix + p }

// SeedDuration is how long Seed took.
func (s *Session) SeedDuration() time.Duration { return s.seedDur }

// WardenSHA256 is the hash of the warden build uploaded and verified.
func (s *Session) WardenSHA256() string { return s.wardenSHA }

func (s *Session) x(p string) string { return s.prefix + p }

func (s *Session) env(runDir, prompt string) Env {
	return Env{
		SessionID: s.id, Dir: s.x(s.dir), Bin: s.x(path.Join(s.dir, "bin")),
		Home: s.x(path.Join(s.dir, "home")), RunDir: s.x(runDir), Prompt: prompt,
		BashProvided: s.bashProvided,
	}
}

// Seed prepares the session. It may be called once; on failure the session
// is broken: Activate refuses it, Close still cleans up what it can.
func (s *Session) Seed(ctx context.Context) (err error) {
	s.mu.Lock()
	if s.phase != phaseNew {
		s.mu.Unlock()
		return fmt.Errorf("seed session %s: already seeded or seeding", s.id)
	}
	s.phase = phaseSeeding
	s.mu.Unlock()
	start := time.Now()
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.seedDur = time.Since(start)
		if err != nil {
			s.phase = phaseBroken
			err = fmt.Errorf("seed session %s: %w", s.id, err)
			return
		}
		s.phase = phaseSeeded
	}()
	s.seededHere = true
	return s.seed(ctx)
}

// seed is Seed's steps in order: upload the tree, verify what was
// uploaded, run the install, write the seeded marker last.
func (s *Session) seed(ctx context.Context) error {
	wardenHost, err := s.inspectSandbox(ctx)
	if err != nil {
		return err
	}
	// One transfer for the whole tree: the dirs, warden (unless the
	// sandbox holds a build to place), the probe (unless the sandbox holds
	// one), the removal helper and the adapter's files. Every round trip
	// to the engine costs more than the bytes.
	entries, probePath, wardenFrom := seedTree{
		dir: s.dir, uid: s.uid, gid: s.gid, arch: s.arch, warden: wardenHost,
		bins: s.cfg.Binaries, dirs: s.adapter.Dirs, files: s.adapter.Files,
	}.entries()
	// The install step's run dir and params go in the same transfer (one
	// round trip less); they are made again if bash has to be provided,
	// which changes the params' path_prefix.
	install, pe, err := s.installEntries()
	if err != nil {
		return err
	}
	entries = append(entries, pe...)
	if err := provider.Put(ctx, s.sb, entries); err != nil {
		return fmt.Errorf("upload the session tree: %w", err)
	}
	wardenPath := path.Join(s.dir, "bin", "warden")
	expect := map[string]string{wardenPath: s.wardenSHA}

	// One probe run places warden when it comes from inside the sandbox,
	// tells whether the image has bash and hashes warden (the placed
	// file); a second one only when bash had to be provided.
	var place []string
	if wardenFrom != "" {
		place = []string{wardenFrom, wardenPath}
	}
	snap, err := s.inspectImage(ctx, probePath, place, wardenPath)
	if err != nil {
		return err
	}
	if s.adapter.NeedsBash && !snap.hasBash {
		if install, err = s.provideBash(ctx, expect); err != nil {
			return err
		}
	}
	if err := s.verify(ctx, snap, expect); err != nil {
		return err
	}
	if res, err := s.warden(ctx, "--version"); err != nil {
		return err
	} else if res.ExitCode != 0 {
		return fmt.Errorf("run warden --version in the sandbox: exit %d: %s", res.ExitCode, firstLine(res.Stderr))
	}
	if err := s.runInstall(ctx, install); err != nil {
		return err
	}
	marker, _ := json.Marshal(map[string]string{"session": s.id, "adapter": s.adapter.Name, "warden_sha256": s.wardenSHA})
	return provider.UploadBytes(ctx, s.sb, marker, path.Join(s.dir, "seeded"), 0o644, 0, 0)
}

// inspectSandbox learns the sandbox's arch and path prefix, and picks and
// hashes the warden build for that arch; it returns warden's host path.
func (s *Session) inspectSandbox(ctx context.Context) (string, error) {
	info, err := s.sb.Inspect(ctx)
	if err != nil {
		return "", err
	}
	if !info.Exists || !info.Running {
		return "", provider.Errorf("seed", s.sb.ID(), provider.ErrGone)
	}
	s.arch, s.prefix = info.Arch, info.PathPrefix
	wardenHost, err := s.pick("warden", s.cfg.Binaries.Warden)
	if err != nil {
		return "", err
	}
	if s.wardenSHA, err = hashHostFile(wardenHost); err != nil {
		return "", err
	}
	return wardenHost, nil
}

// pick is the build for the sandbox's arch in m.
func (s *Session) pick(what string, m map[string]string) (string, error) {
	if p, ok := m[s.arch]; ok {
		return p, nil
	}
	return "", fmt.Errorf("pick %s for arch %q: %w", what, s.arch, ErrNoBinary)
}

// installEntries builds the adapter's install step (none without an
// Install) and the entries of its run dir and params.
func (s *Session) installEntries() (Step, []provider.Entry, error) {
	if s.adapter.Install == nil {
		return Step{}, nil, nil
	}
	installRun := path.Join(s.dir, "run", "install")
	install, err := s.adapter.Install(s.env(installRun, ""))
	if err != nil {
		return Step{}, nil, fmt.Errorf("build install step of %q: %w", s.adapter.Name, err)
	}
	pe, err := s.paramsEntries("install", installRun, install.Params)
	return install, pe, err
}

// provideBash uploads the static bash for an adapter that needs bash in
// an image without one, with the install step rebuilt for it (returned),
// and adds its sha256 to expect.
func (s *Session) provideBash(ctx context.Context, expect map[string]string) (Step, error) {
	bashHost, err := s.pick("bash", s.cfg.Binaries.Bash)
	if err != nil {
		return Step{}, fmt.Errorf("adapter %q needs bash and the image has none: %w", s.adapter.Name, err)
	}
	bashPath := path.Join(s.dir, "bin", "bash")
	s.bashProvided = true
	install, pe, err := s.installEntries()
	if err != nil {
		return Step{}, err
	}
	put := append([]provider.Entry{{Path: bashPath, HostPath: bashHost, Mode: 0o755}}, pe...)
	if err := provider.Put(ctx, s.sb, put); err != nil {
		return Step{}, err
	}
	sum, err := hashHostFile(bashHost)
	if err != nil {
		return Step{}, err
	}
	expect[bashPath] = sum
	return install, nil
}

// runInstall runs the adapter's install step under warden, when it has
// one; anything but a confirmed exit 0 fails the seed.
func (s *Session) runInstall(ctx context.Context, install Step) error {
	if s.adapter.Install == nil {
		return nil
	}
	s.installRan = true
	r, err := s.launch(ctx, "install", install.Params, install.Deadline, true)
	if err != nil {
		return fmt.Errorf("install %q: %w", s.adapter.Name, err)
	}
	if !r.Receipt.CleanupConfirmed || r.Receipt.ReturnCode == nil || *r.Receipt.ReturnCode != 0 {
		// Say why when warden's runner says it (a CLI that could not
		// be started, say): one download, on the failure path only.
		return &ReceiptError{Launch: "install", Receipt: r.Receipt, Err: ErrInstallFailed,
			Said: s.runnerSaid(ctx, path.Join(s.dir, "state", "install"))}
	}
	return nil
}

// seedTree is what the session tree is built from: the session dir, the
// harness user's ids, the sandbox's arch, warden's host path (picked for
// that arch), the other builds by arch and the adapter's dirs and files.
type seedTree struct {
	dir      string
	uid, gid int
	arch     string
	warden   string
	bins     Binaries
	dirs     []string
	files    map[string]File
}

// entries is the tree as one transfer, in the order it is made: the
// session's own dirs, warden (unless the sandbox holds a build and there
// is a probe to place it, WardenAt), the probe (unless the sandbox holds
// one, ProbeAt) and the removal helper when there is a build for the arch,
// each adapter dir with its missing parents
// (once each), then the adapter's files sorted by path. probe is the
// probe's sandbox path, "" when there is none; wardenFrom is the sandbox
// path the probe places bin/warden from, "" when warden is in entries.
func (t seedTree) entries() (entries []provider.Entry, probe, wardenFrom string) {
	entries = []provider.Entry{{Path: t.dir, Dir: true, Mode: 0o755}}
	for _, d := range []string{"bin", "tools", "state", "run"} {
		entries = append(entries, provider.Entry{Path: path.Join(t.dir, d), Dir: true, Mode: 0o755})
	}
	entries = append(entries, provider.Entry{Path: path.Join(t.dir, "home"), Dir: true, Mode: 0o700, UID: t.uid, GID: t.gid})
	var probeEntry []provider.Entry
	if at, ok := t.bins.ProbeAt[t.arch]; ok {
		probe = at
	} else if probeHost, ok := t.bins.Probe[t.arch]; ok {
		probe = path.Join(t.dir, "tools", "probe")
		probeEntry = []provider.Entry{{Path: probe, HostPath: probeHost, Mode: 0o755}}
	}
	if at, ok := t.bins.WardenAt[t.arch]; ok && probe != "" {
		wardenFrom = at
	} else {
		entries = append(entries, provider.Entry{Path: path.Join(t.dir, "bin", "warden"), HostPath: t.warden, Mode: 0o755})
	}
	entries = append(entries, probeEntry...)
	if rm, ok := t.bins.Rmtree[t.arch]; ok {
		entries = append(entries, provider.Entry{Path: path.Join(t.dir, "bin", "rmtree"), HostPath: rm, Mode: 0o755})
	}
	entries = t.adapterDirs(entries)
	return append(entries, t.adapterFiles()...), probe, wardenFrom
}

// adapterDirs appends each adapter dir below the session dir, and each of
// its parents not already in entries, owned by the harness user, 0700.
// A dir is cleaned as if absolute, so ".." never climbs out.
func (t seedTree) adapterDirs(entries []provider.Entry) []provider.Entry {
	made := map[string]bool{}
	for _, e := range entries {
		made[e.Path] = true
	}
	for _, d := range t.dirs {
		rel := path.Clean("/" + d)
		p := t.dir
		for _, part := range strings.Split(strings.TrimPrefix(rel, "/"), "/") {
			if part == "" {
				continue
			}
			p = path.Join(p, part)
			if !made[p] {
				made[p] = true
				entries = append(entries, provider.Entry{Path: p, Dir: true, Mode: 0o700, UID: t.uid, GID: t.gid})
			}
		}
	}
	return entries
}

// adapterFiles are the adapter's files below the session dir, sorted by
// path, owned by the harness user; a zero mode is 0644, and a file given
// neither a host path nor data is empty.
func (t seedTree) adapterFiles() []provider.Entry {
	rels := make([]string, 0, len(t.files))
	for rel := range t.files {
		rels = append(rels, rel)
	}
	slices.Sort(rels)
	var entries []provider.Entry
	for _, rel := range rels {
		f := t.files[rel]
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		e := provider.Entry{Path: path.Join(t.dir, path.Clean("/"+rel)), Mode: mode, UID: t.uid, GID: t.gid}
		if f.HostPath != "" {
			e.HostPath = f.HostPath
		} else {
			e.Data = f.Data
			if e.Data == nil {
				e.Data = []byte{}
			}
		}
		entries = append(entries, e)
	}
	return entries
}

// imageFacts is what seed learns from the probe.
type imageFacts struct {
	hasBash bool
	probe   string // sandbox path of the uploaded probe, "" if none
	// hashed holds the sha256 the probe found, by sandbox path.
	hashed map[string]string
}

// inspectImage asks the probe (when there is one) whether the image has
// bash, hashing the given files in the same run, after copying place[0]
// to place[1] when place is given (warden from the sandbox's own build).
// Without a probe, bash is looked for by running it.
func (s *Session) inspectImage(ctx context.Context, probe string, place []string, hash ...string) (imageFacts, error) {
	f := imageFacts{probe: probe, hashed: map[string]string{}}
	if probe != "" {
		snap, err := s.snapshot(ctx, probe, place, hash)
		if err != nil {
			return f, err
		}
		f.hasBash = snap.Bash != nil
		for _, m := range snap.Markers {
			f.hashed[strings.TrimPrefix(m.Path, s.prefix)] = m.SHA256
		}
		return f, nil
	}
	res, err := s.sb.Exec(ctx, provider.ExecSpec{Argv: []string{"bash", "-c", "exit 0"}})
	if err != nil {
		return f, err
	}
	f.hasBash = res.ExitCode == 0
	return f, nil
}

// seedHashBytes is the most the probe reads of a file seed hashes: warden
// and a static bash are a few MiB each; a build past it is not hashed,
// and seed fails on its hash.
const seedHashBytes = 64 << 20

type probeSnapshot struct {
	Bash    *json.RawMessage `json:"-"`
	BashRaw json.RawMessage  `json:"bash"`
	Markers []struct {
		Path    string `json:"path"`
		Missing bool   `json:"missing"`
		SHA256  string `json:"sha256"`
		Error   string `json:"error"`
	} `json:"markers"`
}

// snapshot runs the probe's snapshot hashing markers, after copying
// place[0] to place[1] inside the sandbox when place is given.
func (s *Session) snapshot(ctx context.Context, probe string, place, markers []string) (*probeSnapshot, error) {
	// --no-exec: seed only needs to know where bash is and to hash files;
	// it must not start the image's python3 or bash (tripwire specs).
	// The files it hashes are sandproof's own builds, over the probe's
	// default cap for a marker: --max-hash raises it to seedHashBytes.
	argv := []string{s.x(probe), "snapshot", "--no-exec", "--max-hash", strconv.Itoa(seedHashBytes)}
	if len(place) == 2 {
		argv = append(argv, "--place", s.x(place[0])+","+s.x(place[1]))
	}
	if len(markers) > 0 {
		xs := make([]string, len(markers))
		for i, m := range markers {
			xs[i] = s.x(m)
		}
		argv = append(argv, "--markers", strings.Join(xs, ","))
	}
	res, err := s.sb.Exec(ctx, provider.ExecSpec{Argv: argv, User: "0"})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("run probe snapshot: exit %d: %s", res.ExitCode, firstLine(res.Stderr))
	}
	var snap probeSnapshot
	if err := json.Unmarshal(res.Stdout, &snap); err != nil {
		return nil, fmt.Errorf("decode probe snapshot: %w", err)
	}
	// The probe writes an absent tool as the string "none".
	if len(snap.BashRaw) > 0 && string(snap.BashRaw) != `"none"` && string(snap.BashRaw) != "null" {
		snap.Bash = &snap.BashRaw
	}
	return &snap, nil
}

// verify hashes the uploaded files inside the sandbox, with the probe or
// the image's sha256sum, never with warden itself (a bad build would vouch
// for itself).
func (s *Session) verify(ctx context.Context, f imageFacts, expect map[string]string) error {
	got := map[string]string{}
	var paths []string
	for p := range expect {
		paths = append(paths, p)
	}
	if f.probe != "" {
		var more []string
		for _, p := range paths {
			if sum, ok := f.hashed[p]; ok {
				got[p] = sum
			} else {
				more = append(more, p)
			}
		}
		if len(more) > 0 {
			snap, err := s.snapshot(ctx, f.probe, nil, more)
			if err != nil {
				return err
			}
			for _, m := range snap.Markers {
				got[strings.TrimPrefix(m.Path, s.prefix)] = m.SHA256
			}
		}
	} else {
		for _, p := range paths {
			res, err := s.sb.Exec(ctx, provider.ExecSpec{Argv: []string{"sha256sum", s.x(p)}, User: "0"})
			if err != nil {
				return err
			}
			if res.ExitCode == 127 {
				return fmt.Errorf("hash %q: no probe given and no sha256sum in the image: %w", p, ErrCannotVerify)
			}
			if res.ExitCode != 0 {
				return fmt.Errorf("hash %q with sha256sum: exit %d: %s", p, res.ExitCode, firstLine(res.Stderr))
			}
			got[p], _, _ = strings.Cut(strings.TrimSpace(string(res.Stdout)), " ")
		}
	}
	for p, want := range expect {
		if got[p] != want {
			return fmt.Errorf("verify %q: sandbox has sha256 %q, uploaded %q: %w", p, got[p], want, ErrHashMismatch)
		}
	}
	return nil
}

func hashHostFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("hash %q: %w", p, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %q: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func firstLine(b []byte) string {
	l, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return strconv.Quote(l)
}

// checkDeadline refuses what warden would refuse, before anything runs.
func checkDeadline(d float64) (string, error) {
	if math.IsNaN(d) || math.IsInf(d, 0) || d <= 0 || d > 31536000 {
		return "", fmt.Errorf("deadline %v: %w (want finite seconds in (0, 31536000])", d, ErrBadDeadline)
	}
	return strconv.FormatFloat(d, 'f', -1, 64), nil
}

// ReceiptError carries the receipt behind a failure (not confirmed, install
// failed), so callers can record it.
type ReceiptError struct {
	Launch  string
	Receipt *receipt.Receipt
	Err     error
	// Said is the last line warden's runner wrote to the launch's
	// STATE/stderr ("warden: run: ..."), when there is one.
	Said string
}

func (e *ReceiptError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "launch %q: %v", e.Launch, e.Err)
	if r := e.Receipt; r != nil {
		fmt.Fprintf(&b, " (cause %s, cleanup_confirmed %t", r.Cause, r.CleanupConfirmed)
		if r.ReturnCode != nil {
			fmt.Fprintf(&b, ", return_code %d", *r.ReturnCode)
		}
		if len(r.Survivors) > 0 {
			fmt.Fprintf(&b, ", %d survivors", len(r.Survivors))
		}
		if r.Error != nil {
			fmt.Fprintf(&b, ", error %q", *r.Error)
		}
		b.WriteString(")")
	}
	if e.Said != "" {
		fmt.Fprintf(&b, ": %s", e.Said)
	}
	return b.String()
}

// runnerSaid returns the last line of a launch's STATE/stderr when it is
// warden's runner explaining its own failure, else "".
func (s *Session) runnerSaid(ctx context.Context, state string) string {
	data, err := provider.DownloadBytes(ctx, s.sb, path.Join(state, "stderr"))
	if err != nil {
		return ""
	}
	return RunnerSaid(data)
}

// RunnerSaid picks warden's runner's own last message ("warden: run: ...")
// out of a launch's STATE/stderr, cut to 400 bytes; "" when there is none.
func RunnerSaid(stderr []byte) string {
	lines := strings.Split(strings.TrimRight(string(stderr), "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := lines[i]; strings.HasPrefix(l, "warden: run: ") {
			if len(l) > 400 {
				l = l[:400] + "..."
			}
			return l
		}
	}
	return ""
}

func (e *ReceiptError) Unwrap() error { return e.Err }

// Open attaches to a session an earlier Seed finished (in this process or
// another one, such as a host that restarted): it reads the seeded marker
// and refuses a session without one (ErrNotSeeded). Activations joined or
// replayed through it never run twice.
func Open(ctx context.Context, sb provider.Sandbox, adapter Adapter, cfg Config) (*Session, error) {
	if cfg.ID == "" {
		return nil, fmt.Errorf("open session: %w (an id is required)", ErrBadID)
	}
	s, err := New(sb, adapter, cfg)
	if err != nil {
		return nil, err
	}
	info, err := sb.Inspect(ctx)
	if err != nil {
		return nil, err
	}
	if !info.Exists || !info.Running {
		return nil, provider.Errorf("open", sb.ID(), provider.ErrGone)
	}
	s.arch, s.prefix = info.Arch, info.PathPrefix
	data, err := provider.DownloadBytes(ctx, sb, path.Join(s.dir, "seeded"))
	if errors.Is(err, provider.ErrPathNotFound) {
		return nil, fmt.Errorf("open session %s: %w (no seeded marker in %s)", s.id, ErrNotSeeded, s.dir)
	}
	if err != nil {
		return nil, err
	}
	var marker struct {
		WardenSHA256 string `json:"warden_sha256"`
	}
	if err := json.Unmarshal(data, &marker); err != nil {
		return nil, fmt.Errorf("open session %s: read seeded marker: %w", s.id, err)
	}
	s.wardenSHA = marker.WardenSHA256
	if s.bashProvided, err = s.exists(ctx, path.Join(s.dir, "bin", "bash")); err != nil {
		return nil, err
	}
	s.phase = phaseSeeded
	return s, nil
}
