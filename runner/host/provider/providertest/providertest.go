// Package providertest is the contract every sandbox provider keeps
// (runner/host/provider's Sandbox), written once: an implementation runs
// Run from one test file in its own directory, so docker, the local
// provider and the session agent's sandbox are held to the same
// assertions instead of three hand copies that drift apart. It is test
// support: the product never imports it (runner/layers_test.go).
//
// Everything is checked through the Sandbox itself: a file's mode and
// owner are read by an Exec of stat in the sandbox, never from a host
// path, so a provider whose sandbox the host cannot see (a remote engine)
// runs the same assertions as one whose root is a host directory. A
// capability a provider lacks (Caps) is a skipped subtest that says so,
// never a silent pass; a capability it claims must be there.
package providertest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/host/hostfile"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// Caps are the optional parts of the contract a provider offers. Each one
// false skips its subtest, by name; each one true is checked, and so is
// its absence: a sandbox that is a Streamer while Streams is false fails,
// so the list cannot understate what runs untested.
type Caps struct {
	// Streams: the sandbox is a provider.Streamer (Start, Wait).
	Streams bool
	// Put: the sandbox is a provider.Putter (a batch in one transfer).
	// Without it provider.Put falls back to Mkdir and Upload, and the
	// modes and owners are checked all the same.
	Put bool
	// Users: files can be given any owner and commands run as any user
	// (the local provider needs root for it).
	Users bool
	// Limits: Inspect reports the limits applied, provider.DefaultLimits
	// for a sandbox made by Env.New.
	Limits bool
	// Remover: the sandbox is a provider.Remover.
	Remover bool
}

// Env is one provider under test.
type Env struct {
	// New makes a fresh, running sandbox with the default CreateSpec
	// (labels and an expiry aside) and destroys it in tb's cleanup.
	New func(testing.TB) provider.Sandbox
	// Tool is the argv that runs the tool name (stat, id, ln, mkfifo,
	// truncate, readlink, wc) in the sandbox; nil runs it by name. A
	// BusyBox image gives {"busybox", name}.
	Tool func(name string) []string
	// NotFound is the status of an exec whose program is not there; 0
	// means 127, what a shell and the session agent report. The Docker
	// engine reports its own failure to start one as 126.
	NotFound int
	Caps     Caps
	// Known are the subtests a provider is known to fail, by name, each
	// with the reason (an issue to fix it): skipped and said, never
	// passed. A name Run does not have fails.
	Known map[string]string
}

// subtest is one part of the contract; need false (a capability the
// provider lacks, named cap) skips it.
type subtest struct {
	name string
	need bool
	cap  string
	run  func(*testing.T, *box)
}

func subtests(c Caps) []subtest {
	return []subtest{
		{"ExecStreamsAndStatus", true, "", execStreamsAndStatus},
		{"ExecStatusCodes", true, "", execStatusCodes},
		{"ExecEnvWorkdir", true, "", execEnvWorkdir},
		{"ExecUser", c.Users, "Users", execUser},
		{"UploadMkdirDownload", true, "", uploadMkdirDownload},
		{"MkdirLeavesExisting", true, "", mkdirLeavesExisting},
		{"MissingPathIsNotProviderError", true, "", missingPath},
		{"PutModesOwners", true, "", putModesOwners},
		{"StartExchange", c.Streams, "Streams", startExchange},
		{"CapturesAreData", true, "", capturesAreData},
		{"WithheldListIsCapped", true, "", withheldListIsCapped},
		{"DownloadBytesNeverFollows", true, "", downloadBytesNeverFollows},
		{"ReadCapStops", true, "", readCapStops},
		{"GoneIsProviderError", true, "", goneIsProviderError},
		{"DestroyIsIdempotent", true, "", destroyIsIdempotent},
		{"Limits", true, "", limits},
		{"Remove", c.Remover, "Remover", remove},
	}
}

