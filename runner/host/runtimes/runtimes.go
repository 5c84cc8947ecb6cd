// Package runtimes prepares harness runtimes on the host from the pins a
// manifest names, so nothing is ever installed from the network inside a
// sandbox (BACKGROUND.md: "prepare relocatable runtimes on the host and
// upload them"). It is kind-neutral: a runtime kind (runtimes/npm today)
// plans a Spec from the manifest's with block (Kind) and registers once
// (Register); the cache, its lock, the tree sums, the stamp and the link
// into a case are here, the same for every kind (docs/add-runtime-kind.md).
//
// A prepared runtime is a directory under a cache dir,
// CACHE/NAME@VERSION-TARGET-HASH, holding the harness and everything it
// needs that the image may lack (a JS entry: the host's Node binary, or
// the npm Node build the manifest pins, as bin/node; a native entry: its
// binary as bin/NAME), plus a stamp file that
// records what went in and the sha256 of the tree. Prepare
//
//   - stages into a fresh directory next to the final one and renames it into
//     place only after every check passed; a failed or crashed stage never
//     becomes a runtime and is removed (at once, or by the next Prepare);
//   - has the kind's Stage check what it fetches against its pins, and
//     checks the sha256 of the pinned part of the tree against the pin;
//   - reuses a cached runtime only when its tree hashes to the stamp's sum;
//     anything else is removed and rebuilt;
//   - never runs the harness's code: the version check (version_args)
//     starts the harness, which on the host would have the files, the
//     network and the user of whoever runs sandproof, so it is handed to
//     the caller (Runtime.VersionCheck, adapter.Prepared.VersionCheck) to
//     run in a sandbox of the runtime's image (certify does, before any
//     case); a runtime prepared here is marked not checked, with why;
//   - caches only trees of files and directories (what links into a case);
//   - serialises preparations of one runtime with a lock file created with
//     O_EXCL that names its holder by pid and start time, so a lock left by a
//     crashed process is recognised and broken (no flock: it does not survive
//     every filesystem and says nothing about who holds it).
package runtimes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/artifact"
	"github.com/sandproof/sandproof/runner/host/glibc"
	"github.com/sandproof/sandproof/runner/warden/atomicfile"
)

// Errors callers branch on.
var (
	// ErrChecksum means a tarball or a tree did not hash to its pin or stamp.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrVersion means the runtime's version check did not answer the
	// pinned version (certify runs it in a sandbox: adapter.ErrVersion).
	ErrVersion = adapter.ErrVersion
	// ErrUnsupported means the host cannot prepare the runtime for the
	// target (a JS entry for musl with a glibc host Node, or for another
	// architecture than the host's Node).
	ErrUnsupported = errors.New("target not supported on this host")
)

// LayerDir is where a glibc layer is in the runtime tree.
const LayerDir = "glibc"

// StampFile is the name of the stamp inside a prepared runtime. It is not
// part of the tree sum.
const StampFile = ".sandproof-runtime.json"

// Target is the platform a runtime is prepared for.
type Target struct {
	// Arch is the GOARCH spelling: "amd64" or "arm64".
	Arch string `json:"arch"`
	// Libc is "glibc" or "musl".
	Libc string `json:"libc"`
	// Baseline selects x86-64 builds that do not need AVX2.
	Baseline bool `json:"baseline,omitempty"`
	// GlibcLayer is a glibc build for an image without glibc: the runtime
	// carries the host's glibc (package glibc) and its executables' loader
	// is a sandbox path, so the host cannot start them.
	GlibcLayer bool `json:"glibc_layer,omitempty"`
}

// String is the npm platform suffix: "linux-x64", "linux-x64-baseline-musl".
func (t Target) String() string {
	a := t.Arch
	switch a {
	case "amd64":
		a = "x64"
	}
	s := "linux-" + a
	if t.Baseline {
		s += "-baseline"
	}
	if t.Libc == "musl" {
		s += "-musl"
	}
	if t.GlibcLayer {
		s += "-glibc-layer"
	}
	return s
}

