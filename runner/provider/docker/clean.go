package docker

import (
	"context"
	"errors"
	"fmt"

	dc "github.com/ory/dockertest/v3/docker"

	"github.com/sandproof/sandproof/runner/provider"
)

// Clean removes every container carrying the sandproof label, running or
// not, and returns the ids it removed. Containers without the label are
// never touched, whoever made them. Extra "key=value" label selectors
// narrow it further (all must match): a test cleans only its own.
func Clean(ctx context.Context, p *Provider, labels ...string) ([]string, error) {
	list, err := p.Pool.Client.ListContainers(dc.ListContainersOptions{
		All:     true,
		Filters: map[string][]string{"label": append([]string{provider.LabelKey}, labels...)},
		Context: ctx,
	})
	if err != nil {
		return nil, provider.Errorf("clean", "", fmt.Errorf("list labelled containers: %w", err))
	}
	var removed []string
	var errs []error
	for _, c := range list {
		if _, ok := c.Labels[provider.LabelKey]; !ok {
			continue // belt and braces: the filter is the engine's
		}
		err := p.Pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.ID, Force: true, RemoveVolumes: true, Context: ctx})
		var nsc *dc.NoSuchContainer
		if err != nil && !errors.As(err, &nsc) {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.ID[:12], err))
			continue
		}
		removed = append(removed, c.ID)
	}
	if len(errs) > 0 {
		return removed, provider.Errorf("clean", "", errors.Join(errs...))
	}
	return removed, nil
}
