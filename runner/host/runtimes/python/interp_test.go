package python

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/glibc"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

func TestStageInterpreterRefusesAnUnpinnedArch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "py")
	fetch := func(context.Context, string) (io.ReadCloser, error) { t.Error("fetched"); return nil, errors.New("no") }
	_, err := StageInterpreter(context.Background(), InterpOptions{Dir: dir, Arch: "riscv64", Fetch: fetch})
	if !errors.Is(err, adapter.ErrPlatform) || !strings.Contains(err.Error(), "riscv64") {
		t.Errorf("riscv64: %v, want ErrPlatform naming it", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Error("a tree was made for an unpinned arch")
	}
}

// serve is a Fetcher answering body for every URL, counting the calls.
func serve(body []byte, err error, calls *int) Fetcher {
	return func(context.Context, string) (io.ReadCloser, error) {
		*calls++
		if err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader(string(body))), nil
	}
}

func pinOf(body []byte) debPin {
	s := sha256.Sum256(body)
	return debPin{Package: "libx", Version: "1.0-1", Pool: "debian/pool/main/x/libx_1.0-1_amd64.deb", Size: int64(len(body)), SHA256: hex.EncodeToString(s[:])}
}

// A .deb is used only when its size and sha256 are the pinned ones; one
// that is is cached by its sha256 and not fetched again.
func TestDebPinChecksAndCaches(t *testing.T) {
	body := []byte("!<arch>\nthe pinned deb")
	p := pinOf(body)
	for _, bad := range [][]byte{[]byte("!<arch>\nthe pinned deX"), append(append([]byte{}, body...), 'x'), body[:10]} {
		calls, cache := 0, t.TempDir()
		if f, err := p.open(context.Background(), cache, serve(bad, nil, &calls)); err == nil || !strings.Contains(err.Error(), p.SHA256) {
			t.Errorf("a body of %d bytes unlike the pin: %v, want refused naming the sum", len(bad), err)
			f.Close()
		}
		if got, _ := os.ReadDir(cache); len(got) != 0 {
			t.Errorf("a refused body left %v in the cache", got)
		}
	}
	calls, cache := 0, t.TempDir()
	for range 2 {
		f, err := p.open(context.Background(), cache, serve(body, nil, &calls))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if calls != 1 {
		t.Errorf("two opens fetched %d times, want 1 (the second from the cache)", calls)
	}
	// A cached file that no longer matches is fetched again.
	os.WriteFile(filepath.Join(cache, p.SHA256+".deb"), []byte("rot"), 0o644)
	f, err := p.open(context.Background(), cache, serve(body, nil, &calls))
	if err != nil || calls != 2 {
		t.Errorf("a rotten cache entry: %v, %d fetches, want a fetch", err, calls)
	} else {
		f.Close()
	}
}

// When Debian drops a pinned version, the error names the .deb and the
// command that regenerates the pins.
func TestDebPinGoneNamesTheDebAndTheFix(t *testing.T) {
	calls := 0
	p := pinOf([]byte("x"))
	_, err := p.open(context.Background(), t.TempDir(), serve(nil, fmt.Errorf("%w: GET x: 404 Not Found", ErrGone), &calls))
	if !errors.Is(err, ErrGone) || !strings.Contains(err.Error(), "libx_1.0-1") || !strings.Contains(err.Error(), regenerate) {
		t.Errorf("a 404: %v, want ErrGone naming libx_1.0-1 and %q", err, regenerate)
	}
}

var staged struct {
	once  sync.Once
	base  string // removed by TestMain
	cache string
	dir   string
	info  InterpInfo
	cold  time.Duration
	err   error
}

// stagedTree stages the host arch's interpreter once per test process,
// from Debian's mirror into a fresh cache (testenv.Long; a mirror out of
// reach is testenv.Missing: the gate fails, a developer's run skips).
func stagedTree(t *testing.T) (string, InterpInfo) {
	t.Helper()
	testenv.Long(t, "stages the interpreter from deb.debian.org")
	staged.once.Do(func() {
		base, err := os.MkdirTemp("", "sp-interp-")
		if err != nil {
			staged.err = err
			return
		}
		staged.base = base
		staged.cache, staged.dir = filepath.Join(base, "cache"), filepath.Join(base, "tree")
		start := time.Now()
		staged.info, staged.err = StageInterpreter(context.Background(), InterpOptions{Dir: staged.dir, Arch: runtime.GOARCH, Cache: staged.cache})
		staged.cold = time.Since(start)
	})
	if errors.Is(staged.err, runtimes.ErrUnreachable) {
		testenv.Missing(t, fmt.Sprintf("Debian's mirror (%v)", staged.err), "the machine must reach "+Mirror)
	}
	if staged.err != nil {
		t.Fatalf("stage: %v", staged.err)
	}
	return staged.dir, staged.info
}

// TestMain removes the staged tree and its cache (about 60 MB) after the
// tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if staged.base != "" {
		os.RemoveAll(staged.base)
	}
	os.Exit(code)
}

