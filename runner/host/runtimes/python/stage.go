package python

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/artifact"
	"github.com/sandproof/sandproof/runner/host/hostfile"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// Interpreters are the `python` values a manifest may pin: the CPython
// minor version this package stages (interpPins).
var Interpreters = map[string]struct{ Major, Minor int }{"3.13": {3, 13}}

func knownInterpreters() string {
	var ks []string
	for k := range Interpreters {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return strings.Join(ks, ", ")
}

// InterpDir is where the interpreter is in the runtime tree: the
// launcher is InterpDir/usr/bin/python3, the wheels are installed in
// its site-packages dir.
const InterpDir = "python"

// Launcher is the interpreter's launcher, relative to the runtime dir:
// what a manifest's launch argv starts ({runtime_dir}/python/usr/bin/python3).
const Launcher = InterpDir + "/" + launcherPath

// wheelLimits bound the installed wheels together: the largest harness
// here installs about 200 MB in some 20,000 files.
var wheelLimits = artifact.Limits{FileBytes: 256 << 20, TotalBytes: 2 << 30, Entries: 200_000}

// machines are the wheel tag spelling of the pinned arches.
var machines = map[string]string{"amd64": "x86_64", "arm64": "aarch64"}

// SpecFor is the runtime spec of c for target (the tree's own glibc).
func SpecFor(c Config, target runtimes.Target) (runtimes.Spec, error) {
	pins, ok := interpPins[target.Arch]
	if !ok {
		return runtimes.Spec{}, fmt.Errorf("%w: the python interpreter is pinned for %s, not %s", adapter.ErrPlatform, strings.Join(pinnedArches(), ", "), target.Arch)
	}
	plat, err := platformOf(c.Python, pins, target.Arch)
	if err != nil {
		return runtimes.Spec{}, err
	}
	entry := []string{Launcher}
	if c.EntryModule != "" {
		entry = append(entry, "-m", c.EntryModule)
	} else {
		mod, fn, _ := strings.Cut(c.EntryCall, ":")
		entry = append(entry, "-c", fmt.Sprintf("import sys\nfrom %s import %s as main\nsys.exit(main())", mod, fn))
	}
	info := interpInfo(pins)
	spec := runtimes.Spec{
		Name: c.Package, Version: c.Version, Target: target, Hash: specHash(c, target.Arch),
		Package: c.Package, PackagesSHA256: c.TreeSHA256, Entry: entry, VersionArgs: c.VersionArgs,
		Stage: func(ctx context.Context, dir string, stamp map[string]any) error {
			return stage(ctx, c, target.Arch, plat, dir, stamp)
		},
		HostParts: func(*runtimes.Runtime) []adapter.HostPart {
			return []adapter.HostPart{{Path: InterpDir + "/usr/bin/python3.13", Name: "python", Version: info.Version,
				SHA256: info.SHA256, Source: "debian", From: info.Source, Interpreter: true, Pinned: true}}
		},
	}
	for k, v := range c.VersionEnv {
		spec.VersionEnv = append(spec.VersionEnv, k+"="+v)
	}
	slices.Sort(spec.VersionEnv)
	return spec, nil
}

// platformOf is what wheels must fit: the pinned CPython's version (the
// manifest's python must name it) and the glibc the tree carries.
func platformOf(want string, pins []debPin, arch string) (Platform, error) {
	v := Interpreters[want]
	p := Platform{Major: v.Major, Minor: v.Minor, Machine: machines[arch]}
	for _, d := range pins {
		if d.Package == "libc6" {
			_, minor, _ := strings.Cut(strings.SplitN(d.Version, "-", 2)[0], ".")
			p.GlibcMinor, _ = strconv.Atoi(minor)
		}
	}
	got := interpInfo(pins).Version
	if !strings.HasPrefix(got, want+".") {
		return p, fmt.Errorf("python %q: the pinned interpreter is %s", want, got)
	}
	p.Micro, _ = strconv.Atoi(strings.TrimPrefix(got, want+"."))
	if p.GlibcMinor == 0 || p.Machine == "" {
		return p, fmt.Errorf("python: no glibc or machine pinned for %s", arch)
	}
	return p, nil
}

// stage fills dir: the interpreter under InterpDir, then every wheel the
// lock pins, each checked against its sha256, unpacked into the
// interpreter's site-packages through one artifact tree (its caps count
// all the wheels together).
func stage(ctx context.Context, c Config, arch string, plat Platform, dir string, stamp map[string]any) error {
	cache, err := DebCache()
	if err != nil {
		return err
	}
	info, err := StageInterpreter(ctx, InterpOptions{Dir: filepath.Join(dir, InterpDir), Arch: arch, Cache: cache})
	if err != nil {
		return err
	}
	stamp["python_version"], stamp["python_source"], stamp["python_sha256"] = info.Version, info.Source, info.SHA256
	site := filepath.Join(dir, InterpDir, filepath.FromSlash(info.SitePackages))
	// The interpreter leaves its site-packages empty: the wheels' tree
	// takes its place.
	if err := os.Remove(site); err != nil {
		return fmt.Errorf("python: site-packages %s: %w", info.SitePackages, err)
	}
	t, err := artifact.Create(site, wheelLimits)
	if err != nil {
		return err
	}
	defer t.Close()
	dl, err := os.MkdirTemp("", "sandproof-wheels-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dl)
	ix := DefaultIndexFromEnv()
	var wheels []string
	for _, r := range c.Requirements {
		name, err := installWheel(ctx, ix, r, plat, dl, t)
		if err != nil {
			return err
		}
		wheels = append(wheels, name)
	}
	stamp["wheels"] = wheels
	if arch == runtime.GOARCH {
		stamp["bytecode"] = precompile(ctx, filepath.Join(dir, InterpDir))
	}
	return nil
}

// precompile writes the bytecode of the tree's every module (the
// interpreter's and the wheels'), which the sandbox cannot write: a
// read-only tree without it compiles what it imports at every start
// (seconds for an agent's dependencies). It runs the tree's own,
// pinned interpreter on the host, with -I -S: no .pth file of a wheel
// is read (site never runs), nothing of the harness is imported or run,
// only compiled. The hash-based .pyc (unchecked) do not depend on the
// files' times; the recorded file names are the sandbox's
// (/sandproof-runtime/...), not the host's stage dir. A file that does
// not compile (a package's own Python 2 test data) stays without one:
// the count is reported, not an error.
//
// A wheel's sources are its author's, so the compile is bounded three
// ways (red team rt37): only sources of at most maxCompileSource bytes
// are given to it (CPython holds about 460 bytes of AST per byte of a
// dense source; the largest real one here is 1.1 MB), each process's
// address space is capped (ulimit -v), and at the deadline or a cancel
// its whole process group (compileall's workers and forkserver hold its
// output pipe) is killed, and the wait for its output ends.
func precompile(ctx context.Context, root string) string {
	list, skipped, err := compileList(root)
	if err != nil {
		return "not compiled: " + err.Error()
	}
	defer os.Remove(list)
	ctx, cancel := context.WithTimeout(ctx, compileDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, compileMemoryKiB),
		filepath.Join(root, launcherPath), "-S", "-m", "compileall", "-q", "-j", "2",
		"--invalidation-mode", "unchecked-hash", "-s", root, "-p", "/sandproof-runtime/"+InterpDir, "-i", list)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	out := &hostfile.HeadBuffer{Max: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	err = cmd.Run()
	if cmd.Process != nil {
		// What compileall left of its pool, if anything, goes too.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	took := fmt.Sprintf("%.1fs", time.Since(start).Seconds())
	note := ""
	if skipped > 0 {
		note = fmt.Sprintf(" (%d source(s) over %d bytes left without)", skipped, maxCompileSource)
	}
	if err != nil {
		said := strings.ReplaceAll(out.String(), root, "/sandproof-runtime/"+InterpDir)
		return fmt.Sprintf("compiled with errors in %s%s (%v): %s", took, note, err, clipLines(said, 3))
	}
	return "compiled in " + took + note
}

// Bounds of precompile: an agent's dependencies compile in well under a
// minute on two cores, in a few hundred MB.
const (
	compileDeadline  = 10 * time.Minute
	maxCompileSource = 2 << 20
	compileMemoryKiB = 3 << 20 // 3 GiB of address space per process
)

// compileList writes the list of the tree's .py files precompile gives
// compileall (one per line: an artifact's names hold no newline) to a
// temporary file, and counts those left out for their size.
func compileList(root string) (string, int, error) {
	f, err := os.CreateTemp("", "sandproof-compile-")
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	skipped := 0
	w := bufio.NewWriter(f)
	err = filepath.WalkDir(filepath.Join(root, "usr", "lib"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || !strings.HasSuffix(p, ".py") {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Size() > maxCompileSource {
			skipped++
			return nil
		}
		_, err = w.WriteString(p + "\n")
		return err
	})
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		os.Remove(f.Name())
		return "", 0, err
	}
	return f.Name(), skipped, nil
}

func clipLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("(%d more lines)", len(lines)-n))
	}
	return strings.Join(lines, "; ")
}

