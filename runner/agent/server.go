package agent

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandproof/sandproof/runner/agent/pax"
	"github.com/sandproof/sandproof/runner/confine"
	"golang.org/x/sys/unix"
)

// ServeOptions configure the in-sandbox end.
type ServeOptions struct {
	// Root is put before every path of put and get ("" or "/" in a
	// container; a temp root when the agent runs under the local
	// provider). Paths never leave it.
	Root string
	// Listener, when set, is the tunnel's listener: every accepted
	// connection becomes a stream the host forwards where it chooses.
	Listener net.Listener
	// Window is the per-stream credit (0 = DefaultWindow).
	Window uint32
}

// Serve runs the agent's end of the channel over r (the agent's stdin) and
// w (its stdout) until the channel ends: the host closing stdin is the
// normal end. Processes an exec started and that still run are killed.
func Serve(r io.Reader, w io.Writer, opt ServeOptions) error {
	root := opt.Root
	if root == "" {
		root = "/"
	}
	c := newConn(r, w, false, opt.Window)
	defer c.Close()
	if opt.Listener != nil {
		go func() {
			<-c.done
			opt.Listener.Close()
		}()
		go tunnelListen(c, opt.Listener)
	}
	srv := &server{root: filepath.Clean(root), groups: map[int]bool{}}
	for {
		s, err := c.Accept()
		if err != nil {
			// Before returning, not from each exec's goroutine: the
			// agent's process exits when Serve returns, and a kill
			// left to a goroutine could lose that race (the command
			// would outlive the agent into verify's process table).
			srv.killAll()
			return err
		}
		go srv.handle(s)
	}
}

type server struct {
	root string

	mu     sync.Mutex
	groups map[int]bool // process groups of the commands running now
	ended  bool         // the channel is over: no command may run on
}