// Run runs the contract's subtests against env, each on a fresh sandbox.
func Run(t *testing.T, env Env) {
	t.Helper()
	if env.New == nil {
		t.Fatal("providertest: Env.New is nil")
	}
	all := subtests(env.Caps)
	for name := range env.Known {
		if !slices.ContainsFunc(all, func(s subtest) bool { return s.name == name }) {
			t.Errorf("providertest: Env.Known names %q, which is no subtest", name)
		}
	}
	for _, c := range all {
		t.Run(c.name, func(t *testing.T) {
			if why, ok := env.Known[c.name]; ok {
				t.Skipf("a known break of the contract: %s", why)
			}
			if !c.need {
				t.Skipf("the provider lacks %s (Caps.%s is false)", c.cap, c.cap)
			}
			c.run(t, newBox(t, env))
		})
	}
}

// box is one fresh sandbox of env, with PathPrefix read once: a sandbox
// path given to Exec (an argv, a workdir) is prefixed by it, as the
// session does.
type box struct {
	t      *testing.T
	env    Env
	sb     provider.Sandbox
	prefix string
}

func newBox(t *testing.T, env Env) *box {
	t.Helper()
	sb := env.New(t)
	info, err := sb.Inspect(ctx(t))
	if err != nil || !info.Exists || !info.Running || info.Arch == "" {
		t.Fatalf("inspect a new sandbox = %+v, %v; want it existing, running, with an arch", info, err)
	}
	for _, c := range []struct {
		name      string
		has, want bool
	}{
		{"Streamer", is[provider.Streamer](sb), env.Caps.Streams},
		{"Putter", is[provider.Putter](sb), env.Caps.Put},
		{"Remover", is[provider.Remover](sb), env.Caps.Remover},
	} {
		if c.has != c.want {
			t.Fatalf("the sandbox is a provider.%s: %v; Caps say %v", c.name, c.has, c.want)
		}
	}
	return &box{t: t, env: env, sb: sb, prefix: info.PathPrefix}
}

func is[T any](sb provider.Sandbox) bool { _, ok := provider.As[T](sb); return ok }

// ctx is a context that ends with the test, bounded.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return c
}

// path is the sandbox path p as a command in the sandbox names it.
func (b *box) path(p string) string { return b.prefix + p }

// tool is the argv of the named tool followed by args.
func (b *box) tool(name string, args ...string) []string {
	argv := []string{name}
	if b.env.Tool != nil {
		argv = b.env.Tool(name)
	}
	return append(slices.Clone(argv), args...)
}

// exec runs spec; a transport error fails the test.
func (b *box) exec(spec provider.ExecSpec) provider.ExecResult {
	b.t.Helper()
	res, err := b.sb.Exec(ctx(b.t), spec)
	if err != nil {
		b.t.Fatalf("exec %q: %v", spec.Argv, err)
	}
	return res
}

// ok runs argv, which must exit 0; its stdout.
func (b *box) ok(argv ...string) string {
	b.t.Helper()
	res := b.exec(provider.ExecSpec{Argv: argv})
	if res.ExitCode != 0 {
		b.t.Fatalf("exec %q: exit %d, stderr %q", argv, res.ExitCode, res.Stderr)
	}
	return string(res.Stdout)
}

// stat is "PATH MODE UID GID" for each sandbox path, read in the
// sandbox (paths printed as the sandbox names them).
func (b *box) stat(paths ...string) string {
	b.t.Helper()
	args := []string{"-c", "%a %u %g"}
	for _, p := range paths {
		args = append(args, b.path(p))
	}
	lines := strings.Split(strings.TrimSuffix(b.ok(b.tool("stat", args...)...), "\n"), "\n")
	if len(lines) != len(paths) {
		b.t.Fatalf("stat of %d paths printed %q", len(paths), lines)
	}
	var out strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&out, "%s %s\n", paths[i], l)
	}
	return out.String()
}

// owner is a uid and gid.
type owner struct{ uid, gid int }

