package certify_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/provider/docker"
)

// The race of issue 35, attack 6: a process the harness left outside
// warden's reach swaps the adapter's scratch dir, and a dir in its session
// home, for a link to a root-owned canary, again and again, while close
// removes them as root. The canary holds the same names as the scratch
// dirs, so a removal steered through the link by name hits them.
const (
	swapCanary = "/srv/canary"
	swapGo     = "/tmp/sandproof-go"    // a fifo: the harness writes its home there
	swapCount  = "/tmp/sandproof-swaps" // the swapper's count
	swapFiles  = 40
)

func swapNames() string {
	var b strings.Builder
	for i := 1; i <= swapFiles; i++ {
		fmt.Fprintf(&b, " f%02d", i)
	}
	return b.String()
}

// swapCanaryScript (root, at the sandbox's creation): the canary, and the
// fifo the swapper waits on.
var swapCanaryScript = `set -e; mkdir -p ` + swapCanary + `; cd ` + swapCanary + `; for f in` + swapNames() +
	`; do echo canary > $f; done; echo canary > marker; mknod ` + swapGo + ` p; chmod 666 ` + swapGo

// swapperPath is where the swapper (fixtures/cmd/swapper) is put in a
// case's sandbox; it runs as the task user, from an engine exec: a
// process outside warden's tree, as one an image daemon or a hijacked
// service starts for the harness. It waits for the harness's word on the
// fifo, then swaps /tmp/sw and HOME/sw for links to the canary and back
// until the session dir is gone (or a minute passed), and writes its
// count, " ended" once it saw the session dir gone.
const swapperPath = "/srv/swapper"

var swapperStart = swapperPath + " -go " + swapGo + " -canary " + swapCanary + " -count " + swapCount +
	" /tmp/sw '{home}/sw' </dev/null >/dev/null 2>&1 &"

// swapSeen is what one case's sandbox held when it was destroyed.
type swapSeen struct {
	kase    string
	canary  []string // the canary's entries
	swaps   int
	ended   bool // the swapper saw the session dir gone: it ran through close
	readErr string
}

// swapProvider is the Docker provider whose case sandboxes get the canary
// and the swapper at creation, and are looked at before they are
// destroyed.
type swapProvider struct {
	*docker.Provider
	swapper string // its host build
	mu      sync.Mutex
	seen    []swapSeen
}

