package images

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/provider"
	dockerprov "github.com/sandproof/sandproof/runner/host/provider/docker"
	"github.com/sandproof/sandproof/runner/probe"
)

// The tests in this file need a Docker engine (images/engine.sh start) and,
// on a cold engine, the Debian mirror: they build the images (a no-op when
// they are built) and run the probe inside each. They run only with
// SANDPROOF_DOCKER=1 or SANDPROOF_STRICT=1, and then an engine must answer.

func needDocker(tb testing.TB) Engine {
	tb.Helper()
	testenv.Docker(tb)
	e := Engine{}
	if _, err := e.Ping(context.Background()); err != nil {
		testenv.OptedInEngine(tb, err)
	}
	return e
}

type logWriter struct{ tb testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// buildProbe builds the static probe for the host into a directory other
// users can read, since one case runs it as uid 1000.
func buildProbe(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "probe"), "../../../cmd/probe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build probe: %v\n%s", err, out)
	}
	return dir
}

func docker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func snapshotIn(t *testing.T, container string, execArgs ...string) probe.Snapshot {
	t.Helper()
	args := append(append([]string{"exec"}, execArgs...), container, "/probe/probe", "snapshot", "--markers", "/etc/passwd,/home/task/.config/marker")
	var s probe.Snapshot
	if err := json.Unmarshal([]byte(docker(t, args...)), &s); err != nil {
		t.Fatalf("decode snapshot: %v", err)
	}
	return s
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func byComm(ps []probe.Process, comm string, ppid int) (probe.Process, bool) {
	for _, p := range ps {
		if p.Comm == comm && p.PPID == ppid {
			return p, true
		}
	}
	return probe.Process{}, false
}

func TestImagesWithProbe(t *testing.T) {
	e := needDocker(t)
	ctx := context.Background()
	rs, err := Recipes()
	if err != nil {
		t.Fatal(err)
	}
	probeDir := buildProbe(t)
	runLabel := "sandproof.test=" + randomHex(t)
	t.Cleanup(func() { _, _ = e.CleanContainers(context.Background(), runLabel) })
	for _, r := range rs {
		t.Run(r.Name, func(t *testing.T) {
			res, err := Build(ctx, e, r, BuildOptions{Log: logWriter{t}})
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			info, found, err := e.Inspect(ctx, r.Ref())
			if err != nil || !found || info.Labels[Label] != "1" || info.Labels[Label+".hash"] != r.Hash() {
				t.Fatalf("after Build(%s) = %+v: inspect = %+v, %v, %v; want labels %s=1 and the hash", r.Name, res, info, found, err, Label)
			}

			k, v, _ := strings.Cut(runLabel, "=")
			own, err := dockerprov.RunArgs(map[string]string{k: v}, provider.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			c := docker(t, append(append([]string{"run", "--detach", "--network", "none"}, own...),
				"--volume", probeDir+":/probe:ro", r.Ref())...)
			// Removed by CleanContainers at the end, which is under test.

			before := snapshotIn(t, c)
			if before.OS != r.Expect.OS {
				t.Errorf("os = %q, want %q", before.OS, r.Expect.OS)
			}
			if got := !before.Bash.Absent(); got != (r.Expect.Bash == "present") {
				t.Errorf("bash = %v, want %s", before.Bash, r.Expect.Bash)
			}
			if r.Expect.Python3 == "none" {
				if !before.Python3.Absent() {
					t.Errorf("python3 = %v, want none", before.Python3)
				}
			} else {
				path, ver, _ := strings.Cut(r.Expect.Python3, " ")
				py := before.Python3
				if py.Path != path || !strings.HasPrefix(py.Version, "Python "+ver) || len(py.SHA256) != 64 || py.Resolved == py.Path {
					t.Errorf("python3 = %+v, want %s, version %s, a sha256, resolved through the symlink", py, path, ver)
				}
			}
			if len(before.Markers) != 2 || before.Markers[0].Missing || !before.Markers[1].Missing {
				t.Errorf("markers = %+v, want /etc/passwd present and the other missing", before.Markers)
			}
			init, ok := byComm(before.Processes, "sleep", 0)
			if !ok || init.PID != 1 {
				t.Fatalf("processes = %+v, want pid 1 = sleep", before.Processes)
			}
			if before.Self.PID == 1 || before.Self.StartTime == 0 {
				t.Errorf("self = %+v, want the probe's own exec'd process", before.Self)
			}

			// As user task (uid 1000), which every image must have.
			asTask := snapshotIn(t, c, "--user", "task")
			self, ok := findPID(asTask.Processes, asTask.Self.PID)
			if !ok || self.UID != 1000 {
				t.Errorf("probe run as task: own entry %+v, want uid 1000", self)
			}

			// Positive control: an orphan left behind is seen as new...
			docker(t, "exec", c, "sh", "-c", "sleep 300 >/dev/null 2>&1 & exit 0")
			var leak probe.Process
			eventually(t, "the orphan to show up", func() bool {
				r := probe.Diff(before, snapshotIn(t, c))
				leak, ok = byComm(r.NewProcesses, "sleep", 1)
				return ok && !r.Clean
			})
			// ...and once killed it stays a zombie, since pid 1 reaps
			// nothing, which the diff counts as dead.
			docker(t, "exec", c, "sh", "-c", "kill "+strconv.Itoa(leak.PID))
			eventually(t, "the orphan to die", func() bool {
				r := probe.Diff(before, snapshotIn(t, c))
				_, zombie := findPID(r.NewZombies, leak.PID)
				return zombie && r.Clean
			})
		})
	}
	removed, err := e.CleanContainers(ctx, runLabel)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != len(rs) {
		t.Errorf("CleanContainers removed %d containers, want the %d this test started", len(removed), len(rs))
	}
	for _, id := range removed {
		if err := exec.Command("docker", "container", "inspect", id).Run(); err == nil {
			t.Errorf("container %s still known to the engine after CleanContainers", id)
		}
	}
}

func findPID(ps []probe.Process, pid int) (probe.Process, bool) {
	for _, p := range ps {
		if p.PID == pid {
			return p, true
		}
	}
	return probe.Process{}, false
}

func randomHex(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// BenchmarkBuildUpToDate measures the no-op rebuild: hashing the recipe and
// asking the engine for its tag.
func BenchmarkBuildUpToDate(b *testing.B) {
	e := needDocker(b)
	r, err := Lookup("debian-12")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := Build(ctx, e, r, BuildOptions{}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		res, err := Build(ctx, e, r, BuildOptions{})
		if err != nil || res.Built {
			b.Fatalf("no-op build = %+v, %v", res, err)
		}
	}
}

// TestAlpineClassRunsMuslBinaries: a dynamically linked musl program (the
// kind a harness ships for Alpine) starts in alpine-class through its loader,
// and a glibc one does not, since the image has no glibc.
func TestAlpineClassRunsMuslBinaries(t *testing.T) {
	e := needDocker(t)
	musl, err := exec.LookPath("musl-gcc")
	if err != nil {
		testenv.Package(t, "musl-gcc", "musl-tools")
	}
	r, err := Lookup("alpine-class")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Build(context.Background(), e, r, BuildOptions{Log: logWriter{t}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "hello.c")
	if err := os.WriteFile(src, []byte("#include <stdio.h>\nint main(void){puts(\"hello from musl\");return 0;}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]string{{musl, "-o", filepath.Join(dir, "hello-musl"), src}, {"cc", "-o", filepath.Join(dir, "hello-glibc"), src}} {
		if out, err := exec.Command(b[0], b[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(b, " "), err, out)
		}
	}
	run := func(prog string) (string, error) {
		own, err := dockerprov.RunArgs(map[string]string{Label + ".test": "musl"}, provider.Limits{})
		if err != nil {
			return "", err
		}
		args := append(append([]string{"run", "--rm", "--network", "none"}, own...), "--volume", dir+":/t:ro", r.Ref(), "/t/"+prog)
		out, err := exec.Command("docker", args...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := run("hello-musl"); err != nil || out != "hello from musl" {
		t.Errorf("musl program in alpine-class: %q, %v; want it to run", out, err)
	}
	if out, err := run("hello-glibc"); err == nil {
		t.Errorf("glibc program in alpine-class ran (%q); the image must have no glibc", out)
	}
}
