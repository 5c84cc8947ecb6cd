package docker

import (
	"fmt"
	"net/url"

	"github.com/docker/docker/client"

	"github.com/sandproof/sandproof/runner/host/engine"
)

// sshHost is the placeholder address of an engine reached through ssh: the
// dialer ignores it, but the client needs a host for its URLs (the docker
// CLI uses the same trick).
const sshHost = "http://docker.example.com"

// NewClient returns an Engine API client for ep that negotiates the API
// version with the engine on its first request (Debian 12's engine speaks
// 1.41, older than this client's default):
//   - unix:// and tcp:// are dialled directly; for tcp://, DOCKER_CERT_PATH
//     (with DOCKER_TLS_VERIFY) configures TLS as it does for the CLI;
//   - ssh://[user@]host[:port] runs `ssh ... docker system dial-stdio` per
//     connection (engine.SSHDialer), like the CLI's connection helper.
func NewClient(ep engine.Endpoint) (*client.Client, error) {
	u, err := url.Parse(ep.Host)
	if err != nil {
		return nil, fmt.Errorf("engine address %q (%s): %w", ep.Host, ep.From, err)
	}
	opts := []client.Opt{client.WithAPIVersionNegotiation()}
	switch u.Scheme {
	case "unix":
		opts = append(opts, client.WithHost(ep.Host))
	case "tcp":
		// The TLS option replaces the HTTP client, so it goes first.
		opts = append(opts, client.WithTLSClientConfigFromEnv(), client.WithHost(ep.Host))
	case "ssh":
		dial, err := engine.SSHDialer(ep.Host)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ep.From, err)
		}
		opts = append(opts, client.WithHost(sshHost), client.WithDialContext(dial))
	default:
		return nil, fmt.Errorf("engine address %q (%s): scheme %q: want unix://, tcp:// or ssh://", ep.Host, ep.From, u.Scheme)
	}
	return client.NewClientWithOpts(opts...)
}