// installWheel fetches r's wheel for plat into dl and unpacks it into t.
func installWheel(ctx context.Context, ix Index, r Requirement, plat Platform, dl string, t *artifact.Tree) (string, error) {
	files, err := ix.Files(ctx, r.Name, r.Version)
	if err != nil {
		return "", fmt.Errorf("python: %s==%s (lock line %d): %w", r.Name, r.Version, r.Line, err)
	}
	f, _, err := Choose(r, files, plat)
	if err != nil {
		return "", fmt.Errorf("python: %w", err)
	}
	p := filepath.Join(dl, filepath.Base(f.Filename))
	// One wheel on the disk at a time, whatever the lock pins.
	defer os.Remove(p)
	if err := ix.Download(ctx, f, f.Hashes.SHA256, p); err != nil {
		return "", fmt.Errorf("python: %w", err)
	}
	wf, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer wf.Close()
	fi, err := wf.Stat()
	if err != nil {
		return "", err
	}
	if err := artifact.Unzip(wf, fi.Size(), t, wheelEntry); err != nil {
		return "", fmt.Errorf("python: wheel %s: %w", f.Filename, err)
	}
	return f.Filename, nil
}

// wheelEntry maps a wheel's entry to its place in site-packages (PEP 427):
// the .data dir's purelib and platlib go to site-packages like the rest;
// its scripts, headers and data (files for outside site-packages) are
// left out, so a wheel writes nothing but its packages and dist-info.
func wheelEntry(n string) string {
	top, rest, _ := strings.Cut(n, "/")
	if !strings.HasSuffix(top, ".data") {
		return n
	}
	for _, keep := range []string{"purelib/", "platlib/"} {
		if r, ok := strings.CutPrefix(rest, keep); ok && r != "" {
			return r
		}
	}
	return ""
}

// DebCache is where the interpreter's .debs are kept, beside the
// runtimes ($SANDPROOF_RUNTIME_CACHE or the user's cache dir): what
// StageInterpreter's Cache is when the preparer stages, and for the
// conformance suite's own tree.
func DebCache() (string, error) {
	d, err := runtimes.CacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, ".python-debs"), nil
}
