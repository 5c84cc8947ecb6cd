package glibc

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/hostile"
	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/artifact"
	"github.com/sandproof/sandproof/runner/host/hostfile"
)

// hostBinary copies a dynamically linked host binary (Debian's coreutils)
// to dst, or skips when the host has none.
func hostBinary(t *testing.T, name, dst string) {
	t.Helper()
	src := "/bin/" + name
	if in, err := Interp(src); err != nil || in == "" || strings.Contains(in, "musl") {
		testenv.Missing(t, fmt.Sprintf("a glibc dynamic executable at %s (interpreter %q, %v)", src, in, err),
			"these tests need a glibc host such as Debian's coreutils; it cannot be installed on a musl host")
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// shortDir is a directory whose paths fit in a PT_INTERP (t.TempDir is
// under a long test-named path).
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "gl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestSetInterpRewritesInPlace(t *testing.T) {
	p := filepath.Join(t.TempDir(), "true")
	hostBinary(t, "true", p)
	// A trailing payload, as a Bun binary carries: it must survive.
	payload := []byte("\x00PAYLOAD-after-the-ELF-image\x00")
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(payload)
	f.Close()
	before, _ := os.ReadFile(p)
	was, _ := Interp(p)

	old, err := SetInterp(p, "/x/ld.so")
	if err != nil {
		t.Fatal(err)
	}
	if old != was {
		t.Errorf("SetInterp returned old %q, want %q", old, was)
	}
	if got, err := Interp(p); err != nil || got != "/x/ld.so" {
		t.Fatalf("interpreter after the edit: %q, %v; want /x/ld.so", got, err)
	}
	after, _ := os.ReadFile(p)
	if len(after) != len(before) || !bytes.HasSuffix(after, payload) {
		t.Fatalf("edit changed the file's size (%d -> %d) or lost the payload", len(before), len(after))
	}
	// Only the PT_INTERP bytes changed.
	i := bytes.Index(before, []byte(was+"\x00"))
	for j := range before {
		if before[j] != after[j] && (j < i || j >= i+len(was)+1) {
			t.Fatalf("byte %d changed outside PT_INTERP [%d,%d)", j, i, i+len(was)+1)
		}
	}
	if out, err := exec.Command("readelf", "-l", p).Output(); err == nil && !strings.Contains(string(out), "[Requesting program interpreter: /x/ld.so]") {
		t.Errorf("readelf -l does not show the new interpreter:\n%s", out)
	}

	long := "/" + strings.Repeat("a", len(was)) + "/ld.so"
	if _, err := SetInterp(p, long); !errors.Is(err, ErrTooLong) {
		t.Errorf("SetInterp(%d bytes) = %v, want ErrTooLong", len(long), err)
	}
	if got, _ := Interp(p); got != "/x/ld.so" {
		t.Errorf("a refused edit changed the interpreter to %q", got)
	}
}

// TestBuildRunsThroughTheLayer builds a layer for a copy of the host's cat
// and runs it: the loader and libc it maps are the layer's files (read
// from its own /proc/self/maps), and with the layer moved away it cannot
// start at all, so the host's loader is not what ran it.
func TestBuildRunsThroughTheLayer(t *testing.T) {
	root := shortDir(t)
	cat := filepath.Join(root, "bin", "cat")
	hostBinary(t, "cat", cat)
	layer, err := Build(Options{Root: root, Dir: "g", SandboxDir: root + "/g", LibDirs: HostLibDirs(runtime.GOARCH)})
	if err != nil {
		t.Fatal(err)
	}
	if layer.Loader != root+"/g/ld.so" || layer.LibDir != root+"/g" {
		t.Errorf("layer loader %q lib dir %q", layer.Loader, layer.LibDir)
	}
	if !layer.Has("libc.so.6") || !layer.Has(LoaderName) {
		t.Fatalf("layer files %+v: want ld.so and libc.so.6", layer.Files)
	}
	for _, f := range layer.Files {
		sum, _, err := hostfile.SHA256File(filepath.Join(root, f.Path))
		if err != nil || sum != f.SHA256 {
			t.Errorf("%s: recorded sha256 %s, file hashes %s (%v)", f.Path, f.SHA256, sum, err)
		}
	}
	if len(layer.Patched) != 1 || layer.Patched[0].Path != "bin/cat" || layer.Patched[0].OldInterp == "" {
		t.Fatalf("patched %+v, want bin/cat", layer.Patched)
	}
	if got, _ := Interp(cat); got != root+"/g/ld.so" {
		t.Fatalf("bin/cat's interpreter is %q", got)
	}

	cmd := exec.Command(cat, "/proc/self/maps")
	cmd.Env = []string{"LD_LIBRARY_PATH=" + root + "/g"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("patched cat with the layer in place: %v: %s", err, out)
	}
	for _, want := range []string{root + "/g/ld.so", root + "/g/libc.so.6"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("cat's maps do not map %s:\n%s", want, out)
		}
	}

	if err := os.Rename(root+"/g", root+"/moved"); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(cat, "/proc/self/maps")
	cmd.Env = []string{"LD_LIBRARY_PATH=" + root + "/g"}
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("patched cat ran without the layer: %s", out)
	}
}

