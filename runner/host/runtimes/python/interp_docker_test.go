package python

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/images"
)

// mountAt is where the docker test mounts the tree: unlike the host's
// path, so nothing in the tree may name where it was staged.
const mountAt = "/opt/sp-rt/x"

// hostile plants what must not take effect: json.py, sitecustomize.py
// and usercustomize.py in PYTHONPATH (/evil), the working directory and
// the user's site dir, each printing EVIL when imported; it notes the
// image's python3 (the first on PATH) and its sum, tries a write into
// the tree, runs the probe ($1) and times the interpreter's start.
const hostile = `set -e
u=$HOME/.local/lib/python3.13/site-packages
mkdir -p /evil /tmp/w "$u"
for d in /evil /tmp/w "$u"; do
  for m in json sitecustomize usercustomize; do echo 'print("EVIL-'$m'")' >"$d/$m.py"; done
done
cd /tmp/w
sum() { if [ -e /usr/bin/python3 ]; then cat /usr/bin/python3 | sha256sum; else echo none; fi; }
before=$(sum)
echo "first-python3=$(command -v python3 || echo none)"
if touch ` + mountAt + `/usr/probe 2>/dev/null; then echo tree=writable; else echo tree=read-only; fi
` + mountAt + `/usr/bin/python3 -c "$1"
` + mountAt + `/usr/bin/python3 -c '
import subprocess, sys, time
ts = []
for _ in range(7):
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    ts.append(time.perf_counter() - t0)
print("start-ms=%.0f" % (sorted(ts)[3] * 1000))
print("version=" + sys.version.split()[0])'
[ "$before" = "$(sum)" ] && echo "image-python=unchanged $before"
`

// The tree runs read-only, mounted elsewhere, with no network, in each
// image (glibc 2.36 without python, glibc 2.31 with its own python3.9,
// musl and BusyBox): the hostile environment and files take no effect,
// the image's own programs still run from Python, and the image's
// python3 is untouched.
func TestInterpRunsInEveryImage(t *testing.T) {
	testenv.Docker(t)
	dir, _ := stagedTree(t)
	for _, name := range []string{"debian-12", "old-python", "alpine-class"} {
		t.Run(name, func(t *testing.T) {
			r, err := images.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := exec.Command("docker", "image", "inspect", r.Ref()).Run(); err != nil {
				testenv.NoImage(t, name, r.Ref())
			}
			out, err := exec.Command("docker", "run", "--rm", "--network", "none", "-v", dir+":"+mountAt+":ro",
				"-e", "PYTHONPATH=/evil", "-e", "PYTHONHOME=/evil", "-e", "PYTHONSTARTUP=/evil/json.py", "-e", "HOME=/tmp/home",
				r.Ref(), "sh", "-c", hostile, "sh", probe).CombinedOutput()
			s := string(out)
			t.Logf("%s:\n%s", name, s)
			if err != nil {
				t.Fatalf("docker run: %v", err)
			}
			checkProbe(t, s[strings.Index(s, "exe="):strings.Index(s, "start-ms=")], mountAt)
			for _, want := range []string{"tree=read-only", "image-python=unchanged", "version=3.13.5"} {
				if !strings.Contains(s, want) {
					t.Errorf("%s: no %q", name, want)
				}
			}
			if strings.Contains(s, "EVIL") {
				t.Errorf("%s: a planted module ran", name)
			}
			// The image's own python3 (old-python's is its testbed venv's)
			// stays first on PATH: the tree is never put there.
			if name == "old-python" && (!strings.Contains(s, "first-python3=/") || strings.Contains(s, "first-python3="+mountAt)) {
				t.Errorf("positive control: old-python's first python3 is not its own")
			}
		})
	}
}