func (t Target) Valid() error {
	if t.Arch != "amd64" && t.Arch != "arm64" {
		return fmt.Errorf("bad target arch %q (want amd64 or arm64)", t.Arch)
	}
	if t.Libc != "glibc" && t.Libc != "musl" {
		return fmt.Errorf("bad target libc %q (want glibc or musl)", t.Libc)
	}
	if t.Baseline && t.Arch != "amd64" {
		return fmt.Errorf("baseline is an x86-64 variant, not %q", t.Arch)
	}
	if t.GlibcLayer && t.Libc != "glibc" {
		return fmt.Errorf("a glibc layer carries glibc, not %q", t.Libc)
	}
	return nil
}

// HostTarget is the host's own platform: its arch, glibc unless a musl
// loader is the only one, baseline when the CPU lacks AVX2.
func HostTarget() Target {
	t := Target{Arch: runtime.GOARCH, Libc: "glibc"}
	if m, _ := filepath.Glob("/lib/ld-musl-*.so.1"); len(m) > 0 {
		if g, _ := filepath.Glob("/lib*/ld-linux-*.so.*"); len(g) == 0 {
			t.Libc = "musl"
		}
	}
	if t.Arch == "amd64" {
		if b, err := os.ReadFile("/proc/cpuinfo"); err == nil && !regexp.MustCompile(`(?m)^flags\s*:.*\bavx2\b`).Match(b) {
			t.Baseline = true
		}
	}
	return t
}

// Spec says what to prepare. SpecFor makes one from a manifest.
type Spec struct {
	// Name is a file-name form of the package ("scope+name"); with
	// Version, Target and Hash it names the cache entry.
	Name    string
	Version string
	Target  Target
	// Package and Integrity are the main npm package and its pinned sha512
	// integrity (recorded in the stamp; Stage checks it).
	Package   string
	Integrity string
	// PackagesSHA256 is the pinned sha256 (TreeSum) of the staged tree
	// without HostFiles: what came from npm. Empty means not pinned (the
	// sum is still recorded and verified on reuse).
	PackagesSHA256 string
	// HostFiles are tree paths taken from the host (bin/node, bin), left out of
	// PackagesSHA256 and included in the stamp's tree sum.
	HostFiles []string
	// Entry is the argv that starts the harness, relative to the runtime
	// dir for its first element and for any element starting with "./".
	Entry []string
	// VersionArgs are appended to Entry to ask the version; its output must
	// contain Version. Nil asks for no check. The check is the caller's to
	// run, in a sandbox (Runtime.VersionCheck): never here.
	VersionArgs []string
	// VersionEnv is added to the version check's env.
	VersionEnv []string
	// Stage fills dir (an empty directory) with the runtime. It reports
	// facts for the stamp in info (free-form).
	Stage func(ctx context.Context, dir string, info map[string]any) error
	// GlibcLayer, when set, is the sandbox dir of a glibc layer built
	// into the tree's glibc/ after the npm part's pin is checked
	// (glibc.Build: the host's loader and libraries, the executables'
	// interpreter rewritten to GlibcLayer/ld.so).
	GlibcLayer string
	// Hash, when set, names the content (a hash of every pin that shapes
	// the tree): a changed pin gets a cache entry of its own.
	Hash string
	// Requires are what this build needs of the image beyond the
	// manifest's requires (adapter.Prepared.Requires); nil adds nothing.
	// Not in the key: Hash covers the pins that choose the build.
	Requires []string
	// HostParts, when set, lists the prepared runtime's files that came
	// from outside its pins (the host's Node), for the evidence
	// (adapter.Prepared.Host).
	HostParts func(rt *Runtime) []adapter.HostPart
}

// Key names the cache entry: NAME@VERSION-TARGET[-HASH].
func (s Spec) Key() string {
	k := s.Name + "@" + s.Version + "-" + s.Target.String()
	if s.Hash != "" {
		k += "-" + s.Hash
	}
	return k
}

