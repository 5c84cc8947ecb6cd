// Package local is the provider that runs "sandboxes" on this host, for fast
// specs: a sandbox is a temporary root directory, exec runs host processes,
// upload and download copy files.
//
// It isolates nothing. Processes share the host's pid, mount, network and
// user namespaces; they see host paths, so sandbox paths are the host paths
// under Info.PathPrefix (the root directory), and a command can read or write
// anything its user can. Only file operations are confined: Upload, Mkdir and
// Download refuse paths that leave the root (after resolving symlinks in the
// parent). Destroy removes the root; it does not kill processes started in
// the sandbox, which is the supervisor's job and what the specs check.
package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandproof/sandproof/runner/host/hostfile"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// Provider creates sandboxes under Dir ("" = os.TempDir()).
type Provider struct {
	Dir string
}

// New returns a local provider with sandboxes under dir.
func New(dir string) *Provider { return &Provider{Dir: dir} }

func (p *Provider) Name() string { return "local" }

// Create makes a fresh root directory. The spec's image, network, mounts
// and command are ignored (there is nothing to apply them to); its env is
// added to every exec.
func (p *Provider) Create(ctx context.Context, spec provider.CreateSpec) (provider.Sandbox, error) {
	if len(spec.Volumes) > 0 {
		// It keeps no volumes (it is no VolumeMaker): a volume asked for
		// would silently be missing.
		return nil, fmt.Errorf("create sandbox: volume %q: the local provider keeps no volumes", spec.Volumes[0].Volume)
	}
	root, err := os.MkdirTemp(p.Dir, "sandproof-local-")
	if err != nil {
		return nil, provider.Errorf("create", "", err)
	}
	// MkdirTemp makes 0700; processes run as another user must reach
	// their session dir inside it.
	if err := os.Chmod(root, 0o755); err != nil {
		return nil, provider.Errorf("create", "", err)
	}
	return &Sandbox{root: root, env: spec.Env, user: spec.User}, nil
}

// Open returns the sandbox whose id (its root directory) is id.
func (p *Provider) Open(ctx context.Context, id string) (provider.Sandbox, error) {
	fi, err := os.Stat(id)
	if err != nil || !fi.IsDir() || !filepath.IsAbs(id) {
		return nil, provider.Errorf("open", id, fmt.Errorf("open sandbox %q: %w", id, provider.ErrGone))
	}
	return &Sandbox{root: filepath.Clean(id)}, nil
}

// Sandbox is a root directory on this host.
type Sandbox struct {
	root string
	env  []string
	user string
}

// ID is the root directory.
func (s *Sandbox) ID() string { return s.root }

// Root is the directory sandbox paths live under.
func (s *Sandbox) Root() string { return s.root }

func (s *Sandbox) alive(op string) error {
	if _, err := os.Stat(s.root); err != nil {
		return provider.Errorf(op, s.root, fmt.Errorf("stat root: %w", provider.ErrGone))
	}
	return nil
}

// hostPath maps a sandbox path to the host, refusing one that leaves the
// root. Symlinks in the parent are resolved so that a link planted in the
// sandbox cannot send a copy outside it.
func (s *Sandbox) hostPath(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("sandbox path %q: not absolute", p)
	}
	hp := filepath.Join(s.root, p)
	if hp == s.root {
		return hp, nil
	}
	dir := filepath.Dir(hp)
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		rr, _ := filepath.EvalSymlinks(s.root)
		if real != rr && !strings.HasPrefix(real, rr+string(filepath.Separator)) {
			return "", fmt.Errorf("sandbox path %q: leaves the sandbox root", p)
		}
	}
	return hp, nil
}

var _ provider.Streamer = (*Sandbox)(nil)

