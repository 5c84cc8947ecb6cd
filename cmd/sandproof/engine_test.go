package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
)

// TestImagesAndCertifyShareTheEngine: with DOCKER_CONTEXT naming a context
// of the docker CLI's store, `images list` (the docker CLI) and `certify`
// (the API client) both go to that context's engine, here a socket nothing
// listens on: both exit 3 with one line naming it. Without the context,
// neither would name that socket (positive control: the name is only in
// the store).
func TestImagesAndCertifyShareTheEngine(t *testing.T) {
	if _, err := exec.LookPath("docker"); err != nil {
		testenv.Package(t, "the docker CLI", "docker.io")
	}
	tmp := t.TempDir()
	sandproof, warden, probe := buildTools(t, tmp)
	cfg := filepath.Join(tmp, "docker-config")
	sock := filepath.Join(tmp, "nobody-listens.sock")
	sum := sha256.Sum256([]byte("ci-remote"))
	meta := filepath.Join(cfg, "contexts", "meta", hex.EncodeToString(sum[:]))
	if err := os.MkdirAll(meta, 0o755); err != nil {
		t.Fatal(err)
	}
	doc := `{"Name":"ci-remote","Metadata":{},"Endpoints":{"docker":{"Host":"unix://` + sock + `","SkipTLSVerify":false}}}`
	if err := os.WriteFile(filepath.Join(meta, "meta.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DOCKER_HOST=") && !strings.HasPrefix(kv, "DOCKER_CONTEXT=") && !strings.HasPrefix(kv, "DOCKER_CONFIG=") {
			env = append(env, kv)
		}
	}
	env = append(env, "DOCKER_CONFIG="+cfg, "DOCKER_CONTEXT=ci-remote")
	for _, args := range [][]string{
		{"images", "list"},
		{"certify", "--warden", warden, "--probe", probe, "--out", filepath.Join(tmp, "out"), "--image", "debian-12",
			"--adapter", filepath.Join("..", "..", "fixtures", "adapters", "fake-noloop.yaml")},
	} {
		cmd := exec.Command(sandproof, args...)
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := exitCode(t, err)
		var errLines []string
		for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
			if strings.HasPrefix(l, "sandproof: ") {
				errLines = append(errLines, l)
			}
		}
		if code != exitInfra || len(errLines) != 1 || !strings.Contains(errLines[0], sock) {
			t.Errorf("sandproof %s: exit %d, error lines %q; want 3 and one line naming %s", args[0], code, errLines, sock)
		}
	}
}