// Runtime is a prepared runtime.
type Runtime struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Target  Target `json:"target"`
	// Dir is the runtime's host directory (in the cache: do not write).
	Dir   string   `json:"dir"`
	Entry []string `json:"entry"`
	// Package and Integrity are the pinned npm package.
	Package   string `json:"package"`
	Integrity string `json:"integrity"`
	// PackagesSHA256 is the sum of the npm part, TreeSHA256 of everything
	// (the stamp excepted).
	PackagesSHA256 string `json:"packages_sha256"`
	TreeSHA256     string `json:"tree_sha256"`
	Files          int    `json:"files"`
	Bytes          int64  `json:"bytes"`
	// GlibcLayer is the layer built into the tree (nil for none).
	GlibcLayer *glibc.Layer `json:"glibc_layer,omitempty"`
	// Info holds what Stage reported (node version and sha256, platform
	// package, ...).
	Info map[string]any `json:"info,omitempty"`
	// VersionChecked is always false here: the version check starts the
	// harness's code, which never runs on the host; VersionUnchecked
	// says so when the spec asks for a check, and VersionCheck is that
	// check, for the caller to run in a sandbox (certify records its
	// answer in the evidence's harness_runtime.version_checked).
	VersionChecked   bool                  `json:"version_checked"`
	VersionUnchecked string                `json:"version_unchecked,omitempty"`
	VersionCheck     *adapter.VersionCheck `json:"-"`
	// PreparedAt and PrepareSeconds are from the cold build.
	PreparedAt     time.Time `json:"prepared_at"`
	PrepareSeconds float64   `json:"prepare_seconds"`
	// Cached is set when Prepare reused the runtime; Seconds is what this
	// Prepare call took (a verified reuse, or the cold build).
	Cached  bool    `json:"-"`
	Seconds float64 `json:"-"`
}

// Argv returns the entry argv with host paths, plus args.
func (r *Runtime) Argv(args ...string) []string {
	return absEntry(r.Dir, r.Entry, args)
}

func absEntry(dir string, entry, args []string) []string {
	out := make([]string, 0, len(entry)+len(args))
	for i, e := range entry {
		if i == 0 || strings.HasPrefix(e, "./") {
			e = filepath.Join(dir, filepath.FromSlash(e))
		}
		out = append(out, e)
	}
	return append(out, args...)
}

// DefaultCacheDir is $XDG_CACHE_HOME/sandproof/runtimes (~/.cache/... when
// unset).
func DefaultCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find cache dir: %w", err)
	}
	return filepath.Join(d, "sandproof", "runtimes"), nil
}

// CacheDir is the runtimes' cache: $SANDPROOF_RUNTIME_CACHE, else
// DefaultCacheDir. A kind that keeps downloads of its own beside the
// runtimes (python's .debs) puts them under it.
func CacheDir() (string, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return d, nil
	}
	return DefaultCacheDir()
}

// Logf, when set, receives one line per notable step (cache hit, rebuild
// and why, stale lock broken).
var Logf = func(format string, args ...any) {}

// Prepare returns the runtime of spec from cacheDir, building it when the
// cache has none or a broken one. See the package comment for the rules.
func Prepare(ctx context.Context, spec Spec, cacheDir string) (*Runtime, error) {
	start := time.Now()
	if spec.Name == "" || spec.Version == "" || spec.Stage == nil || len(spec.Entry) == 0 {
		return nil, fmt.Errorf("prepare runtime: incomplete spec %q", spec.Key())
	}
	if err := spec.Target.Valid(); err != nil {
		return nil, fmt.Errorf("prepare runtime %s: %w", spec.Key(), err)
	}
	if cacheDir == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return nil, err
		}
		cacheDir = d
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("prepare runtime %s: %w", spec.Key(), err)
	}
	final := filepath.Join(cacheDir, spec.Key())
	release, err := acquireLock(ctx, final+".lock")
	if err != nil {
		return nil, fmt.Errorf("prepare runtime %s: %w", spec.Key(), err)
	}
	defer release()

	removeLeftovers(cacheDir, spec.Key())
	if rt, reused, err := reuseCached(ctx, spec, final, start); reused || err != nil {
		return rt, err
	}
	return buildIntoCache(ctx, spec, cacheDir, final, start)
}

// removeLeftovers removes the stages a holder of key's lock that crashed
// left in cacheDir. The caller holds the lock: nobody else is staging
// this key.
func removeLeftovers(cacheDir, key string) {
	for _, pat := range []string{".stage-*", ".trash-*"} {
		old, _ := filepath.Glob(filepath.Join(cacheDir, "."+key+pat))
		for _, o := range old {
			Logf("runtimes: removing leftover %s", o)
			_ = os.RemoveAll(o)
		}
	}
}

