package certify_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/certify"
)

// A careless caller's network never becomes something else silently:
// anything but none or host (a bridge, another container's namespace, a
// case variant) is refused by name before a sandbox exists; "" is none.
// The positive control: none, host and "" pass the network check and
// stop at the next one (no adapters).
func TestCertifyRefusesOtherNetworks(t *testing.T) {
	ctx := context.Background()
	for _, n := range []string{"bridge", "container:abc", "None", "HOST", " none", "default"} {
		_, err := certify.Run(ctx, certify.Options{Network: n})
		if err == nil || !strings.Contains(err.Error(), `network "`+n+`"`) {
			t.Errorf("network %q: %v, want it refused by name", n, err)
		}
	}
	for _, n := range []string{"", "none", "host"} {
		_, err := certify.Run(ctx, certify.Options{Network: n})
		if err == nil || !strings.Contains(err.Error(), "need at least one adapter") {
			t.Errorf("network %q: %v, want it accepted (and the missing adapters named)", n, err)
		}
	}
}