// start starts cmd (in a process group of its own) and records the group,
// under the lock killAll takes: a command is either started and recorded
// before the channel's end kills it, or not started at all.
func (srv *server) start(cmd *exec.Cmd) error {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.ended {
		return errors.New("exec: the agent's channel is over")
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	srv.groups[cmd.Process.Pid] = true
	return nil
}

func (srv *server) untrack(pgid int) {
	srv.mu.Lock()
	delete(srv.groups, pgid)
	srv.mu.Unlock()
}

// kill ends the group of a command still running: once its leader was
// reaped (untracked), its number may be another's.
func (srv *server) kill(pgid int) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.groups[pgid] {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// killAll ends every command still running, and any started later.
func (srv *server) killAll() {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.ended = true
	for pgid := range srv.groups {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// drainTimeout bounds how long a finished operation waits for the host to
// end its direction of the stream.
const drainTimeout = 30 * time.Second

func (srv *server) handle(s *Stream) {
	req, err := readRequest(s)
	if err != nil {
		s.Reset()
		return
	}
	defer finish(s)
	rw := &recordWriter{w: s}
	var res Result
	switch req.Op {
	case OpExec:
		res = srv.exec(s, rw, req)
	case OpPut:
		res = srv.put(s, req)
	case OpGet:
		res = srv.get(rw, req)
	case OpRemove:
		res = srv.remove(s, rw, req)
	default:
		res = Result{Code: -1, Error: fmt.Sprintf("unknown op %q", req.Op)}
	}
	rw.Result(res)
}

// finish ends an operation's stream once its result is sent. The host
// always ends its own direction (after the request and any stdin or
// archive); what it still sends (stdin a command never read, an archive's
// trailing blocks) is read and dropped, so the host's writes end normally
// rather than meeting a reset that races its reading of the result. A host
// that never ends its direction gets the reset after drainTimeout.
func finish(s *Stream) {
	s.CloseWrite()
	drained := make(chan struct{})
	go func() {
		io.Copy(io.Discard, s)
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(drainTimeout):
		s.Reset()
	}
}

// tunnelListen makes every accepted connection a stream. Where its bytes
// go is the host's choice: the request names no destination.
func tunnelListen(c *Conn, l net.Listener) {
	req, _ := json.Marshal(Request{Op: OpTunnel})
	for {
		nc, err := l.Accept()
		if err != nil {
			return
		}
		hc, ok := nc.(HalfCloser)
		if !ok { // a listener of TCP connections gives *net.TCPConn
			nc.Close()
			continue
		}
		s, err := c.Open(req)
		if err != nil {
			nc.Close()
			return
		}
		go Splice(hc, s)
	}
}

// HalfCloser is a connection that can close its write direction alone.
type HalfCloser interface {
	io.ReadWriteCloser
	CloseWrite() error
}

// Splice copies both ways between a connection and a stream, passing
// each direction's end on as a half-close; an error resets the stream.
func Splice(nc HalfCloser, s *Stream) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if _, err := io.Copy(s, nc); err != nil {
			s.Reset()
			nc.Close()
			return
		}
		s.CloseWrite()
	}()
	go func() {
		defer wg.Done()
		if _, err := io.Copy(nc, s); err != nil {
			s.Reset()
			nc.Close()
			return
		}
		nc.CloseWrite()
	}()
	go func() { // a reset or a broken channel ends the connection too
		<-s.Done()
		nc.Close()
	}()
	wg.Wait()
	nc.Close()
	s.Close()
}

// exec runs req.Argv directly (no shell) and streams its stdout and
// stderr as records; the result is its exit status.
func (srv *server) exec(s *Stream, rw *recordWriter, req Request) Result {
	fail := func(code int, err error) Result {
		kindWriter{rw, recErr}.Write([]byte(err.Error() + "\n"))
		return Result{Code: code}
	}
	if len(req.Argv) == 0 {
		return Result{Code: -1, Error: "exec: empty argv"}
	}
	u, err := lookupUser(req.User)
	if err != nil {
		return fail(126, err)
	}
	env := execEnv(os.Environ(), req.Env, u.home)
	bin, err := lookPath(req.Argv[0], env)
	if err != nil {
		code := 127
		if errors.Is(err, fs.ErrPermission) {
			code = 126
		}
		return fail(code, err)
	}
	cmd := &exec.Cmd{Path: bin, Args: req.Argv, Env: env, Dir: req.Workdir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A child left running in the background can hold stdout open
	// forever; the command's end is its main process's.
	cmd.WaitDelay = 2 * time.Second
	if u.set {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}
	}
	var stdin io.WriteCloser
	if req.Stdin {
		if stdin, err = cmd.StdinPipe(); err != nil {
			return fail(126, err)
		}
	}
	cmd.Stdout = kindWriter{rw, recOut}
	cmd.Stderr = kindWriter{rw, recErr}
	if err := srv.start(cmd); err != nil {
		code := 126
		if errors.Is(err, fs.ErrNotExist) && req.Workdir == "" {
			code = 127
		}
		return fail(code, err)
	}
	exited := make(chan struct{})
	go func() { // the host gave up (its context): end the whole group
		select {
		case <-s.Done():
			srv.kill(cmd.Process.Pid)
		case <-exited:
		}
	}()
	if stdin != nil {
		go func() {
			io.Copy(stdin, s)
			stdin.Close()
		}()
	}
	err = cmd.Wait()
	srv.untrack(cmd.Process.Pid)
	close(exited)
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		return Result{Code: 128 + int(ws.Signal())}
	case cmd.ProcessState != nil:
		return Result{Code: cmd.ProcessState.ExitCode()}
	default:
		return fail(126, err)
	}
}

// execEnv is the agent's own environment with extra added (later wins),
// and HOME from the user's passwd entry unless extra sets it, as `docker
// exec` does: the agent's own HOME is root's and would be wrong for
// another user.
func execEnv(own, extra []string, home string) []string {
	env := make([]string, 0, len(own)+len(extra)+1)
	for _, kv := range own {
		if !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	hasHome := false
	for _, kv := range extra {
		hasHome = hasHome || strings.HasPrefix(kv, "HOME=")
	}
	if !hasHome {
		env = append(env, "HOME="+home)
	}
	return dedupEnv(append(env, extra...))
}

func dedupEnv(env []string) []string {
	seen := map[string]int{}
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := seen[k]; ok {
			out[i] = kv
			continue
		}
		seen[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// lookPath resolves name with the command's PATH, not the agent's.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return checkExec(name)
	}
	pathEnv := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	var denied error
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p, err := checkExec(filepath.Join(dir, name))
		if err == nil {
			return p, nil
		}
		if errors.Is(err, fs.ErrPermission) && denied == nil {
			denied = err
		}
	}
	if denied != nil {
		return "", denied
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH: %w", name, fs.ErrNotExist)
}

func checkExec(p string) (string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("exec: %q: %w", p, err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("exec: %q: %w", p, fs.ErrPermission)
	}
	return p, nil
}

// execUser is who an exec runs as.
type execUser struct {
	set      bool // false: the agent's own user
	uid, gid uint32
	groups   []uint32
	home     string
}

// lookupUser resolves "" (the agent's user), "UID[:GID]" or
// "NAME[:GROUP]" with /etc/passwd and /etc/group, the way `docker exec
// -u` does: a uid missing from passwd runs with gid 0 and HOME "/".
func lookupUser(spec string) (execUser, error) {
	u := execUser{home: "/"}
	name, group, hasGroup := strings.Cut(spec, ":")
	if spec == "" {
		name = strconv.Itoa(os.Getuid())
	} else {
		u.set = true
	}
	pw, _ := readColon("/etc/passwd", 7)
	uid, numErr := strconv.ParseUint(name, 10, 32)
	found := false
	for _, f := range pw {
		if f[0] == name || (numErr == nil && f[2] == name) {
			id, err1 := strconv.ParseUint(f[2], 10, 32)
			gid, err2 := strconv.ParseUint(f[3], 10, 32)
			if err1 != nil || err2 != nil {
				continue
			}
			u.uid, u.gid, u.home, name, found = uint32(id), uint32(gid), f[5], f[0], true
			break
		}
	}
	if !found {
		if numErr != nil {
			return u, fmt.Errorf("exec: user %q: no such user in /etc/passwd", spec)
		}
		u.uid, u.gid, name = uint32(uid), 0, ""
	}
	if u.home == "" {
		u.home = "/"
	}
	gr, _ := readColon("/etc/group", 4)
	if hasGroup {
		gid, err := strconv.ParseUint(group, 10, 32)
		if err != nil {
			ok := false
			for _, f := range gr {
				if f[0] == group {
					if gid, err = strconv.ParseUint(f[2], 10, 32); err == nil {
						ok = true
					}
					break
				}
			}
			if !ok {
				return u, fmt.Errorf("exec: user %q: no such group in /etc/group", spec)
			}
		}
		u.gid = uint32(gid)
	}
	u.groups = []uint32{}
	for _, f := range gr {
		if name == "" {
			break
		}
		for _, m := range strings.Split(f[3], ",") {
			if m == name {
				if gid, err := strconv.ParseUint(f[2], 10, 32); err == nil {
					u.groups = append(u.groups, uint32(gid))
				}
			}
		}
	}
	return u, nil
}

// readColon reads a colon-separated database, keeping lines of n fields.
func readColon(p string, n int) ([][]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(io.LimitReader(f, 4<<20))
	for sc.Scan() {
		if fs := strings.Split(sc.Text(), ":"); len(fs) == n {
			out = append(out, fs)
		}
	}
	return out, sc.Err()
}

// put extracts a tar of directories and regular files as the host's Put
// creates entries: missing parents 0755 root, then the entry with its mode
// and owner; an existing directory is left as it is; a file replaces what
// was there through a rename. Anything else, and any name with "..", is
// refused. Each entry's parent is opened, and its missing components
// made, with the confined primitive (runner/confine), from a descriptor of
// the root following no link at any component (one that stays under the
// root included), and the entry is made relative to that descriptor.
func (srv *server) put(s *Stream, req Request) Result {
	root, err := confine.OpenRoot(srv.root)
	if err != nil {
		return Result{Code: -1, Error: "put: " + err.Error()}
	}
	defer unix.Close(root)
	tr := tar.NewReader(s)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return Result{}
		}
		if err != nil {
			return Result{Code: -1, Error: fmt.Sprintf("put: %v", err)}
		}
		if err := putEntry(root, tr, h); err != nil {
			return Result{Code: -1, Error: fmt.Sprintf("put %q: %v", h.Name, err)}
		}
	}
}

