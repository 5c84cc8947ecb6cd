// Package engine decides which container engine sandproof talks to, once
// and the same way for every command (contract §9 engine): the image
// builds (the docker CLI) and certify and clean (an API client) must never
// reach two different engines. The order is the docker CLI's own:
// DOCKER_HOST; else the context DOCKER_CONTEXT names; else the
// currentContext of the CLI's config.json; else the default socket.
package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// DefaultHost is the engine a CLI with no context reaches.
const DefaultHost = "unix:///var/run/docker.sock"

// ErrNoContext means the named context is not in the CLI's context store.
var ErrNoContext = errors.New("docker context not found")

// Endpoint is the engine to reach and where that choice came from.
type Endpoint struct {
	// Host is the engine's address (unix:///..., tcp://...).
	Host string
	// Context is the docker context it came from; "" for DOCKER_HOST and
	// "default".
	Context string
	// From says how it was chosen: "DOCKER_HOST", "DOCKER_CONTEXT",
	// "config.json currentContext" or "default".
	From string
}

func (e Endpoint) String() string {
	if e.Context != "" {
		return fmt.Sprintf("%s (context %q, from %s)", e.Host, e.Context, e.From)
	}
	return fmt.Sprintf("%s (from %s)", e.Host, e.From)
}

// Env is the environment the docker CLI gets so that it reaches this
// engine: env without DOCKER_HOST and DOCKER_CONTEXT, then DOCKER_HOST set
// to Host (a context and a host at once would be ambiguous to the CLI).
func (e Endpoint) Env(env []string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if strings.HasPrefix(kv, "DOCKER_HOST=") || strings.HasPrefix(kv, "DOCKER_CONTEXT=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "DOCKER_HOST="+e.Host)
}

// Resolve reads the choice from the process environment and the docker
// CLI's config dir ($DOCKER_CONFIG, else ~/.docker).
func Resolve() (Endpoint, error) {
	dir := os.Getenv("DOCKER_CONFIG")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = ""
		}
		dir = filepath.Join(home, ".docker")
	}
	return ResolveFrom(os.Getenv, dir)
}

// ResolveFrom is Resolve with the environment and the config dir given.
func ResolveFrom(getenv func(string) string, configDir string) (Endpoint, error) {
	if h := getenv("DOCKER_HOST"); h != "" {
		return Endpoint{Host: h, From: "DOCKER_HOST"}, nil
	}
	name, from := getenv("DOCKER_CONTEXT"), "DOCKER_CONTEXT"
	if name == "" {
		var err error
		if name, err = currentContext(configDir); err != nil {
			return Endpoint{}, err
		}
		from = "config.json currentContext"
	}
	if name == "" || name == "default" {
		return Endpoint{Host: DefaultHost, From: "default"}, nil
	}
	host, err := contextHost(configDir, name)
	if err != nil {
		return Endpoint{}, fmt.Errorf("%s names docker context %q: %w", from, name, err)
	}
	return Endpoint{Host: host, Context: name, From: from}, nil
}

// currentContext is config.json's currentContext; "" when the file or the
// field is absent.
func currentContext(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read docker config: %w", err)
	}
	var cfg struct {
		CurrentContext string `json:"currentContext"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return "", fmt.Errorf("read docker config %s: %w", filepath.Join(dir, "config.json"), err)
	}
	return cfg.CurrentContext, nil
}

// contextHost reads the docker endpoint of a context from the CLI's
// context store: contexts/meta/<sha256 of the name>/meta.json.
func contextHost(dir, name string) (string, error) {
	sum := sha256.Sum256([]byte(name))
	p := filepath.Join(dir, "contexts", "meta", hex.EncodeToString(sum[:]), "meta.json")
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%w (no %s)", ErrNoContext, p)
	}
	if err != nil {
		return "", err
	}
	var meta struct {
		Name      string
		Endpoints map[string]struct {
			Host string
		}
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	h := meta.Endpoints["docker"].Host
	if h == "" {
		return "", fmt.Errorf("%s: no docker endpoint host", p)
	}
	return h, nil
}

// Default is Resolve done once per process, so every command of a run
// reaches the engine chosen at its start.
var Default = sync.OnceValues(Resolve)
