// Package certify runs the case protocol of contract §7 for every
// (image x adapter): setup by the owner (container, /task, XDG markers, probe
// baseline), seed and one activation by the adapter, close with receipts,
// verification after close by the owner (deliverable, markers, session dir,
// processes from the probe's process table, python3 and bash, the
// filesystem diff), and teardown. Each case becomes one reports.Evidence
// line in OUT/evidence.jsonl, written and fsynced as soon as the case ends,
// so a crash loses only cases in flight and --resume finishes the run.
package certify

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/hostfile"
	"github.com/sandproof/sandproof/runner/host/images"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/relay"
	"github.com/sandproof/sandproof/runner/host/session"
	"github.com/sandproof/sandproof/runner/warden/version"
)

// ErrCanaryLeaked means the run's API key showed up in an output file.
var ErrCanaryLeaked = errors.New("API key canary found in the run's output")

// ErrImageMissing means a case's image is not in the engine: nothing of
// the harness was tried, so no case is written (build it with `sandproof
// images build`).
var ErrImageMissing = errors.New("image missing from the engine")

// ErrOutExists refuses to append a new run to an existing evidence file.
var ErrOutExists = errors.New("evidence file exists (use --resume to finish that run, or a new --out)")

// Options configure a run.
type Options struct {
	Adapters []*adapter.Manifest
	Images   []images.Image
	// Scenarios names the scenarios to run (--scenario, contract §7.6
	// scenarios); empty runs every scenario of an adapter whose manifest
	// has a scenarios key and the challenge of one without
	// (scenariosFor).
	Scenarios []string
	// ModelURL is a real model's base URL; "" starts the scripted model
	// (one server per case, on 127.0.0.1, requiring the key). Either way
	// every call goes through the case's recording relay.
	ModelURL string
	// ModelName is {model}; "" means "fake-model".
	ModelName string
	// APIKey is the model's key: the relay sends it upstream, it never
	// enters a sandbox and is never written anywhere. "" means a fresh
	// random key for the scripted model, and none for a ModelURL.
	APIKey string
	// Canary is the only key the sandbox holds (the relay swaps it for
	// APIKey); "" means a fresh canary key. The run fails if it shows up
	// in any output.
	Canary string
	// Parallel is how many cases run at once; < 1 means 1.
	Parallel int
	// Host paths of the static builds for the host's architecture. Bash
	// and Rmtree may be empty; Agent defaults to the sandagent beside
	// Probe (bin/linux-ARCH/ holds both).
	Warden, Probe, Agent, Bash, Rmtree string
	// Network is the sandboxes' network: provider.NetworkNone (the
	// default when empty: the harness reaches the model through the
	// session agent's tunnel, and nothing else) or provider.NetworkHost
	// (the harness shares the host's network; the report flags it).
	Network string
	// Out is the run directory.
	Out string
	// Resume finishes an earlier run in Out: every case whose last
	// attempt is not final (unknown, or never written) runs again with
	// the next attempt number.
	Resume bool
	// Interrupt, when done, interrupts the run (contract §9 interrupts):
	// no case starts after it, a running activation is stopped through
	// its session, and the cases it cut short are written as unknown with
	// context.Cause(Interrupt) as the reason. nil never interrupts. ctx,
	// by contrast, is the hard stop: everything it cancels fails.
	Interrupt context.Context
	// Progress receives one line per case and stage; nil discards.
	Progress io.Writer
	// Watcher is told when the cases are planned, start and end (a live
	// status line); nil tells no one.
	Watcher Watcher
	// DiffAllow adds sandbox paths (and everything below them) the
	// filesystem diff may hold.
	DiffAllow []string
	// User is the harness's "UID:GID"; "" means 1000:1000 (the images'
	// task user) and HOME /home/task.
	User     string
	TaskHome string
	// Limits bound every case's container; zero fields mean
	// provider.DefaultLimits'.
	Limits provider.Limits
	// CaptureEntries caps the archive entries (files, directories, links,
	// specials) one case's captures take; 0 means
	// provider.DefaultCaseEntries. Past it the download stops, and the
	// case fails close.captures_bounded.
	CaptureEntries int
	// Baseline, when > 0, times that many bare `docker run --rm IMAGE
	// true` of every image before the cases start (Summary.Baselines),
	// the floor each case's overhead is read against.
	Baseline int
	// Provider makes the sandboxes; nil means the one ProviderName names,
	// by default the Docker engine runner/host/engine resolves
	// (DOCKER_HOST, the docker context, the default socket). Certify needs its VolumeMaker and its sandboxes'
	// Streamer; without a Differ the filesystem diff is unknown.
	Provider provider.Provider
	// ProviderName names the registered provider (provider.Register) that
	// makes the sandboxes when Provider is nil; "" means
	// provider.DefaultName. The binary links the implementations it
	// offers (cmd/sandproof/providers.go).
	ProviderName string
	// Shard runs one slice of the matrix (see Shard); the zero Shard runs
	// it all. Every record names the shard and the whole matrix's digest.
	Shard Shard
	// Relay bounds every case's model relay; zero fields mean
	// relay.DefaultLimits'. An adapter's relay.request_bytes raises
	// RequestBytes for its cases.
	Relay relay.Limits
	// Scan bounds each canary search of a case's files; zero fields
	// mean DefaultScanBytes and DefaultScanTime.
	Scan ScanLimits
	// OwnerDeadline bounds each owner step on a case's sandbox (an exec,
	// a download, the diff, the wait for the baseline; deadline.go); 0
	// means DefaultOwnerDeadline. A step past it leaves its check unknown.
	OwnerDeadline time.Duration
}