// putEntry makes the entry h (its content read from tr) beneath root.
func putEntry(root int, tr *tar.Reader, h *tar.Header) error {
	name := strings.TrimSuffix(h.Name, "/")
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return errors.New("a name with \"..\"")
		}
	}
	if h.Typeflag != tar.TypeDir && h.Typeflag != tar.TypeReg {
		return fmt.Errorf("entry type %q: only directories and regular files", h.Typeflag)
	}
	rel := strings.TrimPrefix(path.Clean("/"+name), "/")
	if rel == "" {
		return errors.New("the root itself")
	}
	dirRel, base := path.Split(rel)
	dir, err := confine.MkdirAll(root, strings.TrimSuffix(dirRel, "/"))
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	mode := uint32(os.FileMode(h.Mode).Perm())
	if h.Typeflag == tar.TypeDir {
		return putDir(dir, base, mode, h.Uid, h.Gid)
	}
	return putFile(dir, base, tr, h.Size, mode, h.Uid, h.Gid)
}

// putDir makes the directory name in dir with mode and owner; an existing
// directory is left as it is, anything else there (a link) refused.
func putDir(dir int, name string, mode uint32, uid, gid int) error {
	if err := unix.Mkdirat(dir, name, mode); err != nil {
		var st unix.Stat_t
		if serr := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return nil
		}
		return err
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, mode); err != nil {
		return err
	}
	return unix.Fchown(fd, uid, gid)
}