// Exec runs argv as a host process. argv[0] and Workdir are host paths: the
// session already put the root in front of them (Info.PathPrefix).
func (s *Sandbox) Exec(ctx context.Context, spec provider.ExecSpec) (provider.ExecResult, error) {
	if len(spec.Argv) == 0 {
		return provider.ExecResult{}, fmt.Errorf("exec: empty argv")
	}
	if err := s.alive("exec"); err != nil {
		return provider.ExecResult{}, err
	}
	cmd := exec.CommandContext(ctx, spec.Argv[0], spec.Argv[1:]...)
	cmd.Env = append(append(os.Environ(), s.env...), spec.Env...)
	cmd.Dir = spec.Workdir
	if cmd.Dir == "" {
		cmd.Dir = s.root
	}
	cmd.Stdin = spec.Stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	// A process group of its own, so a cancelled exec can be ended whole,
	// like a provider that kills the exec's process group would.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	user := spec.User
	if user == "" {
		user = s.user
	}
	if user != "" {
		cred, err := credential(user)
		if err != nil {
			return provider.ExecResult{}, err
		}
		cmd.SysProcAttr.Credential = cred
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	res := provider.ExecResult{Stdout: out.Bytes(), Stderr: errb.Bytes()}
	if ctx.Err() != nil {
		return res, provider.Errorf("exec", s.root, ctx.Err())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal())
		}
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		// What a container runtime reports for a missing binary.
		res.ExitCode = 127
		res.Stderr = append(res.Stderr, []byte(err.Error()+"\n")...)
	case errors.Is(err, fs.ErrPermission):
		res.ExitCode = 126
		res.Stderr = append(res.Stderr, []byte(err.Error()+"\n")...)
	default:
		return res, provider.Errorf("exec", s.root, err)
	}
	return res, s.alive("exec")
}

// Start runs argv as a host process whose stdin and stdout are streams
// (provider.Streamer): the session agent's channel runs over one in the
// tests. ctx's end kills its process group.
func (s *Sandbox) Start(ctx context.Context, spec provider.ExecSpec, stderr io.Writer) (*provider.Process, error) {
	if len(spec.Argv) == 0 {
		return nil, fmt.Errorf("start: empty argv")
	}
	if err := s.alive("start"); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, spec.Argv[0], spec.Argv[1:]...)
	cmd.Env = append(append(os.Environ(), s.env...), spec.Env...)
	cmd.Dir = spec.Workdir
	if cmd.Dir == "" {
		cmd.Dir = s.root
	}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	user := spec.User
	if user == "" {
		user = s.user
	}
	if user != "" && user != fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()) {
		cred, err := credential(user)
		if err != nil {
			return nil, err
		}
		cmd.SysProcAttr.Credential = cred
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, provider.Errorf("start", s.root, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, provider.Errorf("start", s.root, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, provider.Errorf("start", s.root, err)
	}
	wait := func() (int, error) {
		err := cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, nil
		case errors.As(err, &ee):
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return 128 + int(ws.Signal()), nil
			}
			return ee.ExitCode(), nil
		default:
			return -1, provider.Errorf("start", s.root, err)
		}
	}
	return &provider.Process{Stdin: stdin, Stdout: stdout, Wait: wait}, nil
}