// CaseTiming is what a case cost.
type CaseTiming struct {
	CaseID string
	Image  string // the image's name
	Status reports.Status
	// Seconds is the whole case; Harness is the activation's run inside
	// warden (receipt started_at to ended_at); Install is the install
	// launch. Overhead is what sandproof added: Seconds - Harness - Install.
	Seconds, Harness, Install, Overhead float64
	// Container is the part of Overhead that a bare `docker run --rm`
	// (Baseline) does too: the container's create and start (setup) and
	// its removal (teardown). Overhead - Container is what the case
	// adds to a bare run: the probe's and the agent's execs, the
	// session's seed, launches and close, verify, the host's checks.
	Container float64
	// Infrastructure is the engine's word on how it failed a case that
	// ended unknown for it (Evidence.Infrastructure); "" otherwise.
	Infrastructure string
}

// Summary is what a run did.
type Summary struct {
	RunID  string
	Counts map[reports.Status]int
	// Resumed counts cases found already done in the evidence file.
	Resumed int
	Timings []CaseTiming
	Wall    time.Duration
	Report  *reports.Report
	// Baselines are the bare runs Options.Baseline asked for, per image.
	Baselines []Baseline
	// Interrupted is the interrupt's cause ("SIGINT") when the run was
	// interrupted; "" otherwise.
	Interrupted string
}

// Failed reports whether any case failed or ended unknown (skipped cases do
// not fail a run).
func (s *Summary) Failed() bool {
	return s.Counts[reports.StatusFailed] > 0 || s.Counts[reports.StatusUnknown] > 0
}

// Infrastructure lists the cases of this run that ended unknown because
// the engine failed them (CaseTiming.Infrastructure), "CASE: CAUSE" each:
// the run exits 3 for them (contract §9 exit statuses), however many
// attempts they had.
func (s *Summary) Infrastructure() []string {
	var out []string
	for _, t := range s.Timings {
		if t.Status == reports.StatusUnknown && t.Infrastructure != "" {
			out = append(out, t.CaseID+": "+t.Infrastructure)
		}
	}
	sort.Strings(out)
	return out
}

