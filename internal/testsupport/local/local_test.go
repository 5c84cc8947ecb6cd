package local_test

import (
	"context"
	"os"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/local"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/provider/providertest"
)

// The local provider keeps the provider contract, engine-free: its
// sandbox paths are host paths under Info.PathPrefix, its tools the
// host's. Owners and users need root.
func TestLocalProviderContract(t *testing.T) {
	providertest.Run(t, providertest.Env{
		New: func(t testing.TB) provider.Sandbox {
			// Other users run in the sandbox: the dirs above its root
			// must let them in (t.TempDir's parent does not).
			dir, err := os.MkdirTemp("", "sandproof-local-test-")
			if err == nil {
				err = os.Chmod(dir, 0o755)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			sb, err := local.New(dir).Create(context.Background(), provider.CreateSpec{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sb.Destroy(context.Background()) })
			return sb
		},
		Caps: providertest.Caps{Streams: true, Users: os.Geteuid() == 0},
	})
}
