// Package provider is how the host reaches a sandbox: create one from an
// image, run commands in it, move files in and out, look at it and destroy
// it. The product's implementation is the docker sub-package; the local
// one, which runs a sandbox as a host directory, is test support
// (internal/testsupport/local); runner/host/agenthost's Sandbox wraps
// another's to run its operations through the session agent. The session
// (runner/host/session) only ever talks to this interface.
//
// The one rule every implementation keeps: a failure of the transport (the
// engine is unreachable, the container is gone or stopped, the sandbox root
// was removed) is returned as a *ProviderError and never as an exit status.
// A command that ran and exited non-zero is an ExecResult with a nil error.
// Certify stops a case on a ProviderError instead of verifying it: an exit
// status read from a dead container proves nothing.
package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// LabelKey is the label every sandbox this project creates carries, so a
// clean-up can find leftovers without touching anybody else's containers.
const LabelKey = "sandproof"

// Network modes. A bridge is never offered: sandboxes reach nothing but the
// host's loopback (the scripted model) or nothing at all.
const (
	NetworkNone = "none"
	NetworkHost = "host"
)

// Network checks a sandbox network mode and returns it with "" read as
// NetworkNone. It is the one place the allowed modes are decided: the CLI,
// certify and the Docker provider all ask it.
func Network(mode string) (string, error) {
	switch mode {
	case "":
		return NetworkNone, nil
	case NetworkNone, NetworkHost:
		return mode, nil
	}
	return "", fmt.Errorf("network %q: want %q or %q", mode, NetworkNone, NetworkHost)
}

// Errors callers branch on.
var (
	// ErrGone means the sandbox no longer exists or no longer runs. It is
	// always wrapped in a *ProviderError.
	ErrGone = errors.New("sandbox gone")
	// ErrPathNotFound means a path asked for by Download does not exist in
	// a sandbox that is itself fine. It is NOT a ProviderError.
	ErrPathNotFound = errors.New("path not found in sandbox")
)

// ProviderError is a transport failure: the request may not have reached the
// sandbox, or its answer cannot be trusted. Op names the operation ("exec",
// "upload", ...), Sandbox the id when one is known.
type ProviderError struct {
	Op      string
	Sandbox string
	Err     error
}