// putFile writes size bytes of r to a new file in dir, with mode and
// owner, and renames it over name (a link there is replaced, never
// followed).
func putFile(dir int, name string, r io.Reader, size int64, mode uint32, uid, gid int) error {
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := ".sandagent-put-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), tmp)
	n, err := io.Copy(f, r)
	if err == nil && n != size {
		err = fmt.Errorf("wrote %d bytes, want %d", n, size)
	}
	if err == nil {
		err = unix.Fchmod(fd, mode)
	}
	if err == nil {
		err = unix.Fchown(fd, uid, gid)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dir, tmp, dir, name)
	}
	if err != nil {
		unix.Unlinkat(dir, tmp, 0)
	}
	return err
}

// remove runs the confined primitive's removal (runner/confine Rmtree:
// req.Argv are the rmtree helper's arguments, DIR or --scratch
// PATTERN...) beneath the root, as root: every path opened once, following
// no link, everything removed relative to the descriptors it opened,
// never across a mount. Each path removed is a line of stdout, the
// refusals one line of stderr, and the result exit 1 when there was any.
// The host giving up (its context) stops the walk.
func (srv *server) remove(s *Stream, rw *recordWriter, req Request) Result {
	root, err := confine.OpenRoot(srv.root)
	if err != nil {
		kindWriter{rw, recErr}.Write([]byte(err.Error() + "\n"))
		return Result{Code: 1}
	}
	defer unix.Close(root)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	out := kindWriter{rw, recOut}
	err = confine.Rmtree(ctx, root, req.Argv, func(p string) { out.Write([]byte(p + "\n")) })
	if err != nil {
		kindWriter{rw, recErr}.Write([]byte(err.Error() + "\n"))
		return Result{Code: 1}
	}
	return Result{}
}

