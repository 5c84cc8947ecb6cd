package certify

import (
	// The engine tests make their sandboxes with the default provider,
	// which a binary links by this import (as cmd/sandproof's
	// providers.go does).
	_ "github.com/sandproof/sandproof/runner/host/provider/docker"
)

// ServiceAsTaskUser makes borrowed's owner service run as the task user
// (the identity before issue 35, which a harness of that uid could stop,
// kill or ptrace) until restore is called: the engine tests use it to
// show scenario.borrowed_kept catch what the service's own uid now
// prevents. Not safe beside a running certify.
func ServiceAsTaskUser() (restore func()) {
	was := serviceUID
	serviceUID = func(task int) int { return task }
	return func() { serviceUID = was }
}