// unresolvedNeeds names every DT_NEEDED of every ELF file under root that
// is no regular file of libDir, and every file the ELF reader refuses.
func unresolvedNeeds(root, libDir string) ([]string, int, error) {
	var out []string
	elves := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		e, err := glibc.ReadELFFile(p, true)
		if errors.Is(err, glibc.ErrNotELF) {
			return nil
		}
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", p, err))
			return nil
		}
		elves++
		for _, n := range e.Needed {
			if fi, err := os.Lstat(filepath.Join(libDir, n)); err != nil || !fi.Mode().IsRegular() {
				rel, _ := filepath.Rel(root, p)
				out = append(out, rel+" needs "+n)
			}
		}
		return nil
	})
	return out, elves, err
}

// Every library an ELF file of the tree needs is in the tree's library
// dir: the closure of interpPackages is whole.
func TestInterpTreeNeedsOnlyItself(t *testing.T) {
	dir, _ := stagedTree(t)
	lib := filepath.Join(dir, "usr/lib", triplets[runtime.GOARCH])
	bad, elves, err := unresolvedNeeds(dir, lib)
	if err != nil {
		t.Fatal(err)
	}
	if elves < 50 {
		t.Errorf("positive control: %d ELF files in the tree, want the interpreter, its extension modules and libraries", elves)
	}
	for _, b := range bad {
		t.Error(b)
	}
	// Planted: a copy of the tree without libz.so.1 fails the check.
	planted := filepath.Join(t.TempDir(), "t")
	if out, err := exec.Command("cp", "-a", dir, planted).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	os.Remove(filepath.Join(planted, "usr/lib", triplets[runtime.GOARCH], "libz.so.1"))
	if bad, _, _ := unresolvedNeeds(planted, filepath.Join(planted, "usr/lib", triplets[runtime.GOARCH])); !strings.Contains(strings.Join(bad, "\n"), "needs libz.so.1") {
		t.Errorf("a tree without libz.so.1: %v, want it named", bad)
	}
}

// probe is the Python the run tests start: the modules a harness needs,
// then where the interpreter says it is.
const probe = `import sys, ssl, sqlite3, json, ctypes, zlib, lzma, bz2, hashlib, socket, subprocess
print("exe=" + sys.executable)
print("prefix=" + sys.prefix)
print("path=" + "|".join(sys.path))
print("json=" + json.__file__)
print("child=" + subprocess.run([sys.executable, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True).stdout.strip())
print("sh=" + subprocess.run(["sh", "-c", "ls / >/dev/null && echo child-ok"], capture_output=True, text=True).stdout.strip())
`

// checkProbe checks what probe printed for a tree at root.
func checkProbe(t *testing.T, out, root string) {
	t.Helper()
	want := map[string]string{"exe": root + "/usr/bin/python3", "prefix": root + "/usr", "child": root + "/usr", "json": root + "/usr/lib/python3.13/json/__init__.py", "sh": "child-ok"}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(l, "=")
		got[k] = v
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (output %q)", k, got[k], v, out)
		}
	}
	if got["path"] == "" {
		t.Errorf("no sys.path in %q", out)
	}
	for _, p := range strings.Split(got["path"], "|") {
		if p != root && !strings.HasPrefix(p, root+"/") {
			t.Errorf("sys.path holds %q, outside the tree %s", p, root)
		}
	}
}

// The tree runs on the host too (its glibc is older than the tree's),
// from a second stage that takes every .deb from the cache.
func TestInterpRunsFromTheCache(t *testing.T) {
	_, info := stagedTree(t)
	dir := filepath.Join(t.TempDir(), "warm")
	offline := func(context.Context, string) (io.ReadCloser, error) {
		return nil, errors.New("fetched with a warm cache")
	}
	start := time.Now()
	info2, err := StageInterpreter(context.Background(), InterpOptions{Dir: dir, Arch: runtime.GOARCH, Cache: staged.cache, Fetch: offline})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stage cold %v, warm %v; %+v", staged.cold.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), info2)
	if info2 != info || info.Version != "3.13.5" || info.Launcher != "usr/bin/python3" {
		t.Errorf("info %+v, cold %+v", info2, info)
	}
	out, err := exec.Command(filepath.Join(dir, info.Launcher), "-c", probe).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	checkProbe(t, string(out), dir)
	if fi, err := os.Stat(filepath.Join(dir, info.SitePackages)); err != nil || !fi.IsDir() {
		t.Errorf("site-packages: %v", err)
	}
}