func (o owner) String() string { return fmt.Sprintf("%d %d", o.uid, o.gid) }

// owners are the owner files are given and the one that stands for root:
// another user and root when the provider can (Caps.Users), else this
// process's user for both, which any provider can.
func (b *box) owners() (user, root owner) {
	if b.env.Caps.Users {
		return owner{1000, 1001}, owner{0, 0}
	}
	me := owner{os.Getuid(), os.Getgid()}
	return me, me
}

func execStreamsAndStatus(t *testing.T, b *box) {
	res := b.exec(provider.ExecSpec{Argv: []string{"sh", "-c", "echo out; echo err >&2; cat; exit 3"}, Stdin: strings.NewReader("in\n")})
	if res.ExitCode != 3 || string(res.Stdout) != "out\nin\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("exec = %d %q %q; want 3, stdin echoed after out, err apart", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res := b.exec(provider.ExecSpec{Argv: []string{"sh", "-c", "exit 0"}}); res.ExitCode != 0 {
		t.Fatalf("exit 0 = %d", res.ExitCode)
	}
}

// A command that could not start is its own status, never an error: 127
// (or the provider's NotFound) for a missing one, 126 for one that is not
// executable; one killed by a signal is 128+N.
func execStatusCodes(t *testing.T, b *box) {
	want := b.env.NotFound
	if want == 0 {
		want = 127
	}
	if r := b.exec(provider.ExecSpec{Argv: []string{"no-such-command-xyz"}}); r.ExitCode != want || len(r.Stdout)+len(r.Stderr) == 0 {
		t.Errorf("missing command: %d %q %q; want %d and a message", r.ExitCode, r.Stdout, r.Stderr, want)
	}
	_, root := b.owners()
	if err := provider.UploadBytes(ctx(t), b.sb, []byte("#!/bin/sh\n"), "/noexec", 0o644, root.uid, root.gid); err != nil {
		t.Fatal(err)
	}
	if r := b.exec(provider.ExecSpec{Argv: []string{b.path("/noexec")}}); r.ExitCode != 126 {
		t.Errorf("not executable: %d %q %q; want 126", r.ExitCode, r.Stdout, r.Stderr)
	}
	for sig, code := range map[string]int{"KILL": 128 + 9, "TERM": 128 + 15} {
		if r := b.exec(provider.ExecSpec{Argv: []string{"sh", "-c", "kill -" + sig + " $$"}}); r.ExitCode != code {
			t.Errorf("killed by %s: %d; want %d", sig, r.ExitCode, code)
		}
	}
}

func execEnvWorkdir(t *testing.T, b *box) {
	if r := b.exec(provider.ExecSpec{Argv: []string{"sh", "-c", "echo $FOO"}, Env: []string{"FOO=bar"}}); string(r.Stdout) != "bar\n" {
		t.Errorf("env FOO=bar: %q", r.Stdout)
	}
	_, root := b.owners()
	if err := b.sb.Mkdir(ctx(t), "/wd/sub", 0o755, root.uid, root.gid); err != nil {
		t.Fatal(err)
	}
	// No workdir is the sandbox's root.
	for _, c := range []struct{ workdir, want string }{{b.path("/wd/sub"), b.path("/wd/sub")}, {b.path("/"), b.path("/")}, {"", b.path("/")}} {
		r := b.exec(provider.ExecSpec{Argv: []string{"sh", "-c", "pwd"}, Workdir: c.workdir})
		if got, want := strings.TrimSpace(string(r.Stdout)), filepath.Clean(c.want); got != want {
			t.Errorf("pwd in workdir %q = %q, %d; want %q", c.workdir, r.Stdout, r.ExitCode, want)
		}
	}
}

