package docker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/provider/providertest"
)

// The Docker provider keeps the provider contract, in a container of the
// BusyBox image: its tools are BusyBox applets, and the engine reports a
// program that is not there as its own failure to start it (126).
func TestDockerProviderContract(t *testing.T) {
	p := engine(t)
	providertest.Run(t, providertest.Env{
		New:      func(t testing.TB) provider.Sandbox { return create(t, p) },
		Tool:     func(name string) []string { return []string{"busybox", name} },
		NotFound: 126,
		Caps:     providertest.Caps{Streams: true, Put: true, Users: true, Limits: true},
		Known: map[string]string{
			"MkdirLeavesExisting": "the engine's archive upload of a directory entry sets the mode and owner of a directory that exists (found by this suite; issue 36 keeps behaviour)",
		},
	})
}

// What the contract leaves to the provider: a container's Inspect names
// its image by the engine's id.
func TestDockerInspectNamesTheImage(t *testing.T) {
	sb := create(t, engine(t))
	info, err := sb.Inspect(context.Background())
	if err != nil || !strings.HasPrefix(info.ImageID, "sha256:") || info.Engine == "" {
		t.Fatalf("inspect = %+v, %v; want the image's sha256 id and the engine", info, err)
	}
}
