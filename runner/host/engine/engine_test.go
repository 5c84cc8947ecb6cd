package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// store writes a docker CLI config dir with one context, as `docker
// context create` lays it out.
func store(t *testing.T, current, name, host string) string {
	t.Helper()
	dir := t.TempDir()
	if current != "" {
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"auths":{},"currentContext":"`+current+`"}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256([]byte(name))
	meta := filepath.Join(dir, "contexts", "meta", hex.EncodeToString(sum[:]))
	if err := os.MkdirAll(meta, 0o755); err != nil {
		t.Fatal(err)
	}
	doc := `{"Name":"` + name + `","Metadata":{},"Endpoints":{"docker":{"Host":"` + host + `","SkipTLSVerify":false}}}`
	if err := os.WriteFile(filepath.Join(meta, "meta.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestResolveOrder(t *testing.T) {
	dir := store(t, "remote", "remote", "unix:///run/remote.sock")
	for _, tc := range []struct {
		name string
		env  map[string]string
		want Endpoint
	}{
		{"DOCKER_HOST wins", map[string]string{"DOCKER_HOST": "tcp://10.0.0.1:2375", "DOCKER_CONTEXT": "remote"}, Endpoint{Host: "tcp://10.0.0.1:2375", From: "DOCKER_HOST"}},
		{"DOCKER_CONTEXT", map[string]string{"DOCKER_CONTEXT": "remote"}, Endpoint{Host: "unix:///run/remote.sock", Context: "remote", From: "DOCKER_CONTEXT"}},
		{"config.json", nil, Endpoint{Host: "unix:///run/remote.sock", Context: "remote", From: "config.json currentContext"}},
		{"default context", map[string]string{"DOCKER_CONTEXT": "default"}, Endpoint{Host: DefaultHost, From: "default"}},
	} {
		got, err := ResolveFrom(env(tc.env), dir)
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	if got, err := ResolveFrom(env(nil), t.TempDir()); err != nil || got.Host != DefaultHost {
		t.Errorf("no config: %+v, %v; want the default socket", got, err)
	}
	// A context that does not exist is an error, never a silent default.
	if _, err := ResolveFrom(env(map[string]string{"DOCKER_CONTEXT": "nope"}), dir); !errors.Is(err, ErrNoContext) {
		t.Errorf("unknown context: %v, want ErrNoContext", err)
	}
}

func TestEnvForTheCLI(t *testing.T) {
	e := Endpoint{Host: "unix:///run/remote.sock"}
	got := e.Env([]string{"PATH=/bin", "DOCKER_CONTEXT=remote", "DOCKER_HOST=tcp://x", "HOME=/root"})
	want := []string{"PATH=/bin", "HOME=/root", "DOCKER_HOST=unix:///run/remote.sock"}
	if !slices.Equal(got, want) {
		t.Errorf("env %q, want %q", got, want)
	}
}