type caseSpec struct {
	id       string
	attempt  int // 1 for a case's first run
	scenario Scenario
	image    images.Image
	adapter  *adapter.Manifest
	runtime  string // prepared runtime host dir
	rt       rtKey
	// requires is the manifest's requires plus its prepared build's own
	// (per platform).
	requires []string
	// skip says why the case cannot run (its platform is not covered, its
	// runtime's source did not answer); "" runs it.
	skip string
}

// runner is one run's shared state.
type runner struct {
	opts  Options
	runID string
	key   string // the canary: the only key a sandbox holds
	// upstreamKey is the model's key, sent by the relay only.
	upstreamKey string
	host        string
	// harness is each runtime's provenance, by adapter name and libc.
	harness   map[rtKey]*reports.HarnessRuntime
	wardenSHA string
	matrix    Matrix
	prov      provider.Provider
	bins      session.Binaries
	// ownerVol is the read-only volume holding the probe and the session
	// agent (ownerDir in every sandbox); rtVol holds each mounted runtime.
	ownerVol string
	rtVol    map[rtKey]string
	layerVol map[rtKey]string // a runtime's glibc layer, mounted at adapter.GlibcLayerMountDir
	ev       *evidenceFile
	progMu   sync.Mutex
}

func (r *runner) progress(format string, args ...any) {
	if r.opts.Progress == nil {
		return
	}
	r.progMu.Lock()
	defer r.progMu.Unlock()
	// Text from the sandbox (errors, failure messages) reaches the
	// console only made printable.
	io.WriteString(r.opts.Progress, reports.Printable(fmt.Sprintf("certify: "+format, args...), false)+"\n")
}

// captureEntries is the per-case entry cap of the captures.
func (r *runner) captureEntries() int { return r.opts.CaptureEntries }

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// NewCanary returns a fresh canary API key.
func NewCanary() string { return "sk-sandproof-canary-" + randomHex(16) }

func caseDirName(id string) string { return strings.ReplaceAll(id, "/", "__") }

// Run certifies every adapter on every image, in four steps: validate the
// options, prepare what the cases share (the engine, the images, the
// runtimes), run the cases, and finish (the reports, the canary search).
func Run(ctx context.Context, o Options) (*Summary, error) {
	start := time.Now()
	r, err := newRunner(o)
	if err != nil {
		return nil, err
	}
	sum, cases, err := r.plan()
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "sandproof-certify-")
	if err != nil {
		return nil, fmt.Errorf("certify: %w", err)
	}
	defer os.RemoveAll(work)
	if err := r.prepare(ctx, work, cases); err != nil {
		return nil, err
	}
	// The evidence file is opened only once everything is prepared: a
	// run that cannot start leaves no evidence behind.
	if r.ev, err = appendEvidence(filepath.Join(r.opts.Out, reports.EvidenceFile)); err != nil {
		return nil, err
	}
	defer r.ev.Close()
	if len(cases) > 0 {
		sum.Baselines = r.measureBaselines(ctx, r.opts.Baseline)
	}
	return r.runAndFinish(ctx, cases, sum, start)
}

// runAndFinish runs the cases and then finishes the run whatever they
// did: a case whose record could not be written (an I/O error) does not
// skip the run's reports nor its canary scan. The reports are written
// for what was written, the scan runs, and the write error is the run's
// error (contract §9: infrastructure, exit 3, which outranks a canary
// found by the scan; that finding is named in the error's text).
func (r *runner) runAndFinish(ctx context.Context, cases []caseSpec, sum *Summary, start time.Time) (*Summary, error) {
	runErr := r.run(ctx, cases, sum)
	sum, err := r.finish(ctx, sum, start)
	switch {
	case runErr == nil:
		return sum, err
	case err != nil:
		return sum, fmt.Errorf("%w; then: %v", runErr, err)
	}
	return sum, runErr
}