// get streams a tar of req.Path (a file or a tree) whose first component
// is the path's base name: links, hard links and specials are entries,
// never followed. The path is resolved following no link at any of its
// components (a link met on the way is the archive's one entry, a symlink
// marked with pax.LinkAt), the tree is walked by descriptors, and
// everything is read with req.User's filesystem ids ("" the agent's own):
// what that user may not read is an entry marked pax.Withheld,
// never read (confine.go says why).
func (srv *server) get(rw *recordWriter, req Request) Result {
	if !path.IsAbs(req.Path) {
		return Result{Code: -1, Error: fmt.Sprintf("get: path %q: not absolute", req.Path)}
	}
	done := make(chan Result, 1)
	go func() {
		// Never unlocked: the thread takes the user's ids and retires
		// with this goroutine (takeIDs).
		runtime.LockOSThread()
		// The root is the agent's to choose: opened with its own ids,
		// before they are given up.
		root, err := confine.OpenRoot(srv.root)
		if err != nil {
			done <- Result{Code: -1, Error: "get: " + err.Error()}
			return
		}
		defer unix.Close(root)
		if err := takeIDs(req.User); err != nil {
			done <- Result{Code: -1, Error: "get: " + err.Error()}
			return
		}
		done <- srv.getAt(rw, root, req.Path)
	}()
	return <-done
}

func (srv *server) getAt(rw *recordWriter, root int, p string) Result {
	clean := path.Clean(p)
	top := path.Base(clean)
	if top == "/" {
		top = "root"
	}
	tw := tar.NewWriter(kindWriter{rw, recOut})
	fail := func(err error) Result {
		return Result{Code: -1, Error: fmt.Sprintf("get %q: %v", p, err)}
	}
	dir, name, err := confine.OpenParent(root, strings.TrimPrefix(clean, "/"))
	var link *confine.LinkError
	switch {
	case errors.As(err, &link):
		h := header(top, tar.TypeSymlink, nil)
		h.Linkname = link.Target
		h.PAXRecords = map[string]string{pax.LinkAt: "/" + link.At}
		if err := tw.WriteHeader(h); err != nil {
			return fail(err)
		}
		if err := tw.Close(); err != nil {
			return fail(err)
		}
		return Result{}
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
		return Result{NotFound: true}
	case errors.Is(err, unix.EACCES):
		if err := tw.WriteHeader(denied(top)); err != nil {
			return fail(err)
		}
		if err := tw.Close(); err != nil {
			return fail(err)
		}
		return Result{}
	case err != nil:
		return fail(err)
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return Result{NotFound: true}
	}
	w := &walker{tw: tw, inodes: map[[2]uint64]string{}}
	if err := w.entry(dir, name, top, 1); err != nil {
		return fail(err)
	}
	if err := tw.Close(); err != nil {
		return fail(err)
	}
	return Result{}
}

// walker writes a tree as tar entries, every one opened relative to its
// parent's descriptor and without following a link.
type walker struct {
	tw     *tar.Writer
	inodes map[[2]uint64]string // hard-linked files already written
}

// header is a tar header named name of type typ, with st's mode, owner
// and time when st is given.
func header(name string, typ byte, st *unix.Stat_t) *tar.Header {
	h := &tar.Header{Typeflag: typ, Name: name, Format: tar.FormatPAX, ModTime: time.Unix(0, 0)}
	if st != nil {
		h.Mode = int64(st.Mode & 0o7777)
		h.Uid, h.Gid = int(st.Uid), int(st.Gid)
		h.ModTime = time.Unix(st.Mtim.Sec, st.Mtim.Nsec)
	}
	if typ == tar.TypeDir {
		h.Name += "/"
	}
	return h
}