func TestBuildRefusesATreeWithoutGlibcExecutable(t *testing.T) {
	root := shortDir(t)
	os.WriteFile(filepath.Join(root, "script"), []byte("#!/bin/sh\n"), 0o755)
	if _, err := Build(Options{Root: root, Dir: "g", SandboxDir: "/g", LibDirs: HostLibDirs(runtime.GOARCH)}); err == nil || !strings.Contains(err.Error(), "no glibc executable") {
		t.Fatalf("Build = %v, want no glibc executable", err)
	}
}

// libDirWith is a library dir holding copies of the host's files of
// those names (found in the host's library dirs), each 0755.
func libDirWith(t *testing.T, names ...string) string {
	t.Helper()
	d := t.TempDir()
	for _, n := range names {
		found := false
		for _, hd := range HostLibDirs(runtime.GOARCH) {
			if b, err := os.ReadFile(filepath.Join(hd, n)); err == nil {
				if err := os.WriteFile(filepath.Join(d, n), b, 0o755); err != nil {
					t.Fatal(err)
				}
				found = true
				break
			}
		}
		if !found {
			testenv.Missing(t, n+" in the host's library dirs", "run on a Debian glibc host")
		}
	}
	return d
}

// hostLoader is the soname of the host's glibc loader.
func hostLoader(t *testing.T) string {
	t.Helper()
	so := map[string]string{"amd64": "ld-linux-x86-64.so.2", "arm64": "ld-linux-aarch64.so.1"}[runtime.GOARCH]
	if so == "" {
		testenv.Missing(t, "an amd64 or arm64 host", "run on one")
	}
	return so
}

func TestBuildNamesAMissingLibrary(t *testing.T) {
	root := shortDir(t)
	hostBinary(t, "cat", filepath.Join(root, "bin", "cat"))
	_, err := Build(Options{Root: root, Dir: "g", SandboxDir: root + "/g", LibDirs: []string{t.TempDir()}})
	if err == nil || !strings.Contains(err.Error(), "needs "+hostLoader(t)) {
		t.Fatalf("Build with empty lib dirs = %v, want it to name the loader", err)
	}
	_, err = Build(Options{Root: root, Dir: "g", SandboxDir: root + "/g", LibDirs: []string{libDirWith(t, hostLoader(t))}})
	if err == nil || !strings.Contains(err.Error(), "needs libc.so.6") {
		t.Fatalf("Build with only the loader in the lib dir = %v, want it to name libc.so.6", err)
	}
}

// A DT_NEEDED name with a slash would reach a host file outside the
// library dirs: the closure refuses it, naming it, before it looks.
func TestClosureRefusesANeededNameThatIsAPath(t *testing.T) {
	root := shortDir(t)
	exe := filepath.Join(root, "bin", "cat")
	hostBinary(t, "cat", exe)
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	// Same length as libc.so.6, so dynstr keeps its layout.
	const crafted = "../libc.6"
	i := bytes.Index(b, []byte("\x00libc.so.6\x00"))
	if i < 0 {
		t.Fatal("positive control: the host's cat names libc.so.6 in its dynamic strings")
	}
	copy(b[i+1:], crafted)
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	// What the name reaches from the lib dir: an ELF file with no needs
	// of its own (the host's loader), so only the name check can refuse.
	libs := filepath.Join(root, "lib")
	if err := os.MkdirAll(libs, 0o755); err != nil {
		t.Fatal(err)
	}
	loader, err := Interp("/bin/cat")
	if err != nil || loader == "" {
		t.Fatalf("read the host's interpreter: %q, %v", loader, err)
	}
	ld, err := os.ReadFile(loader)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "libc.6"), ld, 0o644); err != nil {
		t.Fatal(err)
	}
	r := newResolver([]string{libs}, elf.EM_X86_64)
	err = r.needFile(exe)
	if !errors.Is(err, artifact.ErrRefused) || !strings.Contains(err.Error(), `"../libc.6"`) {
		t.Fatalf("closure of a binary needing %q = %v (resolved %v), want it refused by name", crafted, err, r.seen)
	}
}