// newRunner validates the options and fills in their defaults.
func newRunner(o Options) (*runner, error) {
	// A network of the wrong name is refused first, in the provider's
	// words, before anything else is looked at.
	if _, err := provider.Network(o.Network); err != nil {
		return nil, fmt.Errorf("certify: %w", err)
	}
	o = o.withDefaults()
	if len(o.Adapters) == 0 || len(o.Images) == 0 {
		return nil, errors.New("certify: need at least one adapter and one image")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := o.Limits.Check(); err != nil {
		return nil, fmt.Errorf("certify: %w", err)
	}
	names := map[string]bool{}
	for _, m := range o.Adapters {
		if names[m.Name] {
			return nil, fmt.Errorf("certify: adapter name %q given twice", m.Name)
		}
		names[m.Name] = true
		if err := CheckManifestScenarios(m); err != nil {
			return nil, fmt.Errorf("certify: adapter %s: %w", m.Name, err)
		}
	}
	r := &runner{opts: o, key: o.Canary, upstreamKey: o.APIKey}
	if r.key == "" {
		r.key = NewCanary()
	}
	if r.upstreamKey == "" && o.ModelURL == "" {
		r.upstreamKey = "sk-sandproof-upstream-" + randomHex(16)
	}
	if r.upstreamKey == r.key {
		return nil, errors.New("certify: the canary and the model's key must differ")
	}
	r.host, _ = os.Hostname()
	var err error
	if r.wardenSHA, _, err = hostfile.SHA256File(o.Warden); err != nil {
		return nil, fmt.Errorf("certify: warden: %w", err)
	}
	arch := runtime.GOARCH
	// The session's probe (seed's hash of warden) and warden are the
	// builds on the owner's read-only volume, which every case's sandbox
	// mounts: their bytes need not go over the agent again for every
	// case. Seed copies warden into the session's bin/ inside the
	// sandbox and hashes the copy against o.Warden's sha256.
	r.bins = session.Binaries{Warden: map[string]string{arch: o.Warden}, Probe: map[string]string{arch: o.Probe},
		ProbeAt: map[string]string{arch: probePath}, WardenAt: map[string]string{arch: wardenPath}}
	if o.Bash != "" {
		r.bins.Bash = map[string]string{arch: o.Bash}
	}
	if o.Rmtree != "" {
		r.bins.Rmtree = map[string]string{arch: o.Rmtree}
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, fmt.Errorf("certify: %w", err)
	}
	return r, nil
}

// plan reads what an earlier attempt of the run did (--resume) and lists
// the cases of this shard still to run.
func (r *runner) plan() (*Summary, []caseSpec, error) {
	o := r.opts
	done, runID, err := openEvidence(filepath.Join(o.Out, reports.EvidenceFile), o.Resume)
	if err != nil {
		return nil, nil, err
	}
	r.runID = runID
	if r.runID == "" {
		r.runID = time.Now().UTC().Format("20060102T150405Z") + "-" + randomHex(3)
	}
	sum := &Summary{RunID: r.runID, Counts: map[reports.Status]int{}}
	r.matrix = NewMatrix(o.Images, o.Adapters, o.Scenarios)
	if !o.Shard.IsZero() {
		r.progress("shard %s of a matrix of %d case(s), sha256 %s", o.Shard, len(r.matrix.Cases), r.matrix.SHA256)
	}
	var cases []caseSpec
	for _, img := range o.Images {
		for _, m := range o.Adapters {
			for _, sc := range scenariosFor(m, o.Scenarios) {
				id := CaseID(img.Name, m.Name, sc.Name)
				if !r.matrix.Has(o.Shard, id) {
					continue
				}
				last, ok := done[id]
				if ok && last.status != reports.StatusUnknown {
					sum.Resumed++
					sum.Counts[last.status]++
					r.progress("%s: already in the evidence (%s, attempt %d), skipped by --resume", id, last.status, last.attempt)
					continue
				}
				if ok {
					r.progress("%s: attempt %d was unknown, runs again", id, last.attempt)
				}
				cases = append(cases, caseSpec{id: id, attempt: last.attempt + 1, image: img, adapter: m, scenario: sc,
					skip: sc.skipReason(m, o.ModelURL != "")})
			}
		}
	}
	r.progress("run %s: %d case(s) to run, %d done, parallel %d", r.runID, len(cases), sum.Resumed, o.Parallel)
	r.watcher().Planned(len(cases))
	return sum, cases, nil
}

// prepare readies what the cases share: the engine, the images, the
// probe's dir and the runtimes (work is the run's scratch dir). Nothing
// is prepared when no case is left to run.
func (r *runner) prepare(ctx context.Context, work string, cases []caseSpec) error {
	if len(cases) == 0 {
		return nil
	}
	if err := os.Chmod(work, 0o755); err != nil {
		return fmt.Errorf("certify: %w", err)
	}
	// The probe, the session agent and warden go into a volume of their
	// own, mounted read-only into every sandbox: nothing of the host is
	// visible, and nothing is uploaded per case (seed places warden from
	// it, session.Binaries.WardenAt).
	ownerTree := filepath.Join(work, "owner")
	if err := os.MkdirAll(ownerTree, 0o755); err != nil {
		return fmt.Errorf("certify: %w", err)
	}
	for name, src := range ownerFiles(r.opts) {
		if err := copyExec(src, filepath.Join(ownerTree, name)); err != nil {
			return fmt.Errorf("certify: %w", err)
		}
	}
	var err error
	r.prov = r.opts.Provider
	if r.prov == nil {
		name := cmp.Or(r.opts.ProviderName, provider.DefaultName)
		if r.prov, err = provider.New(name); err != nil {
			if name == provider.DefaultName && !errors.Is(err, provider.ErrUnknownProvider) {
				return fmt.Errorf("certify: %w (start an engine with `bash images/engine.sh start`)", err)
			}
			return fmt.Errorf("certify: provider %q: %w", name, err)
		}
	}
	if f, ok := r.prov.(provider.ImageFinder); ok {
		for _, img := range r.opts.Images {
			if _, err := f.ImageID(ctx, img.Ref); err != nil {
				return fmt.Errorf("certify: image %s (%s): %w: %v (build it with `sandproof images build`)", img.Name, img.Ref, ErrImageMissing, err)
			}
		}
	}
	if r.ownerVol, err = r.volume(ctx, "owner", ownerTree); err != nil {
		return err
	}
	// A runtime that cannot be made (a package the registry does not
	// know, a tarball off its pin) stops the run before any case starts.
	return r.prepareRuntimes(ctx, work, runtime.GOARCH, cases)
}

// ownerFiles is the owner volume's tree: the host build behind each name
// under ownerDir that the cases run or place (probePath, agentPath,
// wardenPath).
func ownerFiles(o Options) map[string]string {
	return map[string]string{path.Base(probePath): o.Probe, path.Base(agentPath): o.Agent, path.Base(wardenPath): o.Warden}
}

// volume returns the provider's read-only volume holding the tree dir,
// named by what it holds (kind and the tree's digest), so an engine keeps
// one per content however many runs use it.
func (r *runner) volume(ctx context.Context, kind, dir string) (string, error) {
	vm, ok := r.prov.(provider.VolumeMaker)
	if !ok {
		return "", fmt.Errorf("certify: provider %s keeps no volumes", r.prov.Name())
	}
	t := time.Now()
	sum, files, err := treeHash(dir)
	if err != nil {
		return "", fmt.Errorf("certify: %s volume: %w", kind, err)
	}
	name, err := vm.Volume(ctx, kind+"-"+sum[:32], dir)
	if err != nil {
		return "", fmt.Errorf("certify: %s volume: %w", kind, err)
	}
	r.progress("volume %s: %s (%d files) in %.1fs", name, kind, files, time.Since(t).Seconds())
	return name, nil
}

// run runs the cases, Parallel at a time, writing each one's evidence as
// soon as it ends; no case starts after the interrupt.
func (r *runner) run(ctx context.Context, cases []caseSpec, sum *Summary) error {
	o := r.opts
	var mu sync.Mutex
	var runErr error
	jobs := make(chan caseSpec)
	var wg sync.WaitGroup
	for w := 0; w < o.Parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range jobs {
				if interrupted(o.Interrupt) {
					continue
				}
				r.watcher().CaseStarted(c.id)
				ev, timing := r.runCase(ctx, c)
				werr := r.ev.Write(ev, r.key, o.APIKey)
				mu.Lock()
				sum.Counts[ev.Status]++
				sum.Timings = append(sum.Timings, timing)
				if werr != nil && runErr == nil {
					runErr = werr
				}
				mu.Unlock()
				r.progress("%s: %s in %.1fs (overhead %.2fs)", c.id, strings.ToUpper(string(ev.Status)), ev.Seconds, timing.Overhead)
				r.watcher().CaseEnded(c.id, ev.Status)
			}
		}()
	}
	for _, c := range cases {
		if ctx.Err() != nil || interrupted(o.Interrupt) {
			break
		}
		jobs <- c
	}
	close(jobs)
	// After the running cases end: an interrupt during the last case
	// comes after every case was handed out.
	wg.Wait()
	if interrupted(o.Interrupt) {
		sum.Interrupted = interruptCause(o.Interrupt)
	}
	sort.Slice(sum.Timings, func(i, j int) bool { return sum.Timings[i].CaseID < sum.Timings[j].CaseID })
	return runErr
}

