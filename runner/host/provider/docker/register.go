package docker

import "github.com/sandproof/sandproof/runner/host/provider"

// The local Docker engine is the provider named provider.DefaultName; a
// binary offers it by importing this package blank.
func init() {
	provider.Register(provider.DefaultName, provider.Factory{
		New:     newProvider,
		RunArgs: RunArgs,
	})
}

// newProvider is New as a provider.Provider: nil, not a nil *Provider,
// on an error.
func newProvider() (provider.Provider, error) {
	p, err := New()
	if err != nil {
		return nil, err
	}
	return p, nil
}