// treeHolds reports the files under root whose bytes contain marker.
func treeHolds(t *testing.T, root string, marker []byte) []string {
	t.Helper()
	var hits []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, marker) {
				hits = append(hits, p)
			}
		}
		return nil
	})
	return hits
}

// The layer's loader is the host's, found by sandproof; a harness
// executable whose PT_INTERP names any other host file is refused before
// a byte of that file is read. On main, Build copied the file PT_INTERP
// names into the layer as ld.so: this test's own environment (its marker
// in it), the bytes of /etc/hostname, and /dev/zero without end.
func TestBuildTakesNoLoaderFromTheHarness(t *testing.T) {
	marker := hostile.EnvironMarker(t)
	if marker == "" {
		return // the child with the marker in its environment ran it
	}
	// On a Build that copies /dev/zero, the copy stops at this size.
	hostile.LimitFileSize(t, 64<<20)
	hostname, err := os.ReadFile("/etc/hostname")
	if err != nil || len(hostname) == 0 {
		testenv.Missing(t, fmt.Sprintf("a non-empty /etc/hostname (%v)", err), "run on a host that has one")
	}
	// The loader's soname in a place no glibc build names it: compared,
	// never read, it is refused too.
	elsewhere := filepath.Join(shortDir(t), hostLoader(t))
	for _, interp := range []string{"/proc/self//////////environ", "/proc/self/environ", "/dev/zero", "/etc/hostname", elsewhere} {
		t.Run(strings.ReplaceAll(interp, "/", "_"), func(t *testing.T) {
			root := shortDir(t)
			exe := filepath.Join(root, "bin", "tool")
			hostile.ELF(t, exe, interp)
			if got, err := Interp(exe); err != nil || got != interp {
				t.Fatalf("positive control: the built ELF's interpreter is %q (%v), want %q", got, err, interp)
			}
			_, err := Build(Options{Root: root, Dir: "g", SandboxDir: "/g", LibDirs: HostLibDirs(runtime.GOARCH)})
			if !errors.Is(err, artifact.ErrRefused) || !strings.Contains(err.Error(), "bin/tool wants") || !strings.Contains(err.Error(), fmt.Sprintf("%q", interp)) {
				t.Errorf("Build of a tree whose executable wants the loader %q = %v, want it refused naming the file and the interpreter", interp, err)
			}
			if hits := treeHolds(t, root, []byte(marker)); len(hits) > 0 {
				t.Errorf("the environment's marker was copied into the tree: %v", hits)
			}
			if b, err := os.ReadFile(filepath.Join(root, "g", LoaderName)); err == nil {
				t.Errorf("the layer has a loader after a refused build (%d bytes, %q...)", len(b), b[:min(len(b), 40)])
			}
		})
	}
}

// gcc builds src (C) with args, or ends t when the host has no gcc.
func gcc(t *testing.T, src string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Missing(t, "gcc (the test links ELF files)", "apt-get install gcc")
	}
	c := filepath.Join(t.TempDir(), "x.c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", append([]string{c}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v: %s", args, err, out)
	}
}

// sharedLib builds dir/soname, a shared object that needs nothing.
func sharedLib(t *testing.T, dir, soname string) string {
	t.Helper()
	p := filepath.Join(dir, soname)
	gcc(t, "int f_"+strings.NewReplacer(".", "_", "-", "_").Replace(soname)+"(void) { return 1; }\n",
		"-shared", "-fPIC", "-nostdlib", "-Wl,-soname,"+soname, "-o", p)
	return p
}

// layerMade reports whether Build left anything of the layer dir.
func layerMade(root string) bool {
	_, err := os.Lstat(filepath.Join(root, "g"))
	return err == nil
}