func execUser(t *testing.T, b *box) {
	for _, c := range []struct{ user, flag, want string }{{"1000:1001", "-u", "1000\n"}, {"1000:1001", "-g", "1001\n"}, {"0", "-u", "0\n"}} {
		if r := b.exec(provider.ExecSpec{Argv: b.tool("id", c.flag), User: c.user}); string(r.Stdout) != c.want {
			t.Errorf("id %s as %s = %q (exit %d, %q), want %q", c.flag, c.user, r.Stdout, r.ExitCode, r.Stderr, c.want)
		}
	}
}

func uploadMkdirDownload(t *testing.T, b *box) {
	c := ctx(t)
	u, root := b.owners()
	if err := provider.UploadBytes(c, b.sb, []byte("hello"), "/new/dir/f.txt", 0o640, u.uid, u.gid); err != nil {
		t.Fatal(err)
	}
	if err := b.sb.Mkdir(c, "/new/other", 0o700, u.uid, u.gid); err != nil {
		t.Fatal(err)
	}
	// Missing parents are 0755 and root's (this process's user's, for a
	// provider without Caps.Users).
	want := fmt.Sprintf("/new 755 %s\n/new/dir 755 %s\n/new/dir/f.txt 640 %s\n/new/other 700 %s\n", root, root, u, u)
	if got := b.stat("/new", "/new/dir", "/new/dir/f.txt", "/new/other"); got != want {
		t.Errorf("stat in the sandbox:\n%s want\n%s", got, want)
	}
	host := filepath.Join(t.TempDir(), "new")
	if err := b.sb.Download(c, "/new", host); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(host, "dir/f.txt")); err != nil || string(got) != "hello" {
		t.Errorf("downloaded file = %q, %v", got, err)
	}
	if fi, err := os.Stat(filepath.Join(host, "other")); err != nil || !fi.IsDir() {
		t.Errorf("downloaded dir: %v", err)
	}
	if got, err := provider.DownloadBytes(c, b.sb, "/new/dir/f.txt"); err != nil || string(got) != "hello" {
		t.Errorf("DownloadBytes = %q, %v", got, err)
	}
}

// Mkdir of a directory that exists leaves it as it is (Sandbox.Mkdir).
func mkdirLeavesExisting(t *testing.T, b *box) {
	c := ctx(t)
	u, root := b.owners()
	if err := b.sb.Mkdir(c, "/dir", 0o700, u.uid, u.gid); err != nil {
		t.Fatal(err)
	}
	if err := b.sb.Mkdir(c, "/dir", 0o755, root.uid, root.gid); err != nil {
		t.Fatal(err)
	}
	if got, want := b.stat("/dir"), fmt.Sprintf("/dir 700 %s\n", u); got != want {
		t.Errorf("a second Mkdir changed the directory: %q, want %q", got, want)
	}
}

// A path that is not there is the caller's answer, not a transport
// failure: certify must not stop a case on it.
func missingPath(t *testing.T, b *box) {
	err := b.sb.Download(ctx(t), "/no/such/path", filepath.Join(t.TempDir(), "x"))
	if !errors.Is(err, provider.ErrPathNotFound) || provider.IsProviderError(err) {
		t.Fatalf("download of a missing path: %v; want ErrPathNotFound and no ProviderError", err)
	}
}

