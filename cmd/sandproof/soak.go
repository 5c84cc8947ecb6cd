package main

import (
	"context"
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

func init() { addCommand(newSoakCommand) }

// soakOptions are `sandproof soak`'s flags as given.
type soakOptions struct {
	cycles, parallel       int
	warden, adversary, dir string
	grace, tier            string
	tierSet, asJSON        bool
}

// newSoakCommand binds soak's flags; runSoak does the work.
func newSoakCommand(stdout, stderr io.Writer) *cobra.Command {
	var o soakOptions
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
			o.tierSet = cmd.Flags().Changed("tier")
			return runSoak(cmd.Context(), stdout, stderr, o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.cycles, "cycles", 1000, "launch/stop cycles to run")
	f.IntVar(&o.parallel, "parallel", 4, "cycles running at once")
	f.StringVar(&o.warden, "warden", "", "warden binary to soak (default: build it)")
	f.StringVar(&o.adversary, "adversary", "", "adversary fixture binary (default: build it)")
	f.StringVar(&o.grace, "grace", "0.5", "supervise --grace, seconds between TERM and KILL")
	f.StringVar(&o.dir, "dir", "", "where the cycles' state dirs go (default: a temp dir)")
	f.BoolVar(&o.asJSON, "json", false, "print the summary as JSON")
	f.StringVar(&o.tier, "tier", "", "supervise --tier: auto or subreaper (default: pass none, warden's default, tier cgroup where a cgroup v2 is writable)")
	return cmd
}

// config checks the flags and turns them into a soak.Config (without the
// binaries, which runSoak may build).
func (o soakOptions) config(stderr io.Writer) (soak.Config, error) {
	if o.cycles <= 0 {
		return soak.Config{}, usagef("--cycles: bad value %d (want > 0)", o.cycles)
	}
	if o.parallel <= 0 {
		return soak.Config{}, usagef("--parallel: bad value %d (want > 0)", o.parallel)
	}
	g, err := strconv.ParseFloat(o.grace, 64)
	if err != nil || !secondsOK(o.grace) {
		return soak.Config{}, usagef("--grace: bad seconds %q", o.grace)
	}
	if o.tierSet && o.tier != "auto" && o.tier != "subreaper" {
		return soak.Config{}, usagef("--tier: bad value %q (want auto or subreaper)", o.tier)
	}
	return soak.Config{Warden: o.warden, Adversary: o.adversary, Cycles: o.cycles,
		Parallel: o.parallel, Grace: g, Dir: o.dir, Progress: stderr, Tier: o.tier}, nil
}

// runSoak builds what --warden and --adversary do not name, runs the
// cycles and prints the summary; a cycle that left anything exits 1.
func runSoak(ctx context.Context, stdout, stderr io.Writer, o soakOptions) error {
	cfg, err := o.config(stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.Warden == "" || cfg.Adversary == "" {
		bin, err := os.MkdirTemp("", "sandproof-soak-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(bin)
		if err := buildSoakBinaries(ctx, stderr, bin, &cfg); err != nil {
			return err
		}
	}
	sum, err := soak.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if o.asJSON {
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
}

// buildSoakBinaries builds warden and the adversary into bin from the
// module at or above the working directory, for the ones cfg lacks.
func buildSoakBinaries(ctx context.Context, stderr io.Writer, bin string, cfg *soak.Config) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	root, err := soak.ModuleRoot(wd)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "soak: building warden and the adversary from %s\n", root)
	w, a, err := soak.Build(ctx, root, bin)
	if err != nil {
		return err
	}
	if cfg.Warden == "" {
		cfg.Warden = w
	}
	if cfg.Adversary == "" {
		cfg.Adversary = a
	}
	return nil
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