// denied is the entry of something the read's user may not read: a fifo
// (nothing to read for a host that does not know the mark) with the mark.
func denied(name string) *tar.Header {
	h := header(name, tar.TypeFifo, nil)
	h.PAXRecords = map[string]string{pax.Withheld: pax.Denied}
	return h
}

// entry writes name (in dir) as tname, and below it if it is a directory.
// retry is how many more times an entry that changed type between its
// stat and its open (a directory swapped for a link) is looked at again.
func (w *walker) entry(dir int, name, tname string, retry int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // gone since its directory was listed
		}
		if errors.Is(err, unix.EACCES) {
			return w.tw.WriteHeader(denied(tname))
		}
		return err
	}
	if confine.StepHook != nil {
		confine.StepHook(tname)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		t, err := confine.Readlink(dir, name)
		if err != nil {
			if retry > 0 && errors.Is(err, unix.EINVAL) {
				return w.entry(dir, name, tname, retry-1)
			}
			return w.tw.WriteHeader(denied(tname))
		}
		h := header(tname, tar.TypeSymlink, &st)
		h.Linkname = t
		return w.tw.WriteHeader(h)
	case unix.S_IFDIR:
		fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		switch {
		case (errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)) && retry > 0:
			return w.entry(dir, name, tname, retry-1) // swapped since the stat
		case errors.Is(err, unix.EACCES):
			return w.tw.WriteHeader(denied(tname))
		case errors.Is(err, unix.ENOENT):
			return nil
		case err != nil:
			return w.tw.WriteHeader(header(tname, tar.TypeFifo, &st))
		}
		f := os.NewFile(uintptr(fd), tname)
		defer f.Close()
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		if err := w.tw.WriteHeader(header(tname, tar.TypeDir, &st)); err != nil {
			return err
		}
		for {
			// In batches, unsorted: a directory of millions of names
			// never sits in memory whole.
			names, err := f.Readdirnames(256)
			for _, n := range names {
				if err := w.entry(fd, n, tname+"/"+n, 1); err != nil {
					return err
				}
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
		}
	case unix.S_IFREG:
		return w.file(dir, name, tname, &st)
	default:
		// tar has no socket type; a fifo entry says "special" alike.
		return w.tw.WriteHeader(header(tname, tar.TypeFifo, &st))
	}
}

// file writes a regular file: opened before its header is written, so a
// file swapped for a fifo or a link since the stat is not read (it could
// block or lead elsewhere); it becomes a special entry.
func (w *walker) file(dir int, name, tname string, st *unix.Stat_t) error {
	h := header(tname, tar.TypeReg, st)
	h.Size = st.Size
	if st.Nlink > 1 {
		key := [2]uint64{st.Dev, st.Ino}
		if first, ok := w.inodes[key]; ok {
			h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
			return w.tw.WriteHeader(h)
		}
		w.inodes[key] = tname
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) {
		return w.tw.WriteHeader(denied(tname))
	}
	var ft unix.Stat_t
	if err == nil {
		err = unix.Fstat(fd, &ft)
	}
	if err != nil || ft.Mode&unix.S_IFMT != unix.S_IFREG || ft.Ino != st.Ino || ft.Dev != st.Dev {
		if fd >= 0 {
			unix.Close(fd)
		}
		h.Typeflag, h.Size = tar.TypeFifo, 0
		return w.tw.WriteHeader(h)
	}
	f := os.NewFile(uintptr(fd), tname)
	defer f.Close()
	if err := w.tw.WriteHeader(h); err != nil {
		return err
	}
	n, err := io.Copy(w.tw, io.LimitReader(f, h.Size))
	if err != nil {
		return err
	}
	// The file shrank since the stat: pad to the size the header gave.
	_, err = io.CopyN(w.tw, zeros{}, h.Size-n)
	return err
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