// finish closes the evidence, writes the reports, and fails the run when
// a key shows up anywhere in its output. The scan runs even when the
// reports could not be written (what the run dir holds is still
// searched); an error writing them outranks a key found (contract §9).
func (r *runner) finish(ctx context.Context, sum *Summary, start time.Time) (*Summary, error) {
	o := r.opts
	if err := r.ev.Close(); err != nil {
		return sum, err
	}
	rep, repErr := reports.WriteAll(o.Out)
	if repErr != nil {
		repErr = fmt.Errorf("certify: write reports: %w", repErr)
	}
	sum.Report = rep
	sum.Wall = time.Since(start)
	scanErr := r.scanRun()
	switch {
	case repErr != nil && scanErr != nil:
		return sum, fmt.Errorf("%w; then: %v", repErr, scanErr)
	case repErr != nil:
		return sum, repErr
	case scanErr != nil:
		return sum, scanErr
	}
	if ctx.Err() != nil {
		return sum, ctx.Err()
	}
	return sum, nil
}

// scanRun searches the whole run dir once more (reports included) for
// both keys, bounded as every case's scan is, once per case.
func (r *runner) scanRun() error {
	o := r.opts
	n := int64(max(1, len(r.matrix.Cases)))
	lim := ScanLimits{Bytes: cmp.Or(o.Scan.Bytes, DefaultScanBytes) * n, Time: cmp.Or(o.Scan.Time, DefaultScanTime) * time.Duration(n)}
	for _, k := range []string{r.key, o.APIKey} {
		if k == "" {
			continue
		}
		if leaks, err := FindCanaryLimit(o.Out, k, lim); err != nil {
			return err
		} else if len(leaks) > 0 {
			return fmt.Errorf("%w: %s", ErrCanaryLeaked, strings.Join(leaks, ", "))
		}
	}
	return nil
}

func interrupted(ic context.Context) bool { return ic != nil && ic.Err() != nil }

// interruptible is ctx, also cancelled when ic is done.
func interruptible(ctx, ic context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(ctx)
	if ic == nil {
		return c, cancel
	}
	stop := context.AfterFunc(ic, cancel)
	return c, func() { stop(); cancel() }
}

func copyExec(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o755)
}

func suiteVersion() string { return version.String() }
