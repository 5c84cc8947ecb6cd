package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandproof/sandproof/runner/host/provider"
)

func init() { addCommand(newCleanCmd) }

// newCleanCmd removes containers that crashed runs left behind, on an
// engine other runs may be using at the same moment: by default only this
// host's containers whose owning process is gone.
func newCleanCmd(stdout, stderr io.Writer) *cobra.Command {
	var scope provider.CleanScope
	var volumes bool
	var name string
	cmd := &cobra.Command{
		Use:   "clean [--run ID | --all | --all-hosts] [--volumes] [--dry-run] [--provider NAME]",
		Short: "Remove sandproof containers whose owning process is gone",
		Long: `Remove containers sandproof left behind. Every container sandproof creates
carries the labels sandproof=1, sandproof.run (the run id),
sandproof.host (this machine: a hash of its hostname and /etc/machine-id)
and sandproof.owner.pid / sandproof.owner.start (the process that created
it: pid and start time, field 22 of /proc/PID/stat).

By default clean removes the containers of this host whose owner process is
gone (no such pid, a zombie, or the pid now held by a process with another
start time) and keeps every other: a live owner's (another run in the middle
of its cases), another host's, and containers without owner labels (an
older sandproof's, or one started by hand from a sandproof image).

  --run ID     remove the containers of run ID on this host, owner alive or not
  --all        remove every sandproof container of this host, live owners too
  --all-hosts  remove every sandproof-labelled container the engine knows,
               of any host or none: the old unscoped clean
  --volumes    then also remove the sandproof volumes (runtime trees, labelled
               sandproof.volume.key) that no container uses; they are caches
               shared by every run on the engine and owned by none, so use it
               between runs (a run still going makes one again if it must)
  --provider   the sandbox provider whose sandboxes to clean (default docker)

Prints one line per removed container with the reason, then the kept ones
counted by reason.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := 0
			for _, on := range []bool{scope.Run != "", scope.All, scope.AllHosts} {
				if on {
					n++
				}
			}
			if n > 1 {
				return usagef("--run, --all and --all-hosts: give at most one")
			}
			if cmd.Flags().Changed("run") && strings.TrimSpace(scope.Run) == "" {
				return usagef("--run: bad value %q (want a run id)", scope.Run)
			}
			if _, ok := provider.Lookup(name); !ok {
				return usagef("--provider: bad value %q (want one of %s)", name, strings.Join(provider.Names(), ", "))
			}
			return cleanContainers(cmd.Context(), stdout, name, scope, volumes)
		},
	}
	f := cmd.Flags()
	f.StringVar(&scope.Run, "run", "", "remove the containers of this run (this host's), owner alive or not")
	f.BoolVar(&scope.All, "all", false, "remove every sandproof container of this host, live owners' too")
	f.BoolVar(&scope.AllHosts, "all-hosts", false, "remove every sandproof-labelled container of any host or none")
	f.BoolVar(&scope.DryRun, "dry-run", false, "print what would be removed, remove nothing")
	f.BoolVar(&volumes, "volumes", false, "also remove the sandproof volumes no container uses")
	f.StringVar(&name, "provider", provider.DefaultName, "sandbox provider, one of: "+strings.Join(provider.Names(), ", "))
	return cmd
}

// cleanContainers runs the named provider's Clean in scope and prints one
// line per removed container with the reason, then the kept ones counted
// by reason; with volumes, its CleanVolumes afterwards (the containers
// removed free theirs), printed the same way.
func cleanContainers(ctx context.Context, stdout io.Writer, name string, scope provider.CleanScope, volumes bool) error {
	prov, err := provider.New(name)
	if err != nil {
		return fmt.Errorf("clean: %w", err)
	}
	p, ok := prov.(provider.Cleaner)
	if !ok {
		return fmt.Errorf("clean: provider %q keeps nothing a crashed owner leaves behind", name)
	}
	res, err := p.Clean(ctx, scope)
	verb := "removed"
	if scope.DryRun {
		verb = "would remove"
	}
	for _, c := range res.Removed {
		fmt.Fprintf(stdout, "%s %.12s %s (%s)\n", verb, c.ID, strings.TrimPrefix(c.Name, "/"), c.Reason)
	}
	counts := res.KeptCounts()
	var parts []string
	for _, reason := range res.KeptReasons() {
		parts = append(parts, fmt.Sprintf("%d %s", counts[reason], reason))
	}
	line := fmt.Sprintf("clean: %s %d container(s), kept %d", verb, len(res.Removed), len(res.Kept))
	if len(parts) > 0 {
		line += " (" + strings.Join(parts, ", ") + ")"
	}
	fmt.Fprintln(stdout, line)
	if err != nil {
		return fmt.Errorf("clean: %w", err)
	}
	if !volumes {
		return nil
	}
	res, err = p.CleanVolumes(ctx, scope.DryRun)
	for _, c := range res.Removed {
		fmt.Fprintf(stdout, "%s volume %s (%s)\n", verb, c.Name, c.Reason)
	}
	fmt.Fprintf(stdout, "clean: %s %d volume(s), kept %d (%s)\n", verb, len(res.Removed), len(res.Kept), provider.ReasonVolumeInUse)
	if err != nil {
		return fmt.Errorf("clean volumes: %w", err)
	}
	return nil
}