// reuseCached returns the cache entry final when it verifies (reused);
// any other entry is set aside for a rebuild (not reused, no error).
func reuseCached(ctx context.Context, spec Spec, final string, start time.Time) (_ *Runtime, reused bool, _ error) {
	if _, err := os.Lstat(final); err != nil {
		return nil, false, nil
	}
	rt, verr := Verify(ctx, spec, final)
	if verr == nil {
		rt.Cached = true
		rt.Seconds = time.Since(start).Seconds()
		Logf("runtimes: %s reused from cache (%.2fs)", spec.Key(), rt.Seconds)
		return rt, true, nil
	}
	Logf("runtimes: %s in cache is unusable, rebuilding: %v", spec.Key(), verr)
	if err := removeAside(final); err != nil {
		return nil, false, fmt.Errorf("prepare runtime %s: remove broken cache entry: %w", spec.Key(), err)
	}
	return nil, false, nil
}

// buildIntoCache builds spec in a fresh stage dir of cacheDir, stamps it
// and renames it to final; a stage that failed is removed.
func buildIntoCache(ctx context.Context, spec Spec, cacheDir, final string, start time.Time) (*Runtime, error) {
	stage, err := os.MkdirTemp(cacheDir, "."+spec.Key()+".stage-")
	if err != nil {
		return nil, fmt.Errorf("prepare runtime %s: %w", spec.Key(), err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(stage)
		}
	}()
	if err := os.Chmod(stage, 0o755); err != nil {
		return nil, fmt.Errorf("prepare runtime %s: %w", spec.Key(), err)
	}
	rt, err := build(ctx, spec, stage)
	if err != nil {
		return nil, fmt.Errorf("prepare runtime %s: %w", spec.Key(), err)
	}
	rt.PreparedAt = start.UTC()
	rt.PrepareSeconds = time.Since(start).Seconds()
	if err := writeStamp(stage, rt); err != nil {
		return nil, fmt.Errorf("prepare runtime %s: %w", spec.Key(), err)
	}
	if err := os.Rename(stage, final); err != nil {
		return nil, fmt.Errorf("prepare runtime %s: move into place: %w", spec.Key(), err)
	}
	ok = true
	// Best effort: the runtime is in place; a lost rename only costs a
	// rebuild after a crash.
	_ = atomicfile.SyncDir(cacheDir)
	rt.Dir = final
	rt.Seconds = time.Since(start).Seconds()
	Logf("runtimes: %s prepared (%.1fs, %d files, %d bytes)", spec.Key(), rt.Seconds, rt.Files, rt.Bytes)
	return rt, nil
}

func build(ctx context.Context, spec Spec, dir string) (*Runtime, error) {
	info := map[string]any{}
	if err := spec.Stage(ctx, dir, info); err != nil {
		return nil, err
	}
	if err := FilesOnly(dir); err != nil {
		return nil, err
	}
	pkgSum, _, _, err := TreeSum(dir, append([]string{StampFile}, spec.HostFiles...))
	if err != nil {
		return nil, err
	}
	if spec.PackagesSHA256 != "" && pkgSum != spec.PackagesSHA256 {
		return nil, fmt.Errorf("%w: npm tree of %s is sha256:%s, pinned sha256:%s", ErrChecksum, spec.Key(), pkgSum, spec.PackagesSHA256)
	}
	var layer *glibc.Layer
	if spec.GlibcLayer != "" {
		// After the pin: the layer comes from the host, and the edit of
		// an npm binary's interpreter is no part of what npm served.
		if layer, err = glibc.Build(glibc.Options{Root: dir, Dir: LayerDir, SandboxDir: spec.GlibcLayer, LibDirs: glibc.HostLibDirs(spec.Target.Arch)}); err != nil {
			return nil, err
		}
	}
	sum, files, size, err := TreeSum(dir, []string{StampFile})
	if err != nil {
		return nil, err
	}
	rt := &Runtime{
		Name: spec.Name, Version: spec.Version, Target: spec.Target, Dir: dir, Entry: spec.Entry,
		Package: spec.Package, Integrity: spec.Integrity, PackagesSHA256: pkgSum, TreeSHA256: sum,
		Files: files, Bytes: size, Info: info, GlibcLayer: layer,
	}
	spec.noteVersion(rt)
	return rt, nil
}

