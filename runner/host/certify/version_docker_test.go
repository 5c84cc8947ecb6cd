package certify_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/host/runtimes"
	// npm registers its kind: the shipped manifests load.
	_ "github.com/sandproof/sandproof/runner/host/runtimes/npm"
)

// versionTool is an npm package's entry: asked --version it appends a
// line to $MARK (a host path in version_env: a file outside its runtime
// the harness has no business writing) and prints its version with its
// uid; anything else runs the static mini-agent the package carries.
const versionTool = `#!/bin/sh
if [ "$1" = --version ]; then
  [ -z "$MARK" ] || { mkdir -p "${MARK%/*}" && echo "ran as $(id -u)" >> "$MARK"; }
  echo "tool 1.2.3 uid=$(id -u)"
  exit 0
fi
exec "${0%/bin/tool}/node_modules/@scope/verstool/miniagent" "$@"
`

// fakeRegistry puts an npm first on PATH whose pack serves tgz as
// @scope/verstool@1.2.3, and points the runtime cache at a fresh dir.
func fakeRegistry(t *testing.T, tgz string) {
	t.Helper()
	bin := t.TempDir()
	script := `#!/bin/sh
[ "$1" = pack ] || { echo "fake npm: only pack" >&2; exit 1; }
dest= ; spec=
while [ $# -gt 0 ]; do
  case "$1" in --pack-destination) dest=$2; shift ;; --json|pack) ;; *) spec=$1 ;; esac
  shift
done
[ "$spec" = "@scope/verstool@1.2.3" ] || { echo "npm error code E404" >&2; exit 1; }
cp '` + tgz + `' "$dest/fake.tgz"
echo '[{"filename": "fake.tgz", "integrity": "ignored"}]'
`
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv(runtimes.CacheEnv, t.TempDir())
}

// versionPackage writes the package's tarball (bin/tool and the static
// mini-agent) and returns it with its npm integrity.
func versionPackage(t *testing.T) (string, string) {
	t.Helper()
	agent := filepath.Join(t.TempDir(), "miniagent")
	cmd := exec.Command("go", "build", "-o", agent, "../../../fixtures/cmd/miniagent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the mini-agent: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(agent)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name string
		mode int64
		body []byte
	}{
		{"package/package.json", 0o644, []byte(`{"name": "@scope/verstool", "version": "1.2.3"}`)},
		{"package/bin/tool", 0o755, []byte(versionTool)},
		{"package/miniagent", 0o755, bin},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: f.mode, Size: int64(len(f.body))}); err != nil {
			t.Fatal(err)
		}
		tw.Write(f.body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "verstool.tgz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha512.Sum512(buf.Bytes())
	return p, "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
}

// An npm runtime's version check runs in a sandbox of each image's
// platform, as the task user, and its answer reaches the evidence; on
// the host nothing of the harness runs. On main the npm preparer ran
// bin/tool --version on the host, as the user running sandproof, when
// the runtime was built and whenever it was reused: the marker appeared
// there.
func TestCertifyRunsTheVersionCheckInASandbox(t *testing.T) {
	imgs := needEngine(t, "debian-12", "alpine-class")
	warden, probe, _ := binaries(t)
	tgz, integrity := versionPackage(t)
	fakeRegistry(t, tgz)
	marker := filepath.Join(t.TempDir(), "ran-on-the-host")
	m := fixtureVariant(t, "miniagent-opencode", "npm-version", func(s string) string {
		old := "  prepare:\n    name: go-build\n    with:\n      package: ../cmd/miniagent\n      output: bin/miniagent\n"
		if !strings.Contains(s, old) || strings.Count(s, "{runtime_dir}/bin/miniagent") != 2 {
			t.Fatalf("miniagent-opencode.yaml has no go-build block %q or not two {runtime_dir}/bin/miniagent", old)
		}
		s = strings.Replace(s, old, `  prepare:
    name: npm
    with:
      package: "@scope/verstool"
      version: "1.2.3"
      integrity: "`+integrity+`"
      entry: {bin: bin/tool}
      version_args: ["--version"]
      version_env: {MARK: "`+marker+`"}
`, 1)
		return strings.ReplaceAll(s, "{runtime_dir}/bin/miniagent", "{runtime_dir}/bin/tool")
	})
	for run := range 2 { // built, then reused from the cache
		out := t.TempDir()
		var progress syncBuf
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		_, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{m}, Images: imgs,
			Warden: warden, Probe: probe, Out: out, Progress: &progress})
		cancel()
		if err != nil {
			t.Fatalf("run %d: certify: %v\n%s", run, err, progress.String())
		}
		for _, img := range []string{"debian-12", "alpine-class"} {
			ev := readEvidence(t, out)[img+"/miniagent-opencode"]
			if ev == nil || ev.Status != reports.StatusPassed || ev.HarnessRuntime == nil {
				t.Fatalf("run %d: %s: %+v, want passed\n%s", run, img, ev, progress.String())
			}
			h := ev.HarnessRuntime
			if !h.VersionChecked || h.VersionOutput != "tool 1.2.3 uid=1000" {
				t.Errorf("run %d: %s: version_checked %v, version_output %q; want the check's answer from the sandbox, as uid 1000", run, img, h.VersionChecked, h.VersionOutput)
			}
			// Positive control: the entry answers in a case's sandbox too.
			if h.CLIVersion != "tool 1.2.3 uid=1000" {
				t.Errorf("run %d: %s: cli_version %q", run, img, h.CLIVersion)
			}
		}
		if !strings.Contains(progress.String(), "version check in debian-12") || !strings.Contains(progress.String(), "version check in alpine-class") {
			t.Errorf("run %d: no version check per platform in the progress:\n%s", run, progress.String())
		}
		if b, err := os.ReadFile(marker); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("run %d: the harness's version command ran on the host (%s holds %q, %v)", run, marker, b, err)
		}
	}
	// The check's sandboxes are gone.
	if b, err := exec.Command("docker", "ps", "-a", "--filter", "label=sandproof.case", "--format", "{{.Labels}}").Output(); err != nil {
		t.Fatalf("docker ps: %v", err)
	} else if strings.Contains(string(b), "version__miniagent-opencode") {
		t.Errorf("a version check's sandbox is left:\n%s", b)
	}
}