// The loader is the file of its soname in the library dirs, whatever
// path the executable's PT_INTERP names: with a lib dir holding a marked
// copy of the loader, the layer's ld.so is that copy, recorded by its
// lib-dir path, and not the host's /lib64 one the binary names.
func TestBuildTakesTheLoaderFromTheLibraryDirs(t *testing.T) {
	root := shortDir(t)
	hostBinary(t, "true", filepath.Join(root, "bin", "true"))
	d := libDirWith(t, hostLoader(t), "libc.so.6")
	marker := []byte("loader-from-the-lib-dir-" + filepath.Base(root))
	f, err := os.OpenFile(filepath.Join(d, hostLoader(t)), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(marker)
	f.Close()
	l, err := Build(Options{Root: root, Dir: "g", SandboxDir: root + "/g", LibDirs: []string{d}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "g", LoaderName))
	if err != nil || !bytes.HasSuffix(got, marker) {
		t.Errorf("the layer's loader (%d bytes, %v) is not the lib dir's marked copy", len(got), err)
	}
	if l.Files[0].Path != "g/"+LoaderName || l.Files[0].Source != filepath.Join(d, hostLoader(t)) {
		t.Errorf("layer's first file %+v, want g/ld.so from %s", l.Files[0], filepath.Join(d, hostLoader(t)))
	}
	if len(l.Patched) != 1 || !isGlibcLoader(l.Patched[0].OldInterp, elf.EM_X86_64) && !isGlibcLoader(l.Patched[0].OldInterp, elf.EM_AARCH64) {
		t.Errorf("patched %+v: want bin/true, its host interpreter recorded", l.Patched)
	}
}

// Every file the layer copies lies under a library dir's real path: a
// link in a lib dir to a library outside every lib dir is refused, before
// anything is copied; links that stay inside, and a lib dir that is
// itself a link (Debian's /lib -> usr/lib), are followed.
func TestBuildCopiesOnlyFromTheLibraryDirs(t *testing.T) {
	root := shortDir(t)
	hostBinary(t, "true", filepath.Join(root, "bin", "true"))
	d := libDirWith(t, hostLoader(t))
	// Outside, though its path starts with the lib dir's (as /usr/lib64's
	// starts with /usr/lib's).
	outside := d + "-out"
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(libDirWith(t, "libc.so.6"), "libc.so.6"), filepath.Join(outside, "libc.so.6")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "libc.so.6"), filepath.Join(d, "libc.so.6")); err != nil {
		t.Fatal(err)
	}
	// Positive control: through the link is a real libc.
	if ef, err := elf.Open(filepath.Join(d, "libc.so.6")); err != nil {
		t.Fatalf("positive control: the link does not reach a libc: %v", err)
	} else {
		ef.Close()
	}
	_, err := Build(Options{Root: root, Dir: "g", SandboxDir: root + "/g", LibDirs: []string{d}})
	if err == nil || !strings.Contains(err.Error(), "outside the library dirs") || !strings.Contains(err.Error(), outside) {
		t.Errorf("Build through a link out of the lib dir = %v, want it refused naming where it leads", err)
	}
	if layerMade(root) {
		t.Error("a refused build left a layer dir")
	}

	// Inside: the link's target in the lib dir, the lib dir through a link.
	os.Remove(filepath.Join(d, "libc.so.6"))
	if err := os.Rename(filepath.Join(outside, "libc.so.6"), filepath.Join(d, "libc-real.so")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("libc-real.so", filepath.Join(d, "libc.so.6")); err != nil {
		t.Fatal(err)
	}
	merged := filepath.Join(t.TempDir(), "lib")
	if err := os.Symlink(d, merged); err != nil {
		t.Fatal(err)
	}
	l, err := Build(Options{Root: root, Dir: "g", SandboxDir: root + "/g", LibDirs: []string{merged}})
	if err != nil || !l.Has("libc.so.6") {
		t.Fatalf("Build through links inside the lib dir = %+v, %v; want libc.so.6", l, err)
	}
}

