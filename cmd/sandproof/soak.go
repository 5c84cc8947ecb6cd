package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sandproof/sandproof/runner/host/soak"
)

func init() { addCommand(newSoakCmd) }

func newSoakCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		cycles, parallel  int
		warden, adversary string
		grace             string
		dir               string
		asJSON            bool
		tier              string
	)
	cmd := &cobra.Command{
		Use:   "soak [--cycles 1000] [--parallel 4] [--warden PATH] [--adversary PATH] [--grace S] [--tier auto|subreaper]",
		Short: "Run warden through many launch/stop cycles with adversarial harnesses and check /proc after each",
		Long: `soak runs N launch/stop cycles of warden on this host. Each cycle launches the
adversary fixture with one scenario (a setsid tool, a double-forked daemon, a
TERM handler that re-spawns, a harness that ignores TERM, a stopped tool, a
process that drops the marker, a fork during the stop, a crafted name, zombies,
or all of them) with "warden supervise --detach", waits until the fixture says
every process it planted runs (and checks that they do), then "warden stop
--wait", and looks up every process the fixture recorded in /proc by pid and
start time. It reports leftover processes (and then kills them), missing and
unconfirmed receipts, and the p50/p99 stop latency (request to confirmed
receipt). Progress goes to stderr. Exit 1 on any leftover, missing or
unconfirmed receipt, or a cycle that could not run.

Without --warden and --adversary it builds both (CGO_ENABLED=0) from the
sandproof module found at or above the working directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cycles <= 0 {
				return usagef("--cycles: bad value %d (want > 0)", cycles)
			}
			if parallel <= 0 {
				return usagef("--parallel: bad value %d (want > 0)", parallel)
			}
			g, err := strconv.ParseFloat(grace, 64)
			if err != nil || !secondsOK(grace) {
				return usagef("--grace: bad seconds %q", grace)
			}
			if cmd.Flags().Changed("tier") && tier != "auto" && tier != "subreaper" {
				return usagef("--tier: bad value %q (want auto or subreaper)", tier)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if warden == "" || adversary == "" {
				wd, err := os.Getwd()
				if err != nil {
					return err
				}
				root, err := soak.ModuleRoot(wd)
				if err != nil {
					return err
				}
				bin, err := os.MkdirTemp("", "sandproof-soak-bin-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(bin)
				fmt.Fprintf(stderr, "soak: building warden and the adversary from %s\n", root)
				w, a, err := soak.Build(ctx, root, bin)
				if err != nil {
					return err
				}
				if warden == "" {
					warden = w
				}
				if adversary == "" {
					adversary = a
				}
			}
			sum, err := soak.Run(ctx, soak.Config{Warden: warden, Adversary: adversary, Cycles: cycles,
				Parallel: parallel, Grace: g, Dir: dir, Progress: stderr, Tier: tier})
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(sum); err != nil {
					return err
				}
			} else {
				sum.Write(stdout)
			}
			if !sum.OK() {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&cycles, "cycles", 1000, "launch/stop cycles to run")
	cmd.Flags().IntVar(&parallel, "parallel", 4, "cycles running at once")
	cmd.Flags().StringVar(&warden, "warden", "", "warden binary to soak (default: build it)")
	cmd.Flags().StringVar(&adversary, "adversary", "", "adversary fixture binary (default: build it)")
	cmd.Flags().StringVar(&grace, "grace", "0.5", "supervise --grace, seconds between TERM and KILL")
	cmd.Flags().StringVar(&dir, "dir", "", "where the cycles' state dirs go (default: a temp dir)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	cmd.Flags().StringVar(&tier, "tier", "", "supervise --tier: auto or subreaper (default: pass none, warden's default, tier cgroup where a cgroup v2 is writable)")
	return cmd
}

// secondsOK applies the contract's number rule (§2 flags) to --grace.
func secondsOK(s string) bool {
	if s == "" {
		return false
	}
	dot := false
	for i, c := range s {
		switch {
		case c >= '0' && c <= '9':
		case c == '.' && !dot && i > 0 && i < len(s)-1:
			dot = true
		default:
			return false
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	return err == nil && v <= 31536000
}