func putModesOwners(t *testing.T, b *box) {
	c := ctx(t)
	u, root := b.owners()
	big := filepath.Join(t.TempDir(), "big")
	small := filepath.Join(t.TempDir(), "small")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), 3<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(small, []byte("from host"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := provider.Put(c, b.sb, []provider.Entry{
		{Path: "/put", Dir: true, Mode: 0o755, UID: root.uid, GID: root.gid},
		{Path: "/put/sub", Dir: true, Mode: 0o750, UID: u.uid, GID: u.gid},
		{Path: "/put/sub/small", Data: []byte("bytes"), Mode: 0o604, UID: u.uid, GID: u.gid},
		{Path: "/put/deep/big", HostPath: big, Mode: 0o600, UID: root.uid, GID: u.gid},
		{Path: "/put/empty", Data: []byte{}, Mode: 0o644, UID: root.uid, GID: root.gid},
		{Path: "/put/deep/small", HostPath: small, Mode: 0o755, UID: root.uid, GID: root.gid},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("/put 755 %s\n/put/sub 750 %s\n/put/sub/small 604 %s\n/put/deep 755 %s\n/put/deep/big 600 %d %d\n/put/empty 644 %s\n",
		root, u, u, root, root.uid, u.gid, root)
	if got := b.stat("/put", "/put/sub", "/put/sub/small", "/put/deep", "/put/deep/big", "/put/empty"); got != want {
		t.Errorf("stat in the sandbox:\n%s want\n%s", got, want)
	}
	if got := b.ok("cat", b.path("/put/sub/small"), b.path("/put/empty"), b.path("/put/deep/small")); got != "bytesfrom host" {
		t.Errorf("the files' contents = %q, want %q", got, "bytesfrom host")
	}
	if got := b.ok(b.tool("wc", "-c", b.path("/put/deep/big"))...); !strings.HasPrefix(strings.TrimSpace(got), fmt.Sprint(3<<20)+" ") {
		t.Errorf("big: wc -c = %q, want %d bytes", got, 3<<20)
	}
	// A host file that is not there is the caller's error, not the
	// provider's.
	err = provider.Put(c, b.sb, []provider.Entry{{Path: "/put/x", HostPath: filepath.Join(t.TempDir(), "nope")}})
	if err == nil || provider.IsProviderError(err) {
		t.Errorf("put of a missing host file: %v; want a plain error", err)
	}
}

// start starts argv as a streamed command.
func (b *box) start(stderr io.Writer, argv ...string) *provider.Process {
	b.t.Helper()
	st, _ := provider.As[provider.Streamer](b.sb)
	p, err := st.Start(ctx(b.t), provider.ExecSpec{Argv: argv}, stderr)
	if err != nil {
		b.t.Fatal(err)
	}
	return p
}

// A long-lived exchange: each line written comes back before the next is
// sent, so the streams are live both ways at once; EOF on stdin ends the
// command with its own status, and stderr is kept apart.
func startExchange(t *testing.T, b *box) {
	proc := b.start(nil, "cat")
	r := bufio.NewReader(proc.Stdout)
	for i := range 5 {
		line := fmt.Sprintf("round %d\n", i)
		if _, err := io.WriteString(proc.Stdin, line); err != nil {
			t.Fatalf("round %d: write: %v", i, err)
		}
		if got, err := r.ReadString('\n'); err != nil || got != line {
			t.Fatalf("round %d: read %q, %v; want %q", i, got, err, line)
		}
	}
	if err := proc.Stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
		t.Fatalf("after EOF: %q, %v; want nothing more", rest, err)
	}
	if code, err := proc.Wait(); err != nil || code != 0 {
		t.Fatalf("wait = %d, %v; want 0", code, err)
	}
	var stderr lockedBuf
	proc = b.start(&stderr, "sh", "-c", "echo err >&2; cat; exit 7")
	io.WriteString(proc.Stdin, "ping\n")
	line := make([]byte, 5)
	if _, err := io.ReadFull(proc.Stdout, line); err != nil || string(line) != "ping\n" {
		t.Fatalf("echoed %q, %v", line, err)
	}
	proc.Stdin.Close()
	if rest, _ := io.ReadAll(proc.Stdout); len(rest) != 0 {
		t.Fatalf("after EOF: %q", rest)
	}
	if code, err := proc.Wait(); code != 7 || err != nil || stderr.String() != "err\n" {
		t.Fatalf("wait = %d, %v, stderr %q; want 7 and err apart", code, err, stderr.String())
	}
	// A streamed command killed by a signal is 128+N, as for Exec.
	proc = b.start(nil, "sh", "-c", "kill -TERM $$")
	proc.Stdin.Close()
	io.Copy(io.Discard, proc.Stdout)
	if code, err := proc.Wait(); code != 128+15 || err != nil {
		t.Fatalf("wait for a command killed by TERM = %d, %v; want 143", code, err)
	}
}

// hostile plants, by commands in the sandbox, the tree a hostile harness
// would leave to be captured: a link to a host file (whose content is a
// unique marker: a provider whose sandbox sees host paths would read it
// if it followed the link), a link to /dev/zero, a 1 GiB sparse file, a
// fifo and a small regular file; with positive controls that each is
// really there.
func (b *box) hostile() (hostFile, marker string) {
	t := b.t
	t.Helper()
	hostFile = filepath.Join(t.TempDir(), "host-secret")
	marker = "host-marker-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + time.Now().Format("150405.000000000")
	if err := os.WriteFile(hostFile, []byte(marker), 0o600); err != nil {
		t.Fatal(err)
	}
	_, root := b.owners()
	if err := provider.UploadBytes(ctx(t), b.sb, []byte("small"), "/cap/small", 0o644, root.uid, root.gid); err != nil {
		t.Fatal(err)
	}
	cap := b.path("/cap")
	b.ok(b.tool("ln", "-s", hostFile, cap+"/link")...)
	b.ok(b.tool("ln", "-s", "/dev/zero", cap+"/zero")...)
	b.ok(b.tool("truncate", "-s", "1G", cap+"/sparse")...)
	b.ok(b.tool("mkfifo", cap+"/fifo")...)
	got := b.ok(b.tool("readlink", cap+"/link")...) + b.ok(b.tool("readlink", cap+"/zero")...) +
		b.ok(b.tool("stat", "-c", "%s %F", cap+"/sparse")...) + b.ok(b.tool("stat", "-c", "%F", cap+"/fifo")...)
	want := hostFile + "\n/dev/zero\n1073741824 regular file\nfifo\n"
	if got != want {
		t.Fatalf("positive control: planting gave %q, want %q", got, want)
	}
	return hostFile, marker
}

// grepTree fails when anything under dir is not a regular file or a
// directory, or holds marker.
func grepTree(t *testing.T, dir, marker string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			t.Errorf("not a regular file on the host: %s (%s)", p, d.Type())
			return nil
		}
		if d.Type().IsRegular() {
			if b, _ := hostfile.ReadFile(p, 2<<30); bytes.Contains(b, []byte(marker)) {
				t.Errorf("the host file's marker is in %s", p)
			}
		}
		return nil
	})
}

