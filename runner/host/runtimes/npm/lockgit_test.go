package npm

// A lock entry npm ci would take from git (red team rt36, class A and B:
// on main before the fix, the host's git cloned the URL the harness
// package's lock named, with the host user's credentials, and npm checked
// no integrity for it, so a host repo's files reached the runtime every
// case's sandbox gets). checkLock now refuses any entry not resolved to an
// https tarball, at manifest load, before npm or git runs.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

func TestLockGitEntryIsRefused(t *testing.T) {
	for _, resolved := range []string{"git+file://VICTIM", "git+ssh://git@example.com/x.git", "git+https://example.com/x.git", "file:../x", "http://registry.npmjs.org/x/-/x-1.2.3.tgz", "https://user:pw@registry.npmjs.org/x.tgz", "ssh://example.com/x"} {
		victim, _, parse := gitLock(t, resolved, "")
		_, err := parse()
		if err == nil || !strings.Contains(err.Error(), "not resolved to an https tarball") {
			t.Errorf("resolved %q (victim %s): %v; want refused at load", resolved, victim, err)
		}
	}
	// Positive control: the same lock resolved to a registry tarball loads.
	_, _, parse := gitLock(t, "https://registry.npmjs.org/@scope/tool/-/tool-1.2.3.tgz", "")
	if _, err := parse(); err != nil {
		t.Fatalf("a registry tarball's lock is refused: %v", err)
	}
}

// Even with with.tree_sha256 (which would refuse the tree after the fact),
// the host's git never runs at the lock's word: a fake git on PATH logs
// every call, and the preparation is never reached.
func TestLockGitRunsNoHostGit(t *testing.T) {
	realGit, err := exec.LookPath("git")
	if err != nil {
		testenv.Missing(t, "git", "install git")
	}
	_, _, parse := gitLock(t, "git+file://VICTIM", "      tree_sha256: \""+strings.Repeat("ab", 32)+"\"\n")
	bin, log := t.TempDir(), filepath.Join(t.TempDir(), "git.log")
	script := "#!/bin/sh\necho \"$*\" >> '" + log + "'\nexec '" + realGit + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv(runtimes.CacheEnv, t.TempDir())
	t.Setenv("npm_config_cache", t.TempDir())
	if m, err := parse(); err == nil {
		_, err = m.PrepareFor(context.Background(), t.TempDir(), runtimes.HostTarget().Arch, runtimes.HostTarget().Libc)
		t.Errorf("a git-resolved lock loaded; prepare: %v", err)
	}
	if b, _ := os.ReadFile(log); len(b) > 0 {
		t.Errorf("the host's git ran at the lock's word:\n%s", b)
	}
}

// gitLock makes a host git repo holding the manifest's package and a
// secret, and a manifest (with extra in its with block) whose lock
// resolves the package from it.
func gitLock(t *testing.T, resolved, extra string) (victim, secret string, parse func() (*adapter.Manifest, error)) {
	t.Helper()
	for _, tool := range []string{"npm", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, tool, "install "+tool)
		}
	}
	// A host repository sandproof never chose, holding a secret: the
	// package's name and version, and an entry binary for this host.
	victim = t.TempDir()
	secret = "host-secret-" + filepath.Base(victim)
	tool, err := os.ReadFile("/bin/true")
	if err != nil {
		testenv.Missing(t, "/bin/true", "coreutils")
	}
	files := map[string]string{
		"package.json":    `{"name": "@scope/tool", "version": "1.2.3"}`,
		"HOST_SECRET.txt": secret + "\n",
		"bin/tool":        string(tool),
	}
	for name, data := range files {
		p := filepath.Join(victim, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "x"}} {
		if out, err := exec.Command("git", append([]string{"-C", victim}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	// The lock pins the manifest's package, version and integrity, as
	// checkLock asks, and resolves it from the host repo.
	dir := t.TempDir()
	lock := `{"name": "r", "lockfileVersion": 3, "packages": {
  "": {"dependencies": {"@scope/tool": "1.2.3"}},
  "node_modules/@scope/tool": {"version": "1.2.3", "resolved": "` + strings.ReplaceAll(resolved, "VICTIM", victim) + `", "integrity": "` + goodIntegrity + `"}}}`
	if err := os.WriteFile(filepath.Join(dir, "l.json"), []byte(lock), 0o644); err != nil {
		t.Fatal(err)
	}
	parse = func() (*adapter.Manifest, error) {
		return adapter.Parse("x.yaml", dir, []byte(npmManifest(goodWith+"      lock: l.json\n"+extra)))
	}
	return victim, secret, parse
}