// credential parses "UID[:GID]"; names are not resolved (no user database
// lookup, as in a container whose /etc/passwd is the image's).
func credential(user string) (*syscall.Credential, error) {
	us, gs, ok := strings.Cut(user, ":")
	uid, err := strconv.ParseUint(us, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("exec: user %q: want UID[:GID], numeric", user)
	}
	gid := uid
	if ok {
		if gid, err = strconv.ParseUint(gs, 10, 32); err != nil {
			return nil, fmt.Errorf("exec: user %q: want UID[:GID], numeric", user)
		}
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// Upload writes the file through a temp name and a rename, so a reader
// never sees half of it.
func (s *Sandbox) Upload(ctx context.Context, path string, data io.Reader, size int64, mode os.FileMode, uid, gid int) error {
	if err := s.alive("upload"); err != nil {
		return err
	}
	hp, err := s.hostPath(path)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(hp), 0o755); err != nil {
		return fmt.Errorf("upload %q: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(hp), ".upload-*")
	if err != nil {
		return fmt.Errorf("upload %q: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, data)
	if err == nil && n != size {
		err = fmt.Errorf("wrote %d bytes, want %d", n, size)
	}
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = tmp.Chown(uid, gid)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), hp)
	}
	if err != nil {
		return fmt.Errorf("upload %q: %w", path, err)
	}
	return nil
}

// Mkdir creates path with mode and owner; missing parents get 0755.
func (s *Sandbox) Mkdir(ctx context.Context, path string, mode os.FileMode, uid, gid int) error {
	if err := s.alive("mkdir"); err != nil {
		return err
	}
	hp, err := s.hostPath(path)
	if err != nil {
		return fmt.Errorf("mkdir: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(hp), 0o755); err != nil {
		return fmt.Errorf("mkdir %q: %w", path, err)
	}
	if err := os.Mkdir(hp, mode); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return fmt.Errorf("mkdir %q: %w", path, err)
	}
	if err := os.Chmod(hp, mode); err != nil { // umask
		return fmt.Errorf("mkdir %q: %w", path, err)
	}
	if err := os.Lchown(hp, uid, gid); err != nil {
		return fmt.Errorf("mkdir %q: %w", path, err)
	}
	return nil
}

// Download is Fetch with default limits.
func (s *Sandbox) Download(ctx context.Context, path, hostPath string) error {
	_, err := s.Fetch(ctx, path, hostPath, provider.FetchLimits{})
	return err
}

// Fetch copies a file or a tree within lim: symlinks are recorded, never
// created or followed; devices, fifos and sockets are recorded and
// skipped; a regular file is opened without following links and cut at
// the caps by its apparent (lstat) size. A confined read (lim.Confined) is
// refused with provider.ErrUnconfined. Every entry takes one of lim.Entries;
// past it the copy stops and records where.
func (s *Sandbox) Fetch(ctx context.Context, path, hostPath string, lim provider.FetchLimits) (provider.Fetched, error) {
	var got provider.Fetched
	if err := s.alive("download"); err != nil {
		return got, err
	}
	if lim.Confined {
		// It resolves the path by name and walks the tree by name, as
		// this process's user: it follows links above the path and
		// cannot read as another user. Refused, never followed.
		return got, fmt.Errorf("download %q: %w (the local provider reads by name, as its own user)", path, provider.ErrUnconfined)
	}
	lim = lim.WithDefaults()
	hp, err := s.hostPath(path)
	if err != nil {
		return got, fmt.Errorf("download: %w", err)
	}
	if _, err := os.Lstat(hp); errors.Is(err, fs.ErrNotExist) {
		return got, fmt.Errorf("download %q: %w", path, provider.ErrPathNotFound)
	}
	var read int64
	err = filepath.WalkDir(hp, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(hp, p)
		dst := filepath.Join(hostPath, rel)
		sp := filepath.ToSlash(filepath.Join(path, rel))
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if lim.Entries.Take(1) == 0 {
			got.Add(provider.Withheld{Path: sp, Kind: provider.WithheldStopped})
			return fs.SkipAll
		}
		got.Entries++
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, fi.Mode().Perm()|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			got.Add(provider.Withheld{Path: sp, Kind: provider.WithheldSymlink, Target: t})
		case d.Type().IsRegular():
			want := min(fi.Size(), lim.FileBytes)
			if read+want > lim.ReadBytes {
				got.Add(provider.Withheld{Path: sp, Kind: provider.WithheldStopped, Size: fi.Size()})
				return fs.SkipAll
			}
			n := lim.Budget.Take(want)
			w, err := copyCapped(p, dst, fi.Mode().Perm(), n)
			read += w
			got.Files++
			got.Bytes += w
			if w < fi.Size() {
				kind := provider.WithheldTruncated
				if n < want {
					kind = provider.WithheldStopped
				}
				got.Add(provider.Withheld{Path: sp, Kind: kind, Size: fi.Size(), Written: w})
			}
			return err
		default:
			got.Add(provider.Withheld{Path: sp, Kind: provider.WithheldSpecial})
		}
		return nil
	})
	if err != nil {
		return got, fmt.Errorf("download %q: %w", path, err)
	}
	return got, nil
}

// copyCapped copies at most n bytes of the regular file src (opened
// without following a link) to the new file dst.
func copyCapped(src, dst string, mode os.FileMode, n int64) (int64, error) {
	in, err := hostfile.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, err
	}
	if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode|0o600)
	if err != nil {
		return 0, err
	}
	w, err := io.CopyN(out, in, n)
	if errors.Is(err, io.EOF) {
		err = nil // the file shrank meanwhile
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return w, err
}

// Inspect reports whether the root still exists. A local sandbox "runs" as
// long as it exists.
func (s *Sandbox) Inspect(ctx context.Context) (provider.Info, error) {
	info := provider.Info{ID: s.root, Arch: runtime.GOARCH, PathPrefix: s.root}
	if _, err := os.Stat(s.root); err == nil {
		info.Exists, info.Running = true, true
	}
	return info, nil
}

// Destroy removes the root directory.
func (s *Sandbox) Destroy(ctx context.Context) error {
	if err := os.RemoveAll(s.root); err != nil {
		return provider.Errorf("destroy", s.root, err)
	}
	return nil
}