// Verify checks the runtime at dir against spec: the stamp matches the spec,
// and the tree hashes to the stamp's sum (and the npm part to the pin). It
// returns the stamp's runtime, its version check the caller's to run.
func Verify(_ context.Context, spec Spec, dir string) (*Runtime, error) {
	b, err := os.ReadFile(filepath.Join(dir, StampFile))
	if err != nil {
		return nil, fmt.Errorf("read stamp: %w", err)
	}
	var rt Runtime
	if err := json.Unmarshal(b, &rt); err != nil {
		return nil, fmt.Errorf("read stamp: %w", err)
	}
	if rt.Name != spec.Name || rt.Version != spec.Version || rt.Target != spec.Target || rt.Integrity != spec.Integrity {
		return nil, fmt.Errorf("stamp is for %s@%s-%s (%s), want %s (%s)", rt.Name, rt.Version, rt.Target, rt.Integrity, spec.Key(), spec.Integrity)
	}
	if spec.PackagesSHA256 != "" && rt.PackagesSHA256 != spec.PackagesSHA256 {
		return nil, fmt.Errorf("%w: stamp says npm tree sha256:%s, pinned sha256:%s", ErrChecksum, rt.PackagesSHA256, spec.PackagesSHA256)
	}
	sum, files, size, err := TreeSum(dir, []string{StampFile})
	if err != nil {
		return nil, err
	}
	if sum != rt.TreeSHA256 {
		return nil, fmt.Errorf("%w: tree is sha256:%s, stamp says sha256:%s", ErrChecksum, sum, rt.TreeSHA256)
	}
	if err := FilesOnly(dir); err != nil {
		return nil, err // cached by an older sandproof
	}
	rt.Dir, rt.Entry, rt.Files, rt.Bytes = dir, spec.Entry, files, size
	spec.noteVersion(&rt)
	return &rt, nil
}

// FilesOnly refuses (artifact.ErrRefused: the package's content) a tree
// that holds anything but directories and regular files: a runtime is
// hard-linked into a case (linkTree) and uploaded, and a link or device
// in it would fail there, after the tree was cached, on every later run.
func FilesOnly(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			return fmt.Errorf("%w: runtime tree: %q is not a file or directory (%s)", artifact.ErrRefused, filepath.ToSlash(rel), d.Type())
		}
		return nil
	})
}

// notOnHost is why a prepared runtime's version check is not run here.
const notOnHost = "not run on the host: the check starts the harness's own code, which runs only in a sandbox (certify runs it in one of the runtime's image)"

// noteVersion gives rt the version check spec asks for, for the caller
// to run in a sandbox, and marks it not checked. Running it here would
// start the harness's code on the host: with the files (the engine's
// socket, the registry credentials, the model key's file), the network
// and the user of whoever runs sandproof, on every Prepare and every reuse.
func (s Spec) noteVersion(rt *Runtime) {
	rt.VersionChecked, rt.VersionUnchecked, rt.VersionCheck = false, "", nil
	if s.VersionArgs == nil {
		return
	}
	rt.VersionUnchecked = notOnHost
	rt.VersionCheck = &adapter.VersionCheck{
		Argv: append(slices.Clone(s.Entry), s.VersionArgs...),
		Env:  slices.Clone(s.VersionEnv), Want: s.Version,
	}
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

func writeStamp(dir string, rt *Runtime) error {
	b, err := json.MarshalIndent(rt, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteSynced(filepath.Join(dir, StampFile), append(b, '\n'), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644); err != nil {
		return fmt.Errorf("write stamp: %w", err)
	}
	return nil
}

// removeAside renames dir out of the way (so a crash halfway through the
// removal never leaves a half-deleted runtime under the final name) and
// removes it.
func removeAside(dir string) error {
	trash := fmt.Sprintf("%s.trash-%d-%d", filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)), os.Getpid(), time.Now().UnixNano())
	if err := os.Rename(dir, trash); err != nil {
		return err
	}
	return os.RemoveAll(trash)
}
