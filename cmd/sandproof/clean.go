package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/sandproof/sandproof/runner/provider/docker"
)

func init() { addCommand(newCleanCmd) }

// newCleanCmd removes containers a crashed run left behind: only those
// carrying the sandproof label, never anybody else's.
func newCleanCmd(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "clean",
		Short: "Remove leftover sandproof-labelled containers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := docker.New()
			if err != nil {
				return fmt.Errorf("clean: %w", err)
			}
			removed, err := docker.Clean(cmd.Context(), p)
			for _, id := range removed {
				fmt.Fprintf(stdout, "removed %s\n", id[:12])
			}
			if err != nil {
				return fmt.Errorf("clean: %w", err)
			}
			return nil
		},
	}
}
