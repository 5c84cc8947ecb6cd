package docker

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/errdefs"

	"github.com/sandproof/sandproof/runner/host/provider"
)

// Cleaned and CleanResult are the provider's (provider.Cleaner).
type (
	Cleaned     = provider.Cleaned
	CleanResult = provider.CleanResult
)

// Clean and CleanVolumes make the provider a provider.Cleaner (`sandproof
// clean`): the functions of the same names, with no extra selector.
func (p *Provider) Clean(ctx context.Context, scope provider.CleanScope) (provider.CleanResult, error) {
	return Clean(ctx, p, scope)
}

func (p *Provider) CleanVolumes(ctx context.Context, dryRun bool) (provider.CleanResult, error) {
	return CleanVolumes(ctx, p, dryRun)
}

// Clean removes the sandproof-labelled containers that scope.Judge says
// to, running or not, and reports what it removed and what it kept, and
// why. Containers without the sandproof label are never looked at.
// Extra "key=value" label selectors narrow the listing further (all must
// match): a test cleans only its own. With scope.DryRun, Removed lists
// what would have been removed.
func Clean(ctx context.Context, p *Provider, scope provider.CleanScope, labels ...string) (CleanResult, error) {
	var res CleanResult
	f := filters.NewArgs(filters.Arg("label", provider.LabelKey))
	for _, l := range labels {
		f.Add("label", l)
	}
	list, err := p.Client.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return res, provider.Errorf("clean", "", fmt.Errorf("list labelled containers: %w", err))
	}
	var errs []error
	for _, c := range list {
		if _, ok := c.Labels[provider.LabelKey]; !ok {
			continue // belt and braces: the filter is the engine's
		}
		item := Cleaned{ID: c.ID}
		if len(c.Names) > 0 {
			item.Name = c.Names[0]
		}
		remove, reason := scope.Judge(c.Labels)
		item.Reason = reason
		if !remove {
			res.Kept = append(res.Kept, item)
			continue
		}
		if scope.DryRun {
			res.Removed = append(res.Removed, item)
			continue
		}
		err := p.Client.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container %.12s: %w", c.ID, err))
			continue
		}
		res.Removed = append(res.Removed, item)
	}
	if len(errs) > 0 {
		return res, provider.Errorf("clean", "", errors.Join(errs...))
	}
	return res, nil
}

// ReasonVolumeUnused and ReasonVolumeInUse are CleanVolumes' reasons.
const (
	ReasonVolumeUnused = provider.ReasonVolumeUnused
	ReasonVolumeInUse  = provider.ReasonVolumeInUse
)

// CleanVolumes removes the sandproof volumes (made by Volume: labelled
// LabelKey and LabelVolumeKey) that no container, running or not, uses,
// and reports what it removed and kept (ID and Name are the volume's
// name). Volumes are content-addressed caches shared by every run on the
// engine, owned by no process, so no owner scope applies; a run still
// going on this engine may need one again (it is then made again), so
// this is for between runs. Extra "key=value" label selectors narrow the
// listing (a test cleans only its own). With dryRun, Removed lists what
// would have been removed.
func CleanVolumes(ctx context.Context, p *Provider, dryRun bool, labels ...string) (CleanResult, error) {
	var res CleanResult
	f := filters.NewArgs(filters.Arg("label", provider.LabelKey), filters.Arg("label", LabelVolumeKey))
	for _, l := range labels {
		f.Add("label", l)
	}
	list, err := p.Client.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return res, provider.Errorf("clean", "", fmt.Errorf("list labelled volumes: %w", err))
	}
	sort.Slice(list.Volumes, func(i, j int) bool { return list.Volumes[i].Name < list.Volumes[j].Name })
	var errs []error
	for _, v := range list.Volumes {
		if _, ok := v.Labels[LabelVolumeKey]; !ok {
			continue // belt and braces: the filter is the engine's
		}
		item := Cleaned{ID: v.Name, Name: v.Name, Reason: ReasonVolumeUnused}
		users, err := p.Client.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("volume", v.Name))})
		if err != nil {
			errs = append(errs, fmt.Errorf("list the containers of volume %s: %w", v.Name, err))
			continue
		}
		if len(users) > 0 {
			item.Reason = ReasonVolumeInUse
			res.Kept = append(res.Kept, item)
			continue
		}
		if dryRun {
			res.Removed = append(res.Removed, item)
			continue
		}
		// Not forced: a container that mounted it since is the engine's
		// to see, and the volume stays.
		if err := p.Client.VolumeRemove(ctx, v.Name, false); errdefs.IsConflict(err) {
			item.Reason = ReasonVolumeInUse
			res.Kept = append(res.Kept, item)
			continue
		} else if err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove volume %s: %w", v.Name, err))
			continue
		}
		res.Removed = append(res.Removed, item)
	}
	if len(errs) > 0 {
		return res, provider.Errorf("clean", "", errors.Join(errs...))
	}
	return res, nil
}