// Captures are data: links are recorded with their targets and never
// created, the fifo is skipped, the sparse file is cut at the cap decided
// on its apparent size (what is written to disk is measured), and
// nothing of the host file is read.
func capturesAreData(t *testing.T, b *box) {
	hostFile, marker := b.hostile()
	dst := filepath.Join(t.TempDir(), "cap")
	got, err := provider.Fetch(ctx(t), b.sb, "/cap", dst, provider.FetchLimits{FileBytes: 1 << 20, Budget: provider.NewBudget(4 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]provider.Withheld{
		"/cap/link":   {Path: "/cap/link", Kind: provider.WithheldSymlink, Target: hostFile},
		"/cap/zero":   {Path: "/cap/zero", Kind: provider.WithheldSymlink, Target: "/dev/zero"},
		"/cap/sparse": {Path: "/cap/sparse", Kind: provider.WithheldTruncated, Size: 1 << 30, Written: 1 << 20},
		"/cap/fifo":   {Path: "/cap/fifo", Kind: provider.WithheldSpecial},
	}
	for _, w := range got.Withheld {
		if want[w.Path] != w {
			t.Errorf("withheld %+v, want %+v", w, want[w.Path])
		}
		delete(want, w.Path)
	}
	if len(want) != 0 {
		t.Errorf("not recorded: %+v (got %+v)", want, got.Withheld)
	}
	if got.Cut != 1 || got.Omitted != 0 || got.Bytes != 1<<20+5 {
		t.Errorf("cut %d, omitted %d, bytes %d; want 1, 0, %d", got.Cut, got.Omitted, got.Bytes, 1<<20+5)
	}
	for _, n := range []string{"link", "zero", "fifo"} {
		if _, err := os.Lstat(filepath.Join(dst, n)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists on the host: %v", n, err)
		}
	}
	if b, err := hostfile.ReadFile(filepath.Join(dst, "small"), 100); err != nil || string(b) != "small" {
		t.Errorf("regular file: %q %v", b, err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dst, "sparse"), &st); err != nil || st.Size != 1<<20 || st.Blocks*512 > 1<<20+64<<10 {
		t.Errorf("sparse file on the host: size %d, %d bytes on disk, %v; want 1 MiB", st.Size, st.Blocks*512, err)
	}
	grepTree(t, dst, marker)
}

// At most MaxWithheld entries are listed; the rest are counted.
func withheldListIsCapped(t *testing.T, b *box) {
	n := provider.MaxWithheld + 500
	_, root := b.owners()
	if err := b.sb.Mkdir(ctx(t), "/links", 0o755, root.uid, root.gid); err != nil {
		t.Fatal(err)
	}
	b.ok("sh", "-c", `i=0; while [ $i -lt $2 ]; do $3 -s /dev/zero "$1/$i" || exit 1; i=$((i+1)); done`,
		"sh", b.path("/links"), fmt.Sprint(n), strings.Join(b.tool("ln"), " "))
	if got := strings.Count(b.ok(b.tool("ls", b.path("/links"))...), "\n"); got != n {
		t.Fatalf("positive control: %d links planted, want %d", got, n)
	}
	got, err := provider.Fetch(ctx(t), b.sb, "/links", filepath.Join(t.TempDir(), "links"), provider.FetchLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Withheld) != provider.MaxWithheld || got.Omitted != 500 {
		t.Errorf("withheld %d, omitted %d; want %d, 500", len(got.Withheld), got.Omitted, provider.MaxWithheld)
	}
}

// Single files are read the way the deliverable, stderr and seeded
// markers are: a link (to a host file or /dev/zero) is refused with its
// target named, a fifo is refused, a huge file is cut.
func downloadBytesNeverFollows(t *testing.T, b *box) {
	hostFile, marker := b.hostile()
	c := ctx(t)
	for _, l := range []struct{ path, target string }{{"/cap/link", hostFile}, {"/cap/zero", "/dev/zero"}} {
		got, err := provider.DownloadBytes(c, b.sb, l.path)
		if !errors.Is(err, hostfile.ErrNotRegular) || !strings.Contains(err.Error(), l.target) || len(got) != 0 {
			t.Errorf("%s: %q, %v; want ErrNotRegular naming %s", l.path, got, err, l.target)
		}
		if bytes.Contains(got, []byte(marker)) {
			t.Errorf("%s: the host file was read", l.path)
		}
	}
	if got, err := provider.DownloadFile(c, b.sb, "/cap/sparse", 4096); !errors.Is(err, hostfile.ErrTooLarge) || len(got) != 4096 {
		t.Errorf("sparse: %d bytes, %v; want 4096 and ErrTooLarge", len(got), err)
	}
	if _, err := provider.DownloadBytes(c, b.sb, "/cap/fifo"); !errors.Is(err, hostfile.ErrNotRegular) {
		t.Errorf("fifo: %v; want ErrNotRegular", err)
	}
}

// The read cap stops a download without failing it: the stop is
// recorded and what was written stays under the cap.
func readCapStops(t *testing.T, b *box) {
	_, root := b.owners()
	if err := provider.UploadBytes(ctx(t), b.sb, make([]byte, 4<<20), "/big", 0o644, root.uid, root.gid); err != nil {
		t.Fatal(err)
	}
	got, err := provider.Fetch(ctx(t), b.sb, "/big", filepath.Join(t.TempDir(), "big"), provider.FetchLimits{ReadBytes: 1 << 20})
	if err != nil || got.Cut == 0 || got.Bytes >= 1<<20 || len(got.Withheld) == 0 || got.Withheld[len(got.Withheld)-1].Kind != provider.WithheldStopped {
		t.Errorf("read-capped fetch: %+v, %v; want a recorded stop under 1 MiB", got, err)
	}
}

// A sandbox that is gone is a transport failure (ErrGone), not an exit
// status or a missing path; Inspect says it is gone without an error.
func goneIsProviderError(t *testing.T, b *box) {
	c := ctx(t)
	if err := b.sb.Destroy(c); err != nil {
		t.Fatal(err)
	}
	if _, err := b.sb.Exec(c, provider.ExecSpec{Argv: []string{"true"}}); !provider.IsProviderError(err) || !errors.Is(err, provider.ErrGone) {
		t.Errorf("exec in a destroyed sandbox: %v; want a ProviderError wrapping ErrGone", err)
	}
	err := b.sb.Download(c, "/", filepath.Join(t.TempDir(), "x"))
	if !provider.IsProviderError(err) || errors.Is(err, provider.ErrPathNotFound) {
		t.Errorf("download from a destroyed sandbox: %v; want a ProviderError, not ErrPathNotFound", err)
	}
	if info, err := b.sb.Inspect(c); err != nil || info.Exists || info.Running {
		t.Errorf("inspect a destroyed sandbox = %+v, %v; want not existing, no error", info, err)
	}
}

func destroyIsIdempotent(t *testing.T, b *box) {
	c := ctx(t)
	for i := range 2 {
		if err := b.sb.Destroy(c); err != nil {
			t.Fatalf("destroy %d: %v", i+1, err)
		}
	}
	if info, err := b.sb.Inspect(c); err != nil || info.Exists {
		t.Errorf("inspect after destroy = %+v, %v", info, err)
	}
}

// Inspect reports the limits applied (the defaults, for New's sandbox),
// or none when the provider applies none.
func limits(t *testing.T, b *box) {
	info, err := b.sb.Inspect(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case b.env.Caps.Limits && (info.Limits == nil || *info.Limits != provider.DefaultLimits):
		t.Errorf("Inspect().Limits = %+v; want %+v", info.Limits, provider.DefaultLimits)
	case !b.env.Caps.Limits && info.Limits != nil:
		t.Errorf("Inspect().Limits = %+v, but Caps.Limits is false", *info.Limits)
	}
}

// Remove removes what a scratch pattern matches, as the rmtree helper
// would, each path a line of its report.
func remove(t *testing.T, b *box) {
	c := ctx(t)
	if err := provider.Put(c, b.sb, []provider.Entry{
		{Path: "/rm/a", Data: []byte("a"), Mode: 0o644},
		{Path: "/rm/d", Dir: true, Mode: 0o755},
		{Path: "/rm/d/f", Data: []byte("f"), Mode: 0o644},
		{Path: "/keep", Data: []byte("k"), Mode: 0o644},
	}); err != nil {
		t.Fatal(err)
	}
	rm, _ := provider.As[provider.Remover](b.sb)
	res, err := rm.Remove(c, []string{"--scratch", "/rm/*"})
	lines := strings.Fields(string(res.Stdout))
	slices.Sort(lines)
	if err != nil || res.ExitCode != 0 || !slices.Equal(lines, []string{"/rm/a", "/rm/d"}) {
		t.Fatalf("remove --scratch /rm/* = %d %q %q, %v; want /rm/a and /rm/d", res.ExitCode, res.Stdout, res.Stderr, err)
	}
	if got := b.ok(b.tool("ls", "-a", b.path("/rm"))...); got != ".\n..\n" {
		t.Errorf("left in /rm: %q", got)
	}
	if got := b.ok("cat", b.path("/keep")); got != "k" {
		t.Errorf("/keep = %q", got)
	}
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
