package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/host/images"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/relay"
)

func init() { addCommand(newCertifyCommand) }

// certifyOptions are `sandproof certify`'s flags as given. runCertify turns
// them into certify.Options; certify.Options.Validate owns the rules of
// the values the library takes as they are.
type certifyOptions struct {
	adapterFiles, imageArgs, diffAllow, scenarios                 []string
	model, modelName, keyFile, warden, probe, agent, bash, rmtree string
	out, memory, shard, network, provider                         string
	parallel, baseline, captureEntries                            int
	resume, allowEmpty                                            bool
	pidsLimit, cpuShares                                          int64
	relay                                                         relayFlags
}

// newCertifyCommand binds certify's flags; runCertify does the work.
func newCertifyCommand(stdout, stderr io.Writer) *cobra.Command {
	var o certifyOptions
	cmd := &cobra.Command{
		Use:   "certify --adapter FILE [--adapter FILE...] --out DIR",
		Short: "Run the case protocol (contract §7) for every image x adapter x scenario",
		Long: `Certify adapters: for every image x adapter x scenario (--scenario; contract
§7.6: the challenge, a timeout, a cancel, model faults, a borrowed sandbox), set up a container, seed the
adapter, run one activation (read the challenge the owner wrote to
/task/challenge.txt through a tool, then write /task/deliverable.txt with
the token the model makes from it), close with receipts, verify after close
(the deliverable, and the model loop step by step from the transcript of the
recording relay every model call goes through) and tear down. The sandbox
only holds a canary key; the relay sends --api-key-file's key upstream. One evidence
line per case goes to DIR/evidence.jsonl as each case ends; report.html,
report.md and junit.xml are written beside it at the end.

Sandboxes have no network (--network none): the harness reaches the model
at the relay's own address inside the sandbox, where the session agent
(--agent) listens and carries each connection to the relay over one exec;
the same channel carries the session's commands and files. The engine is
the docker CLI's (DOCKER_HOST, DOCKER_CONTEXT, the CLI's current context):
unix, tcp and ssh engines work alike, since no host path is mounted.

The first INT or TERM interrupts the run: no case starts after it, a running
activation is stopped through its session (receipts kept), the cases cut
short are written as unknown with the reason, the reports are written, and
the exit status is 130 (143 for TERM). A second signal exits at once.
--resume then runs again every case whose last attempt is not final.

` + exitCodeHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCertify(cmd.Context(), stdout, stderr, o)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.adapterFiles, "adapter", nil, "adapter manifest (repeatable)")
	f.StringArrayVar(&o.imageArgs, "image", nil, "image NAME or NAME=REF (repeatable; default: every built image)")
	f.StringArrayVar(&o.scenarios, "scenario", nil, "run this scenario: "+strings.Join(certify.ScenarioNames(), ", ")+
		" (repeatable; default: every scenario of a manifest with a scenarios key, the challenge of one without; docs/certify.md scenarios)")
	f.StringVar(&o.model, "model", "scripted", "scripted, or a model base URL")
	f.StringVar(&o.modelName, "model-name", "fake-model", "model id given to the harness ({model})")
	f.StringVar(&o.keyFile, "api-key-file", "", "the model's API key: the relay sends it upstream; sandboxes only ever hold a per-run canary")
	f.IntVar(&o.parallel, "parallel", 1, "cases run at once")
	f.IntVar(&o.baseline, "baseline", 0, "time `N` bare runs of 'docker run --rm --network none IMAGE true' per image before the cases, and give each case's overhead beside that floor")
	f.StringVar(&o.warden, "warden", filepath.Join("bin", "linux-"+runtime.GOARCH, "warden"), "static warden build for this host's arch")
	f.StringVar(&o.probe, "probe", filepath.Join("bin", "linux-"+runtime.GOARCH, "probe"), "static probe build for this host's arch")
	f.StringVar(&o.agent, "agent", "", "static session agent build for this host's arch, which carries the model's traffic and the session's commands (default: sandagent beside --probe)")
	f.StringVar(&o.provider, "provider", provider.DefaultName, "sandbox provider, one of: "+strings.Join(provider.Names(), ", "))
	f.StringVar(&o.network, "network", provider.NetworkNone, "sandbox network: none (the harness reaches only the model, through the session agent) or host (flagged in the report)")
	f.StringVar(&o.bash, "bash-static", "", "static bash provided to adapters that need bash (default /bin/bash-static when present)")
	f.StringVar(&o.rmtree, "rmtree", "", "optional removal helper (runner/rmtree), uploaded into each session dir; close removes through the session agent, which runs the same confined removal (runner/confine)")
	f.StringArrayVar(&o.diffAllow, "diff-allow", nil, "sandbox path the filesystem diff may hold (repeatable)")
	f.BoolVar(&o.resume, "resume", false, "finish an interrupted run: run again every case of DIR/evidence.jsonl whose last attempt is unknown, and the cases never written")
	f.BoolVar(&o.allowEmpty, "allow-empty", false, "exit 0 when no case failed even if none passed (all skipped)")
	f.StringVar(&o.out, "out", "", "run directory (required)")
	f.StringVar(&o.shard, "shard", "", "run slice `i/N` of the image x adapter matrix (needs --image); join the shards with 'sandproof report merge'")
	d := provider.DefaultLimits
	f.Int64Var(&o.pidsLimit, "pids-limit", d.PidsLimit, "most processes and threads a case's container may hold")
	f.StringVar(&o.memory, "memory", "2g", "memory limit of a case's container (bytes, or with k, m or g), swap included")
	f.Int64Var(&o.cpuShares, "cpu-shares", d.CPUShares, "CPU shares of a case's container (relative weight; 1024 is a full share)")
	f.IntVar(&o.captureEntries, "capture-entries", provider.DefaultCaseEntries, "most archive entries (files, directories, links) one case's captures may take; past it the download stops and the case fails close.captures_bounded")
	rl := relay.DefaultLimits
	f.StringVar(&o.relay.request, "relay-request-bytes", sizeText(rl.RequestBytes), "largest model request body the relay takes (bytes, or with k, m or g); a manifest's relay.request_bytes raises it for its adapter")
	f.StringVar(&o.relay.held, "relay-held-bytes", "", "request bytes the relay holds at once, over a case's requests (default: "+sizeText(rl.HeldBytes)+" or four request caps, whichever is more)")
	f.StringVar(&o.relay.record, "relay-record-bytes", sizeText(rl.RecordBytes), "budget of a case's model transcript (model_relay.jsonl and the calls kept in memory)")
	f.IntVar(&o.relay.concurrent, "relay-concurrent", rl.Concurrent, "model requests in a case's relay at once")
	f.DurationVar(&o.relay.bodyTime, "relay-body-time", rl.BodyTime, "longest a model request's body may take to arrive")
	return cmd
}