// A library is copied only as a regular file (fstat, opened without
// following a link or blocking) that every user may read: a fifo and a
// 0750 file in the lib dir are refused, naming them.
func TestBuildCopiesOnlyRegularWorldReadableFiles(t *testing.T) {
	root := shortDir(t)
	hostBinary(t, "true", filepath.Join(root, "bin", "true"))
	d := libDirWith(t, hostLoader(t), "libc.so.6")
	libc := filepath.Join(d, "libc.so.6")
	if err := os.Chmod(libc, 0o750); err != nil {
		t.Fatal(err)
	}
	_, err := Build(Options{Root: root, Dir: "g", SandboxDir: root + "/g", LibDirs: []string{d}})
	if err == nil || !strings.Contains(err.Error(), "not readable by every user") || layerMade(root) {
		t.Errorf("Build with a 0750 libc = %v (layer made %v), want it refused", err, layerMade(root))
	}
	os.Remove(libc)
	if err := syscall.Mkfifo(libc, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Build(Options{Root: root, Dir: "g", SandboxDir: root + "/g", LibDirs: []string{d}})
	if !errors.Is(err, hostfile.ErrNotRegular) || layerMade(root) {
		t.Errorf("Build with a fifo for libc = %v (layer made %v), want ErrNotRegular", err, layerMade(root))
	}
}

// The caps hold before a byte is copied: a library one byte over
// MaxFileBytes, and libraries that together pass MaxLayerBytes (sparse
// files: nothing is written to make them), are refused and the layer dir
// is never made.
func TestBuildCapsTheLayer(t *testing.T) {
	root := shortDir(t)
	hostBinary(t, "true", filepath.Join(root, "bin", "true"))
	d := libDirWith(t, hostLoader(t), "libc.so.6")
	libc := filepath.Join(d, "libc.so.6")
	if err := os.Truncate(libc, MaxFileBytes+1); err != nil {
		t.Fatal(err)
	}
	_, err := Build(Options{Root: root, Dir: "g", SandboxDir: root + "/g", LibDirs: []string{d}})
	if !errors.Is(err, artifact.ErrRefused) || !strings.Contains(err.Error(), "needs libc.so.6") || !strings.Contains(err.Error(), "per library") || layerMade(root) {
		t.Errorf("Build with a libc of %d bytes = %v (layer made %v), want it refused before the copy", MaxFileBytes+1, err, layerMade(root))
	}

	// Two libraries at the file cap: with libc they pass the layer's.
	d = libDirWith(t, hostLoader(t), "libc.so.6")
	for _, so := range []string{"libbig1.so", "libbig2.so"} {
		if err := os.Truncate(sharedLib(t, d, so), MaxFileBytes); err != nil {
			t.Fatal(err)
		}
	}
	root = shortDir(t)
	gcc(t, "int main(void) { return 0; }\n", "-o", filepath.Join(root, "tool"), "-L"+d, "-Wl,--no-as-needed", "-l:libbig1.so", "-l:libbig2.so")
	_, err = Build(Options{Root: root, Dir: "g", SandboxDir: root + "/g", LibDirs: []string{d}})
	if !errors.Is(err, artifact.ErrRefused) || !strings.Contains(err.Error(), "needs libbig2.so") || !strings.Contains(err.Error(), "takes the layer over its cap") || layerMade(root) {
		t.Errorf("Build needing %d bytes of libraries = %v (layer made %v), want it refused before the copy", 2*MaxFileBytes, err, layerMade(root))
	}
}

// At most MaxLayerFiles libraries and MaxExecutables glibc executables:
// the cap itself is allowed, one more is refused.
func TestBuildCapsItsCounts(t *testing.T) {
	d := t.TempDir()
	one, err := os.ReadFile(sharedLib(t, d, "libone.so"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range MaxLayerFiles + 1 {
		names = append(names, fmt.Sprintf("libn%03d.so", i))
		if err := os.WriteFile(filepath.Join(d, names[i]), one, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	if err := newResolver([]string{d}, m).need("t", names[:MaxLayerFiles]); err != nil {
		t.Fatalf("%d libraries: %v", MaxLayerFiles, err)
	}
	if err := newResolver([]string{d}, m).need("t", names); !errors.Is(err, artifact.ErrRefused) {
		t.Errorf("%d libraries: %v, want refused", len(names), err)
	}

	root := shortDir(t)
	for i := range MaxExecutables {
		hostBinary(t, "true", filepath.Join(root, "bin", fmt.Sprintf("t%03d", i)))
	}
	if _, err := scanTree(root); err != nil {
		t.Fatalf("%d executables: %v", MaxExecutables, err)
	}
	hostBinary(t, "true", filepath.Join(root, "bin", "one-more"))
	if _, err := scanTree(root); !errors.Is(err, artifact.ErrRefused) {
		t.Errorf("%d executables: %v, want refused", MaxExecutables+1, err)
	}
}

// A PT_INTERP longer than a path is refused unread: the old reader took
// the whole segment, whatever size its header gave.
func TestInterpIsBounded(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "tool")
	long := "/" + strings.Repeat("x", MaxInterp+100)
	hostile.ELF(t, exe, long)
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Positive control: the segment holds the whole path.
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP && p.Filesz <= MaxInterp {
			t.Fatalf("positive control: PT_INTERP is %d bytes", p.Filesz)
		}
	}
	if got, err := Interp(exe); !errors.Is(err, artifact.ErrRefused) || got != "" {
		t.Errorf("Interp of a %d-byte PT_INTERP = %d bytes, %v; want refused", len(long)+1, len(got), err)
	}
}