func (e *ProviderError) Error() string {
	if e.Sandbox == "" {
		return fmt.Sprintf("provider %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("provider %s %s: %v", e.Op, short(e.Sandbox), e.Err)
}

func (e *ProviderError) Unwrap() error { return e.Err }

// Errorf wraps err as a *ProviderError unless it already is one.
func Errorf(op, sandbox string, err error) error {
	if err == nil {
		return nil
	}
	var pe *ProviderError
	if errors.As(err, &pe) {
		return err
	}
	return &ProviderError{Op: op, Sandbox: sandbox, Err: err}
}

// IsProviderError reports whether err is (or wraps) a *ProviderError.
func IsProviderError(err error) bool {
	var pe *ProviderError
	return errors.As(err, &pe)
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// CreateSpec says how to create a sandbox.
type CreateSpec struct {
	// Image is an image reference ("sandproof/debian-12:e6bada4fee28", an
	// image id "sha256:..."). The local provider ignores it.
	Image string
	// Labels are added to the sandbox. LabelKey and the owner labels
	// (OwnerLabels: host, owner pid and start time) are always set, over
	// anything given here; LabelRun defaults to this process's DefaultRun.
	Labels map[string]string
	// User is the sandbox's default user ("" = the image's).
	User string
	// Env is added to the image's environment ("K=V").
	Env []string
	// Network is NetworkNone (the default when empty) or NetworkHost.
	Network string
	// Volumes are provider volumes (VolumeMaker.Volume) mounted
	// read-only; a provider that keeps none refuses them.
	Volumes []VolumeMount
	// Command is pid 1; nil means a plain `sleep` that reaps nothing, so
	// what a harness leaves behind stays visible (no --init).
	Command []string
	// Expire is a backstop: the engine stops the sandbox after this long
	// even if the host forgets it. Zero means one hour.
	Expire time.Duration
	// Limits bound the sandbox; zero fields mean DefaultLimits'. The local
	// provider ignores them.
	Limits Limits
}

// DefaultCommand is pid 1 of a sandbox when CreateSpec.Command is nil. A
// number rather than "infinity": BusyBox builds without FANCY_SLEEP refuse it.
var DefaultCommand = []string{"sleep", "2147483647"}

// ExecSpec is one command to run in the sandbox. Argv is run directly, never
// through a shell (the image may have none).
type ExecSpec struct {
	Argv []string
	// User runs the command as "UID[:GID]" or a name; "" = sandbox default.
	User string
	// Env is added to the sandbox's environment ("K=V").
	Env []string
	// Workdir is the working directory; "" = the sandbox's default.
	Workdir string
	// Stdin is fed to the command; nil = no stdin.
	Stdin io.Reader
}

// ExecResult is how a command that ran ended. ExitCode is the command's own
// status (126/127 when it could not be started).
type ExecResult struct {
	ExitCode int
	Stdout   []byte
	Stderr   []byte
}

// Info is what Inspect reports.
type Info struct {
	ID      string
	Exists  bool
	Running bool
	// ImageID is the engine's id of the image ("sha256:..."); "" for local.
	ImageID string
	// Arch is the sandbox's architecture in GOARCH spelling ("amd64").
	Arch string
	// PathPrefix is put before every sandbox path to find it on the host
	// side of exec: "" for a container, the temp root for the local
	// provider (whose processes run on the host and see host paths).
	PathPrefix string
	// Limits are the limits the engine applies to the sandbox; nil when
	// the provider applies none (local).
	Limits *Limits
	// Network is the network mode the engine applies (NetworkNone,
	// NetworkHost); "" when the provider has none (local).
	Network string
	// Engine names the engine holding the sandbox (its address, as
	// DOCKER_HOST would give it); "" for local.
	Engine string
}

// Sandbox is one sandbox. Paths are absolute sandbox paths.
type Sandbox interface {
	ID() string
	// Exec runs a command and waits for it. A non-zero exit is not an
	// error; a transport failure is a *ProviderError.
	Exec(ctx context.Context, spec ExecSpec) (ExecResult, error)
	// Upload writes data to path with mode, creating missing parent
	// directories (0755, owned by root). The file is owned by uid:gid.
	Upload(ctx context.Context, path string, data io.Reader, size int64, mode os.FileMode, uid, gid int) error
	// Mkdir creates path (and missing parents, 0755 root) with mode and
	// owner; an existing directory is left as it is.
	Mkdir(ctx context.Context, path string, mode os.FileMode, uid, gid int) error
	// Download copies path (a file or a directory tree) to hostPath. A
	// missing path is ErrPathNotFound, not a ProviderError. It is Fetch
	// with default Limits: links are never created on the host, files are
	// capped.
	Download(ctx context.Context, path, hostPath string) error
	// Fetch is Download within lim, reporting what it wrote and what it
	// withheld (links recorded with their targets, specials, files cut at
	// a cap). Callers use the package function Fetch, which fills lim's
	// defaults.
	Fetch(ctx context.Context, path, hostPath string, lim FetchLimits) (Fetched, error)
	// Inspect reports the sandbox's state; a sandbox that no longer exists
	// is Info{Exists: false} with a nil error.
	Inspect(ctx context.Context) (Info, error)
	// Destroy removes the sandbox; destroying a gone sandbox is not an
	// error.
	Destroy(ctx context.Context) error
}

// Provider creates sandboxes and opens existing ones.
type Provider interface {
	// Name names the implementation in messages and in the evidence
	// (Sandbox.Provider): "docker", or "local" in tests.
	Name() string
	Create(ctx context.Context, spec CreateSpec) (Sandbox, error)
	// Open returns a handle on an existing sandbox (one borrowed from its
	// owner, for example). It fails with ErrGone when there is none.
	Open(ctx context.Context, id string) (Sandbox, error)
}

// UploadFile uploads the host file src to path in sb.
func UploadFile(ctx context.Context, sb Sandbox, src, path string, mode os.FileMode, uid, gid int) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("upload %q: %w", src, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("upload %q: %w", src, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("upload %q: not a regular file", src)
	}
	return sb.Upload(ctx, path, f, fi.Size(), mode, uid, gid)
}

// UploadBytes uploads data to path in sb.
func UploadBytes(ctx context.Context, sb Sandbox, data []byte, path string, mode os.FileMode, uid, gid int) error {
	return sb.Upload(ctx, path, bytes.NewReader(data), int64(len(data)), mode, uid, gid)
}

// Entry is one directory or regular file of a batch (Put). Paths are
// absolute sandbox paths.
type Entry struct {
	Path string
	// Dir makes a directory; otherwise a regular file whose content is
	// Data, or the host file HostPath when Data is nil.
	Dir      bool
	Data     []byte
	HostPath string
	Mode     os.FileMode
	UID, GID int
}

// Putter is a Sandbox that can create several entries in one transfer.
type Putter interface {
	// Put creates the entries in order, each exactly as Mkdir or Upload
	// would (missing parents 0755 root).
	Put(ctx context.Context, entries []Entry) error
}

// Put creates entries in order (a directory before what goes into it): in
// one transfer when sb is a Putter, else with one Mkdir or Upload each.
func Put(ctx context.Context, sb Sandbox, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	if p, ok := sb.(Putter); ok {
		return p.Put(ctx, entries)
	}
	for _, e := range entries {
		var err error
		switch {
		case e.Dir:
			err = sb.Mkdir(ctx, e.Path, e.Mode, e.UID, e.GID)
		case e.Data == nil && e.HostPath != "":
			err = UploadFile(ctx, sb, e.HostPath, e.Path, e.Mode, e.UID, e.GID)
		default:
			err = UploadBytes(ctx, sb, e.Data, e.Path, e.Mode, e.UID, e.GID)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// VolumeMount mounts a provider volume (made by VolumeMaker.Volume)
// read-only into a sandbox. Volumes replace bind mounts of host paths,
// which a remote engine cannot see.
type VolumeMount struct {
	Volume string // the name Volume returned
	Target string // absolute path in the sandbox
}

// VolumeMaker is a provider that keeps read-only, content-addressed
// volumes: a runtime tree (Pi's ~100 MB of Node) or the owner's probe is
// put into the engine once and mounted by every case, instead of being
// uploaded per case.
type VolumeMaker interface {
	// Volume returns the name of the volume whose content is the host
	// directory tree dir, identified by key (a content hash the caller
	// computed: the same key always means the same tree). The volume is
	// made and filled on first use and found by key afterwards; a volume
	// left half-filled by a failed attempt is never returned.
	Volume(ctx context.Context, key, dir string) (string, error)
}

// Process is a command started by Streamer.Start: its stdin and stdout are
// streams the caller drives; Wait reports how it ended, like Exec.
type Process struct {
	// Stdin is the command's stdin; Close sends EOF.
	Stdin io.WriteCloser
	// Stdout is the command's stdout; it reaches EOF when the command
	// (and everything holding its stdout) is done.
	Stdout io.Reader
	// Wait waits for the command's end: its exit status, or a
	// *ProviderError when the transport failed.
	Wait func() (int, error)
}

// Streamer is a sandbox that can start a long-lived command whose stdin
// and stdout are streamed (non-TTY, stdout never mixed with stderr): the
// session agent's channel (runner/agent) runs over one.
type Streamer interface {
	// Start starts spec.Argv; spec.Stdin is ignored (Process.Stdin is the
	// stdin). stderr, when not nil, receives the command's stderr.
	Start(ctx context.Context, spec ExecSpec, stderr io.Writer) (*Process, error)
}

// Remover is a sandbox that removes paths in it as root with the confined
// primitive (runner/confine: every path opened once from a descriptor of
// the root, no link followed at any component, everything removed
// relative to the descriptors it opened, never across a mount), without
// running a program of the image: the session agent's sandbox
// (runner/host/agenthost) is one. The session removes an adapter's
// scratch and its session dir through it when the sandbox has one.
type Remover interface {
	// Remove runs the removal args ask for, the rmtree helper's
	// arguments (runner/rmtree: DIR, or --scratch PATTERN...; sandbox
	// paths), and reports it as the helper's exec
	// would: each path removed a line of stdout, the refusals on stderr,
	// exit 1 when there was any. A transport failure is a
	// *ProviderError.
	Remove(ctx context.Context, args []string) (ExecResult, error)
}

// Change kinds, as the engines' diffs name them.
const (
	ChangeModified = "C"
	ChangeAdded    = "A"
	ChangeDeleted  = "D"
)

// Change is one path of a sandbox's filesystem that differs from its
// image. It is provider-neutral: verify reads only this.
type Change struct {
	Path string
	Kind string // ChangeModified, ChangeAdded or ChangeDeleted
}

// Differ is a sandbox that can report its filesystem changes against its
// image. How says how they were read ("engine", or a provider's fast path
// that a test shows equal to it).
type Differ interface {
	Changes(ctx context.Context) (changes []Change, how string, err error)
}

// ImageFinder is a provider that can say, before any sandbox is made,
// whether an image is there: certify checks every image of a run first.
type ImageFinder interface {
	// ImageID returns the image's id ("sha256:..."), or an error naming
	// the reference when the engine does not have it.
	ImageID(ctx context.Context, ref string) (string, error)
}

// EngineWitness is a provider or a sandbox whose engine can be asked
// about itself apart from the sandbox: after a transport failure certify
// asks it whether the engine failed (infrastructure: the case is unknown
// and --resume runs it again) or the sandbox failed on its own (the
// harness's: the case fails). The answer is the engine's word, read over
// the host's own connections to it, never the sandbox's: nothing inside a
// sandbox with no access to the engine's API can make the engine stop
// answering, forget a container, or restart (docs/threat-model.md,
// Infrastructure failures).
type EngineWitness interface {
	// EngineFault says how the engine failed ("the engine at
	// unix:///run/docker.sock does not answer: ..."), or "" when it
	// answers, still holds the sandbox, and has not stopped or restarted
	// since the sandbox was made. A provider answers for the engine alone.
	EngineFault(ctx context.Context) string
}

// As finds the optional part T (Differ, Streamer, Putter...) of sb, or of
// the sandbox a wrapper (Trace) wraps: a wrapper's Unwrap() Sandbox
// method leads to it.
func As[T any](sb Sandbox) (T, bool) {
	for sb != nil {
		if t, ok := sb.(T); ok {
			return t, true
		}
		u, ok := sb.(interface{ Unwrap() Sandbox })
		if !ok {
			break
		}
		sb = u.Unwrap()
	}
	var zero T
	return zero, false
}