// runCertify runs the cases the options name and maps the outcome to an
// exit status (contract §9 exit statuses).
func runCertify(ctx context.Context, stdout, stderr io.Writer, opts certifyOptions) error {
	o, err := opts.library(stderr)
	if err != nil {
		return err
	}
	// On a terminal the progress lines scroll above one live status
	// line; elsewhere they are printed plain.
	progress := stderr
	line, endLine := liveStatus(stderr)
	if line != nil {
		o.Progress, o.Watcher, progress = line, line, line
	}
	ictx, sig, stop := interruptOnSignal(progress)
	defer stop()
	o.Interrupt = ictx
	sum, err := certify.Run(ctx, o)
	endLine()
	if sum != nil {
		printSummary(stdout, sum, opts.out)
	}
	// Precedence (contract §9 exit statuses): interrupted >
	// infrastructure > failed.
	if s := sig(); s != nil {
		if err != nil {
			fmt.Fprintf(stderr, "sandproof: %s\n", reports.Printable(err.Error(), false))
		}
		return s
	}
	return certifyOutcome(sum, err, opts.allowEmpty)
}

// certifyOutcome maps a run that was not interrupted to its exit error
// (contract §9 exit statuses): usage, then infrastructure (a case the
// engine failed, or the run's own machinery), then a verdict.
func certifyOutcome(sum *certify.Summary, err error, allowEmpty bool) error {
	var ue *certify.UsageError
	if errors.As(err, &ue) {
		return usageError{err}
	}
	// A case the engine failed, by its own word, is infrastructure,
	// whatever else the run found (a leaked canary, a failed case).
	if sum != nil {
		if infra := sum.Infrastructure(); len(infra) > 0 {
			return infraError{infraCases(infra, err)}
		}
	}
	if err != nil {
		if errors.Is(err, certify.ErrCanaryLeaked) {
			return failedError{err}
		}
		return infraError{err}
	}
	if sum.Failed() {
		return exitError{exitFailed}
	}
	if sum.Counts[reports.StatusPassed] == 0 && !allowEmpty {
		return noCasePassed(sum.Counts[reports.StatusSkipped])
	}
	return nil
}

