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

	"github.com/sandproof/sandproof/images"
	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/relay"
	// The real harnesses' runtimes (Pi, OpenCode) register their npm
	// preparer here, so their manifests load.
	_ "github.com/sandproof/sandproof/runner/host/runtimes"
)

func init() { addCommand(newCertifyCmd) }

func newCertifyCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		adapterFiles, imageArgs, diffAllow                             []string
		modelArg, modelName, keyFile, warden, probe, bash, rmtree, out string
		parallel, baseline, captureEntries                             int
		resume, allowEmpty                                             bool
		pidsLimit, cpuShares                                           int64
		memory, shardArg, network, agent                               string
		relayOpts                                                      relayFlags
	)
	arch := runtime.GOARCH
	cmd := &cobra.Command{
		Use:   "certify --adapter FILE [--adapter FILE...] --out DIR",
		Short: "Run the case protocol (contract §7) for every image x adapter",
		Long: `Certify adapters: for every image x adapter, set up a container, seed the
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
			if len(adapterFiles) == 0 {
				return usagef("--adapter: at least one manifest is required")
			}
			if out == "" {
				return usagef("--out: required")
			}
			if parallel < 1 {
				return usagef("--parallel: bad value %q (want >= 1)", fmt.Sprint(parallel))
			}
			limits, err := parseLimits(pidsLimit, memory, cpuShares)
			if err != nil {
				return err
			}
			relayLimits, err := relayOpts.limits()
			if err != nil {
				return err
			}
			if baseline < 0 {
				return usagef("--baseline: bad value %q (want >= 0)", fmt.Sprint(baseline))
			}
			if captureEntries < 1 {
				return usagef("--capture-entries: bad value %q (want >= 1)", fmt.Sprint(captureEntries))
			}
			if network != provider.NetworkNone && network != provider.NetworkHost {
				return usagef("--network: bad value %q (want none or host)", network)
			}
			if agent == "" {
				agent = filepath.Join(filepath.Dir(probe), "sandagent")
			}
			for _, b := range []struct{ flag, path string }{{"--warden", warden}, {"--probe", probe}, {"--agent", agent}} {
				if _, err := os.Stat(b.path); err != nil {
					return usagef("%s: %q not found (build it with `make build`, or name the static build to use)", b.flag, b.path)
				}
			}
			var ms []*adapter.Manifest
			for _, f := range adapterFiles {
				m, err := adapter.Load(f)
				if err != nil {
					return usageError{err}
				}
				ms = append(ms, m)
			}
			imgs, err := pickImages(imageArgs)
			if err != nil {
				return err
			}
			var shard certify.Shard
			if shardArg != "" {
				if shard, err = certify.ParseShard(shardArg); err != nil {
					return usagef("--shard: %v", err)
				}
				// Every shard must slice the same matrix: "every built
				// image" differs from machine to machine.
				if len(imageArgs) == 0 {
					return usagef("--shard: name the images with --image (the default, every built image, may differ between the shards' machines)")
				}
			}
			o := certify.Options{Adapters: ms, Images: imgs, ModelName: modelName, Parallel: parallel,
				Warden: warden, Probe: probe, Agent: agent, Bash: bash, Rmtree: rmtree, Out: out, Resume: resume,
				Progress: stderr, DiffAllow: diffAllow, Limits: limits, Shard: shard, Network: network, Baseline: baseline,
				CaptureEntries: captureEntries, Relay: relayLimits}
			switch {
			case modelArg == "scripted":
			case strings.HasPrefix(modelArg, "http://") || strings.HasPrefix(modelArg, "https://"):
				o.ModelURL = modelArg
				if keyFile == "" {
					return usagef("--api-key-file: required with a model URL")
				}
			default:
				return usagef("--model: bad value %q (want scripted or a URL)", modelArg)
			}
			if keyFile != "" {
				b, err := os.ReadFile(keyFile)
				if err != nil {
					return fmt.Errorf("read API key: %w", err)
				}
				o.APIKey = strings.TrimSpace(string(b))
				if o.APIKey == "" {
					return usagef("--api-key-file: %q holds no key", keyFile)
				}
			}
			if bash == "" {
				if _, err := os.Stat("/bin/bash-static"); err == nil {
					o.Bash = "/bin/bash-static"
				}
			}
			ictx, sig, stop := interruptOnSignal(stderr)
			defer stop()
			o.Interrupt = ictx
			sum, err := certify.Run(cmd.Context(), o)
			if sum != nil {
				printSummary(stdout, sum, out)
			}
			// Precedence (contract §9 exit statuses): interrupted >
			// infrastructure > failed.
			if s := sig(); s != nil {
				if err != nil {
					fmt.Fprintf(stderr, "sandproof: %s\n", reports.Printable(err.Error(), false))
				}
				return s
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
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&adapterFiles, "adapter", nil, "adapter manifest (repeatable)")
	f.StringArrayVar(&imageArgs, "image", nil, "image NAME or NAME=REF (repeatable; default: every built image)")
	f.StringVar(&modelArg, "model", "scripted", "scripted, or a model base URL")
	f.StringVar(&modelName, "model-name", "fake-model", "model id given to the harness ({model})")
	f.StringVar(&keyFile, "api-key-file", "", "the model's API key: the relay sends it upstream; sandboxes only ever hold a per-run canary")
	f.IntVar(&parallel, "parallel", 1, "cases run at once")
	f.IntVar(&baseline, "baseline", 0, "time `N` bare runs of 'docker run --rm --network none IMAGE true' per image before the cases, and give each case's overhead beside that floor")
	f.StringVar(&warden, "warden", filepath.Join("bin", "linux-"+arch, "warden"), "static warden build for this host's arch")
	f.StringVar(&probe, "probe", filepath.Join("bin", "linux-"+arch, "probe"), "static probe build for this host's arch")
	f.StringVar(&agent, "agent", "", "static session agent build for this host's arch, which carries the model's traffic and the session's commands (default: sandagent beside --probe)")
	f.StringVar(&network, "network", provider.NetworkNone, "sandbox network: none (the harness reaches only the model, through the session agent) or host (flagged in the report)")
	f.StringVar(&bash, "bash-static", "", "static bash provided to adapters that need bash (default /bin/bash-static when present)")
	f.StringVar(&rmtree, "rmtree", "", "optional removal helper (runner/host/session/rmtree) for session dirs")
	f.StringArrayVar(&diffAllow, "diff-allow", nil, "sandbox path the filesystem diff may hold (repeatable)")
	f.BoolVar(&resume, "resume", false, "finish an interrupted run: run again every case of DIR/evidence.jsonl whose last attempt is unknown, and the cases never written")
	f.BoolVar(&allowEmpty, "allow-empty", false, "exit 0 when no case failed even if none passed (all skipped)")
	f.StringVar(&out, "out", "", "run directory (required)")
	f.StringVar(&shardArg, "shard", "", "run slice `i/N` of the image x adapter matrix (needs --image); join the shards with 'sandproof report merge'")
	d := provider.DefaultLimits
	f.Int64Var(&pidsLimit, "pids-limit", d.PidsLimit, "most processes and threads a case's container may hold")
	f.StringVar(&memory, "memory", "2g", "memory limit of a case's container (bytes, or with k, m or g), swap included")
	f.Int64Var(&cpuShares, "cpu-shares", d.CPUShares, "CPU shares of a case's container (relative weight; 1024 is a full share)")
	f.IntVar(&captureEntries, "capture-entries", provider.DefaultCaseEntries, "most archive entries (files, directories, links) one case's captures may take; past it the download stops and the case fails close.captures_bounded")
	rl := relay.DefaultLimits
	f.StringVar(&relayOpts.request, "relay-request-bytes", sizeText(rl.RequestBytes), "largest model request body the relay takes (bytes, or with k, m or g); a manifest's relay.request_bytes raises it for its adapter")
	f.StringVar(&relayOpts.held, "relay-held-bytes", "", "request bytes the relay holds at once, over a case's requests (default: "+sizeText(rl.HeldBytes)+" or four request caps, whichever is more)")
	f.StringVar(&relayOpts.record, "relay-record-bytes", sizeText(rl.RecordBytes), "budget of a case's model transcript (model_relay.jsonl and the calls kept in memory)")
	f.IntVar(&relayOpts.concurrent, "relay-concurrent", rl.Concurrent, "model requests in a case's relay at once")
	f.DurationVar(&relayOpts.bodyTime, "relay-body-time", rl.BodyTime, "longest a model request's body may take to arrive")
	return cmd
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
	if pids < 16 {
		return l, usagef("--pids-limit: bad value %q (want >= 16: warden, the probe and a harness need more)", fmt.Sprint(pids))
	}
	mem, err := provider.ParseBytes(memory)
	if err != nil || mem < 6<<20 {
		return l, usagef("--memory: bad value %q (want a size of at least 6m, e.g. 512m or 2g)", memory)
	}
	l.MemoryBytes = mem
	if shares < 2 || shares > 262144 {
		return l, usagef("--cpu-shares: bad value %q (want 2..262144)", fmt.Sprint(shares))
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
	var overheads, ratios []float64
	for _, t := range s.Timings {
		line := fmt.Sprintf("  %-40s %-8s %6.2fs  harness %6.2fs  overhead %5.2fs", t.CaseID, t.Status, t.Seconds, t.Harness, t.Overhead)
		if f := floor[t.Image]; f > 0 {
			line += fmt.Sprintf(" (%.2fx the bare run)", t.Overhead/f)
		}
		fmt.Fprintln(w, line)
		if t.Status == reports.StatusPassed {
			overheads = append(overheads, t.Overhead)
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
	}
	fmt.Fprintf(w, "evidence: %s\n", filepath.Join(out, reports.EvidenceFile))
}

// noCasePassed is the verdict on a run in which every case was skipped:
// nothing was certified, so it fails (exit 1, contract §9 exit statuses).
func noCasePassed(skipped int) error {
	return failedError{fmt.Errorf("no case passed (%d skipped): nothing was certified; --allow-empty accepts that", skipped)}
}