func (p *swapProvider) Create(ctx context.Context, spec provider.CreateSpec) (provider.Sandbox, error) {
	sb, err := p.Provider.Create(ctx, spec)
	kase := spec.Labels["sandproof.case"]
	if err != nil || strings.HasPrefix(kase, "libc__") {
		return sb, err
	}
	fail := func(err error) (provider.Sandbox, error) {
		sb.Destroy(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("set up the canary and the swapper: %w", err)
	}
	if err := provider.UploadFile(ctx, sb, p.swapper, swapperPath, 0o755, 0, 0); err != nil {
		return fail(err)
	}
	for _, e := range []provider.ExecSpec{
		{User: "0", Argv: []string{"/bin/sh", "-c", swapCanaryScript}},
		{User: "1000:1000", Argv: []string{"/bin/sh", "-c", swapperStart}},
	} {
		if res, err := sb.Exec(ctx, e); err != nil || res.ExitCode != 0 {
			return fail(fmt.Errorf("%q: %v, exit %d: %s", e.Argv, err, res.ExitCode, res.Stderr))
		}
	}
	return &swapSandbox{Sandbox: sb, p: p, kase: kase}, nil
}

type swapSandbox struct {
	provider.Sandbox
	p    *swapProvider
	kase string
	once sync.Once
}

func (s *swapSandbox) Unwrap() provider.Sandbox { return s.Sandbox }

func (s *swapSandbox) Destroy(ctx context.Context) error {
	s.once.Do(func() {
		seen := swapSeen{kase: s.kase}
		res, err := s.Sandbox.Exec(ctx, provider.ExecSpec{User: "0", Argv: []string{"/bin/sh", "-c", "cat " + swapCount + "; echo ---; ls -1 " + swapCanary}})
		if err != nil || res.ExitCode != 0 {
			seen.readErr = fmt.Sprintf("%v, exit %d: %s", err, res.ExitCode, res.Stderr)
		}
		count, list, _ := strings.Cut(string(res.Stdout), "---\n")
		count, seen.ended = strings.CutSuffix(strings.TrimSpace(count), " ended")
		seen.swaps, _ = strconv.Atoi(count)
		seen.canary = strings.Fields(list)
		s.p.mu.Lock()
		s.p.seen = append(s.p.seen, seen)
		s.p.mu.Unlock()
	})
	return s.Sandbox.Destroy(ctx)
}

var (
	staticMu    sync.Mutex
	staticBuilt = map[string]string{}
)

// staticBuild builds the static program pkg (relative to this package)
// once per test process, beside the other builds (binaries), and returns
// its path.
func staticBuild(t *testing.T, pkg string) string {
	t.Helper()
	warden, _, _ := binaries(t)
	staticMu.Lock()
	defer staticMu.Unlock()
	if p, ok := staticBuilt[pkg]; ok {
		return p
	}
	out := filepath.Join(filepath.Dir(warden), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	staticBuilt[pkg] = out
	return out
}

// TestCertifyScratchSwappedForALink: a hostile harness (the mini-agent,
// then a script) fills /tmp/sw (its scratch, under eight patterns, so each
// close checks that dir eight times) and HOME/sw (in its session dir),
// then wakes the swapper (fixtures/cmd/swapper, a static helper as the
// issue's attacker had). On debian-12 (coreutils) and alpine-class
// (BusyBox's rm, which recurses by name), with certify's default and with
// the rmtree helper given (--rmtree), two tries each: after close the
// canary has every entry on every try, and the swapper swapped on every
// try (the positive control that the race was live; it stops only once
// the session dir is gone, or after a minute). On main (337f6a1: the
// image's sh and rm as root, or rmtree --scratch resolving by name) the
// canary lost entries in 4 of 8 cases, on both images.
func TestCertifyScratchSwappedForALink(t *testing.T) {
	imgs := needEngine(t, "debian-12", "alpine-class")
	warden, probe, _ := binaries(t)
	prov, err := docker.New()
	if err != nil {
		t.Fatal(err)
	}
	script := "mkdir -p /tmp/sw {home}/sw && for f in" + swapNames() + "; do echo scratch > /tmp/sw/$f; echo scratch > {home}/sw/$f; done && echo {home} > " + swapGo
	var scratch strings.Builder
	scratch.WriteString("scratch:\n")
	for _, p := range []string{"*", "f*", "f0*", "f1*", "f2*", "f3*", "?*", "[f]*"} {
		fmt.Fprintf(&scratch, "  - \"/tmp/sw/%s\"\n", p)
	}
	swapper := staticBuild(t, "../../../fixtures/cmd/swapper")
	for _, rmtree := range []string{"", staticBuild(t, "../../rmtree")} {
		name := "certify's default"
		if rmtree != "" {
			name = "with --rmtree"
		}
		t.Run(name, func(t *testing.T) {
			var ms []*adapter.Manifest
			for i := range 2 {
				ms = append(ms, hostileVariant(t, "miniagent-opencode", fmt.Sprintf("scratch-swap-%d", i+1), script, scratch.String()))
			}
			sp := &swapProvider{Provider: prov, swapper: swapper}
			out := t.TempDir()
			var progress syncBuf
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			_, err := certify.Run(ctx, certify.Options{Adapters: ms, Images: imgs, APIKey: certify.NewCanary(), Parallel: 2,
				Warden: warden, Probe: probe, Rmtree: rmtree, Out: out, Progress: &progress, Provider: sp})
			evs := readEvidence(t, out)
			if len(evs) != len(ms)*len(imgs) {
				t.Fatalf("%d cases recorded, want %d: %v\n%s", len(evs), len(ms)*len(imgs), err, progress.String())
			}
			if len(sp.seen) != len(evs) {
				t.Fatalf("%d case sandboxes looked at before their destroy, want %d", len(sp.seen), len(evs))
			}
			for _, s := range sp.seen {
				if s.readErr != "" {
					t.Errorf("%s: reading the sandbox before its destroy: %s", s.kase, s.readErr)
				}
				// Positive control: the swapper swapped, and ran until
				// the session dir was gone or close was over (it swaps
				// for a minute at most).
				if s.swaps == 0 {
					t.Errorf("%s: the swapper never swapped: the race was not run", s.kase)
				}
				if len(s.canary) != swapFiles+1 {
					t.Errorf("%s: after close the canary holds %d of %d entries (%d swaps): a removal as root was steered into it", s.kase, len(s.canary), swapFiles+1, s.swaps)
				}
				t.Logf("%s: %d swaps (saw the session dir gone: %t), canary %d of %d", s.kase, s.swaps, s.ended, len(s.canary), swapFiles+1)
			}
		})
	}
}