// infraCases is the error of a run in which the engine failed cases:
// each case with the engine's word, and the run's own error when it had
// one too.
func infraCases(cases []string, err error) error {
	e := fmt.Errorf("%d case(s) unknown because the engine failed them (infrastructure, not the harnesses; --resume runs them again): %s",
		len(cases), strings.Join(cases, "; "))
	if err != nil {
		e = fmt.Errorf("%w; and: %w", e, err)
	}
	return e
}

// library checks the flags the library does not see as given (the
// required ones, the sizes as spelt, the model and its key), has the
// library validate the rest (certify.Options.Validate, before anything is
// loaded), then loads the manifests and resolves the images.
func (opts certifyOptions) library(stderr io.Writer) (certify.Options, error) {
	if len(opts.adapterFiles) == 0 {
		return certify.Options{}, usagef("--adapter: at least one manifest is required")
	}
	if opts.out == "" {
		return certify.Options{}, usagef("--out: required")
	}
	if opts.provider == "" { // the library reads "" as the default
		return certify.Options{}, usagef("--provider: bad value %q (want one of %s)", opts.provider, strings.Join(provider.Names(), ", "))
	}
	limits, err := parseLimits(opts.pidsLimit, opts.memory, opts.cpuShares)
	if err != nil {
		return certify.Options{}, err
	}
	relayLimits, err := opts.relay.limits()
	if err != nil {
		return certify.Options{}, err
	}
	o := certify.Options{ModelName: opts.modelName, Parallel: opts.parallel,
		Warden: opts.warden, Probe: opts.probe, Agent: opts.agent, Bash: opts.bash, Rmtree: opts.rmtree, Out: opts.out, Resume: opts.resume,
		Progress: stderr, DiffAllow: opts.diffAllow, Limits: limits, Network: opts.network, ProviderName: opts.provider, Baseline: opts.baseline,
		CaptureEntries: opts.captureEntries, Relay: relayLimits, Scenarios: opts.scenarios}
	if err := o.Validate(); err != nil {
		return o, usageError{err}
	}
	for _, f := range opts.adapterFiles {
		m, err := adapter.Load(f)
		if err == nil {
			err = certify.CheckManifestScenarios(m)
		}
		if err != nil {
			return o, usageError{err}
		}
		o.Adapters = append(o.Adapters, m)
	}
	if o.Images, err = pickImages(opts.imageArgs); err != nil {
		return o, err
	}
	if opts.shard != "" {
		if o.Shard, err = certify.ParseShard(opts.shard); err != nil {
			return o, usagef("--shard: %v", err)
		}
		// Every shard must slice the same matrix: "every built
		// image" differs from machine to machine.
		if len(opts.imageArgs) == 0 {
			return o, usagef("--shard: name the images with --image (the default, every built image, may differ between the shards' machines)")
		}
	}
	if err := opts.modelKey(&o); err != nil {
		return o, err
	}
	if opts.bash == "" {
		if _, err := os.Stat("/bin/bash-static"); err == nil {
			o.Bash = "/bin/bash-static"
		}
	}
	return o, nil
}

// modelKey sets the model's URL and upstream key from --model and
// --api-key-file.
func (opts certifyOptions) modelKey(o *certify.Options) error {
	switch {
	case opts.model == "scripted":
	case strings.HasPrefix(opts.model, "http://") || strings.HasPrefix(opts.model, "https://"):
		o.ModelURL = opts.model
		if opts.keyFile == "" {
			return usagef("--api-key-file: required with a model URL")
		}
	default:
		return usagef("--model: bad value %q (want scripted or a URL)", opts.model)
	}
	if opts.keyFile != "" {
		b, err := os.ReadFile(opts.keyFile)
		if err != nil {
			return fmt.Errorf("read API key: %w", err)
		}
		o.APIKey = strings.TrimSpace(string(b))
		if o.APIKey == "" {
			return usagef("--api-key-file: %q holds no key", opts.keyFile)
		}
	}
	return nil
}

// sizeText writes n as ParseBytes reads it, in the largest unit that
// divides it.
func sizeText(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d%s", n/u.size, u.suffix)
		}
	}
	return fmt.Sprint(n)
}

// relayFlags are the --relay-* flags, as given.
type relayFlags struct {
	request, held, record string
	concurrent            int
	bodyTime              time.Duration
}

// limits checks the --relay-* flags; a bad value names its flag and
// quotes the value.
func (f relayFlags) limits() (relay.Limits, error) {
	var l relay.Limits
	var err error
	size := func(flag, v string, least int64) (int64, error) {
		n, err := provider.ParseBytes(v)
		if err != nil || n < least {
			return 0, usagef("%s: bad value %q (want a size of at least %s, e.g. 8m)", flag, v, sizeText(least))
		}
		return n, nil
	}
	if l.RequestBytes, err = size("--relay-request-bytes", f.request, 64<<10); err != nil {
		return l, err
	}
	if f.held != "" {
		if l.HeldBytes, err = size("--relay-held-bytes", f.held, l.RequestBytes); err != nil {
			return l, err
		}
	}
	if l.RecordBytes, err = size("--relay-record-bytes", f.record, 1<<20); err != nil {
		return l, err
	}
	if f.concurrent < 1 {
		return l, usagef("--relay-concurrent: bad value %q (want >= 1)", fmt.Sprint(f.concurrent))
	}
	l.Concurrent = f.concurrent
	if f.bodyTime < time.Second {
		return l, usagef("--relay-body-time: bad value %q (want at least 1s)", f.bodyTime)
	}
	l.BodyTime = f.bodyTime
	return l, nil
}

// parseLimits checks the limit flags; a bad value names its flag and
// quotes the value.
func parseLimits(pids int64, memory string, shares int64) (provider.Limits, error) {
	l := provider.Limits{PidsLimit: pids, CPUShares: shares, OOMScoreAdj: provider.DefaultLimits.OOMScoreAdj}
	// The bounds are provider's; on the command line 0 is not "the
	// default" but a value below them.
	if pids < provider.MinPidsLimit {
		return l, usagef("--pids-limit: bad value %q (want >= %d: warden, the probe and a harness need more)", fmt.Sprint(pids), provider.MinPidsLimit)
	}
	mem, err := provider.ParseBytes(memory)
	if err != nil || mem < provider.MinMemoryBytes {
		return l, usagef("--memory: bad value %q (want a size of at least %s, e.g. 512m or 2g)", memory, sizeText(provider.MinMemoryBytes))
	}
	l.MemoryBytes = mem
	if shares < provider.MinCPUShares || shares > provider.MaxCPUShares {
		return l, usagef("--cpu-shares: bad value %q (want %d..%d)", fmt.Sprint(shares), provider.MinCPUShares, provider.MaxCPUShares)
	}
	if err := l.Check(); err != nil {
		return l, usageError{err}
	}
	return l, nil
}

// pickImages resolves --image values: NAME picks a known image, NAME=REF
// maps one; none means every image.
func pickImages(args []string) ([]images.Image, error) {
	overrides := map[string]string{}
	var names []string
	for _, a := range args {
		if strings.Contains(a, "=") {
			n, ref, err := images.ParseMapping(a)
			if err != nil {
				return nil, usagef("--image: bad value %q: %v", a, err)
			}
			overrides[n] = ref
			names = append(names, n)
			continue
		}
		names = append(names, a)
	}
	all, err := images.Resolve(overrides)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return all, nil
	}
	var out []images.Image
	for _, n := range names {
		found := false
		for _, img := range all {
			if img.Name == n {
				out = append(out, img)
				found = true
				break
			}
		}
		if !found {
			return nil, usagef("--image: unknown image %q", n)
		}
	}
	return out, nil
}

// interruptOnSignal returns a context the first INT or TERM cancels, with
// the signal's name as its cause, and a func that returns the exit error
// for that signal (nil when none came). A second signal exits at once with
// the same status: the evidence already written is whole, so --resume
// finishes the run.
func interruptOnSignal(stderr io.Writer) (context.Context, func() error, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	var mu sync.Mutex
	var got *interruptedError
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case s := <-ch:
				e := signalExit(s)
				mu.Lock()
				first := got == nil
				if first {
					got = e
				}
				mu.Unlock()
				if !first {
					fmt.Fprintf(stderr, "sandproof: second signal (%s): exiting now; --resume finishes the run\n", e.sig)
					os.Exit(e.code)
				}
				fmt.Fprintf(stderr, "sandproof: %s: no new case starts; stopping the running ones (again to exit at once)\n", e.sig)
				cancel(errors.New(e.sig))
			}
		}
	}()
	sig := func() error {
		mu.Lock()
		defer mu.Unlock()
		if got == nil {
			return nil
		}
		return *got
	}
	stop := func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
	return ctx, sig, stop
}

func signalExit(s os.Signal) *interruptedError {
	if s == syscall.SIGTERM {
		return &interruptedError{sig: "SIGTERM", code: exitSIGTERM}
	}
	return &interruptedError{sig: "SIGINT", code: exitSIGINT}
}

func printSummary(w io.Writer, s *certify.Summary, out string) {
	if s.Interrupted != "" {
		fmt.Fprintf(w, "run %s interrupted by %s: finish it with --resume\n", s.RunID, s.Interrupted)
	}
	fmt.Fprintf(w, "run %s: %d passed, %d failed, %d skipped, %d unknown (%d resumed) in %.1fs\n", s.RunID,
		s.Counts[reports.StatusPassed], s.Counts[reports.StatusFailed], s.Counts[reports.StatusSkipped],
		s.Counts[reports.StatusUnknown], s.Resumed, s.Wall.Seconds())
	floor := map[string]float64{}
	for _, b := range s.Baselines {
		if b.Err != "" {
			fmt.Fprintf(w, "  baseline %s: %s\n", b.Image, b.Err)
			continue
		}
		floor[b.Image] = b.Median
		fmt.Fprintf(w, "  baseline %s: bare `docker run --rm --network none IMAGE true` median %.2fs of %d\n", b.Image, b.Median, len(b.Seconds))
	}
	var overheads, ratios, containers, rest []float64
	for _, t := range s.Timings {
		line := fmt.Sprintf("  %-40s %-8s %6.2fs  harness %6.2fs  overhead %5.2fs", t.CaseID, t.Status, t.Seconds, t.Harness, t.Overhead)
		if f := floor[t.Image]; f > 0 {
			line += fmt.Sprintf(" (%.2fx the bare run)", t.Overhead/f)
		}
		fmt.Fprintln(w, line)
		if t.Status == reports.StatusPassed {
			overheads = append(overheads, t.Overhead)
			containers = append(containers, t.Container)
			rest = append(rest, t.Overhead-t.Container)
			if f := floor[t.Image]; f > 0 {
				ratios = append(ratios, t.Overhead/f)
			}
		}
	}
	if len(overheads) > 0 {
		line := fmt.Sprintf("overhead of %d passed case(s): median %.2fs", len(overheads), certify.Median(overheads))
		if len(ratios) > 0 {
			line += fmt.Sprintf(", median %.2fx the bare run of the case's image", certify.Median(ratios))
		}
		fmt.Fprintln(w, line)
		// The part a bare run does too, apart: what the ratio compares
		// is a whole bare run with the case's container work plus the
		// rest.
		fmt.Fprintf(w, "  of it the container's create, start and removal (a bare run's work too): median %.2fs; the rest: median %.2fs\n",
			certify.Median(containers), certify.Median(rest))
	}
	fmt.Fprintf(w, "evidence: %s\n", filepath.Join(out, reports.EvidenceFile))
}

// noCasePassed is the verdict on a run in which every case was skipped:
// nothing was certified, so it fails (exit 1, contract §9 exit statuses).
func noCasePassed(skipped int) error {
	return failedError{fmt.Errorf("no case passed (%d skipped): nothing was certified; --allow-empty accepts that", skipped)}
}
