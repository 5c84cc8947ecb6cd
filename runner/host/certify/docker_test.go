package certify_test

import (
	"context"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/remoteengine"
	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/host/engine"
	"github.com/sandproof/sandproof/runner/host/images"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/provider/docker"
	"github.com/sandproof/sandproof/runner/model"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds warden, the probe, and a warden whose stop is reduced to
// a process-group kill (the groupkill mutant, by build tag: the shipped
// code path is untouched).
func binaries(t *testing.T) (warden, probe, groupkill string) {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "certify-test-bin-")
		if buildErr != nil {
			return
		}
		for _, b := range []struct{ out, pkg, tags string }{
			{"warden", "../../../cmd/warden", ""},
			{"probe", "../../../cmd/probe", ""},
			{"sandagent", "../../../cmd/sandagent", ""}, // found beside the probe
			{"warden-groupkill", "../../../cmd/warden", "sandproof_mutant,mutant_groupkill"},
		} {
			args := []string{"build", "-o", filepath.Join(binDir, b.out)}
			if b.tags != "" {
				args = append(args, "-tags", b.tags)
			}
			cmd := exec.Command("go", append(args, b.pkg)...)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = &buildError{b.pkg, string(out)}
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "warden"), filepath.Join(binDir, "probe"), filepath.Join(binDir, "warden-groupkill")
}

// engineHost is the address of the engine certify reaches in this process.
func engineHost(t *testing.T) string {
	t.Helper()
	ep, err := engine.Default()
	if err != nil {
		t.Fatal(err)
	}
	return ep.Host
}

type buildError struct{ pkg, out string }

func (e *buildError) Error() string { return "build " + e.pkg + ": " + e.out }

func TestMain(m *testing.M) {
	// remoteengine.Main stops the second engine remote_docker_test.go's
	// tests share.
	code := remoteengine.Main(m)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// needEngine skips (fails under SANDPROOF_STRICT=1) without a Docker
// engine or without the built images.
func needEngine(t *testing.T, names ...string) []images.Image {
	t.Helper()
	if _, err := docker.New(); err != nil {
		testenv.NoEngine(t, err)
	}
	all, err := images.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []images.Image
	for _, img := range all {
		for _, n := range names {
			if img.Name != n {
				continue
			}
			if exec.Command("docker", "image", "inspect", img.Ref).Run() != nil {
				testenv.NoImage(t, n, img.Ref)
			}
			out = append(out, img)
		}
	}
	return out
}

func load(t *testing.T, names ...string) []*adapter.Manifest {
	t.Helper()
	var ms []*adapter.Manifest
	for _, n := range names {
		m, err := adapter.Load(filepath.Join("..", "..", "..", "fixtures", "adapters", n+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms
}

// fixtureVariant parses a fixture adapter's manifest after edit, as if it
// sat beside the fixtures (NAME-VARIANT.yaml), so its relative package path
// still resolves.
func fixtureVariant(t *testing.T, name, variant string, edit func(string) string) *adapter.Manifest {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "fixtures", "adapters"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(dir, name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := adapter.Parse(name+"-"+variant+".yaml", dir, []byte(edit(string(src))))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func bashStatic() string {
	if _, err := os.Stat("/bin/bash-static"); err == nil {
		return "/bin/bash-static"
	}
	return ""
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func readEvidence(t *testing.T, dir string) map[string]*reports.Evidence {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, reports.EvidenceFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]*reports.Evidence{}
	for ev, err := range reports.ReadEvidence(f) {
		if err != nil {
			t.Fatal(err)
		}
		out[ev.CaseID] = ev
	}
	return out
}

func checkStatus(ev *reports.Evidence, id string) reports.Status {
	for _, c := range ev.Checks {
		if c.ID == id {
			return c.Status
		}
	}
	return ""
}

// TestCertifyMatrix certifies the three fixture adapters on the three
// images end to end, and greps every output for the run's canary key.
func TestCertifyMatrix(t *testing.T) {
	t.Parallel() // a certify run of its own: beside the other parallel tests
	imgs := needEngine(t, "debian-12", "alpine-class", "old-python")
	warden, probe, _ := binaries(t)
	out := t.TempDir()
	key := certify.NewCanary()
	var progress syncBuf
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	sum, err := certify.Run(ctx, certify.Options{
		Adapters: load(t, "miniagent-pi", "miniagent-opencode", "miniagent-daemon"), Images: imgs,
		Canary: key, Parallel: 2, Warden: warden, Probe: probe, Bash: bashStatic(), Out: out, Progress: &progress,
	})
	if err != nil {
		t.Fatalf("certify: %v\nprogress:\n%s", err, progress.String())
	}
	evs := readEvidence(t, out)
	if len(evs) != 9 {
		t.Fatalf("%d evidence records, want 9", len(evs))
	}
	for id, ev := range evs {
		want := reports.StatusPassed
		switch id {
		case "alpine-class/miniagent-pi":
			want = reports.StatusSkipped // declares glibc; alpine-class has only musl
		}
		if ev.Status != want {
			var failed []string
			for _, c := range ev.Checks {
				if c.Status != reports.StatusPassed {
					failed = append(failed, c.ID+": "+c.Detail)
				}
			}
			t.Errorf("%s: status %s, want %s; checks not passed: %v (skip: %q)", id, ev.Status, want, failed, ev.SkipReason)
		}
		d := provider.DefaultLimits
		if sb := ev.Sandbox; sb == nil || *sb != (reports.Sandbox{Network: provider.NetworkNone, Provider: "docker", Engine: engineHost(t),
			PidsLimit: d.PidsLimit, MemoryBytes: d.MemoryBytes, CPUShares: d.CPUShares, OOMScoreAdj: d.OOMScoreAdj}) {
			t.Errorf("%s: sandbox %+v, want network none, this engine and the default limits %+v", id, ev.Sandbox, d)
		}
		if want == reports.StatusPassed && ev.LaunchDeadlineSeconds != 120 {
			t.Errorf("%s: launch_deadline_seconds %v, want the manifest's launch.deadline 120", id, ev.LaunchDeadlineSeconds)
		}
		if want == reports.StatusPassed && (ev.ModelCalls < 2 || ev.ActivationReceipt == nil || !ev.ActivationReceipt.CleanupConfirmed || ev.After == nil || len(ev.After.MarkersKept) != 4) {
			t.Errorf("%s: model_calls %d, activation %+v, after %+v", id, ev.ModelCalls, ev.ActivationReceipt, ev.After)
		}
	}
	if sk := evs["alpine-class/miniagent-pi"]; sk != nil && !strings.Contains(sk.SkipReason, "glibc") {
		t.Errorf("skip reason %q does not name glibc", sk.SkipReason)
	}
	if oc := evs["debian-12/miniagent-opencode"]; oc != nil && (oc.CloseObservationRecords == 0 || oc.OutputItemTypes["function_call"] == 0) {
		t.Errorf("opencode case read no SQLite records: %d observations, items %v", oc.CloseObservationRecords, oc.OutputItemTypes)
	}
	if sum.Counts[reports.StatusPassed] != 8 || sum.Counts[reports.StatusSkipped] != 1 {
		t.Errorf("counts %v, want 8 passed, 1 skipped", sum.Counts)
	}
	for _, f := range []string{reports.HTMLFile, reports.MarkdownFile, reports.JUnitFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	// The canary: a positive control first (the search finds a planted
	// copy), then nothing the run wrote may hold it.
	plant := t.TempDir()
	os.WriteFile(filepath.Join(plant, "x"), []byte("a"+key+"b"), 0o600)
	if hits, err := certify.FindCanary(plant, key); err != nil || len(hits) != 1 {
		t.Fatalf("canary search misses a planted key: %v %v", hits, err)
	}
	if hits, err := certify.FindCanary(out, key); err != nil || len(hits) != 0 {
		t.Errorf("canary key in the run's files: %v %v", hits, err)
	}
	if strings.Contains(progress.String(), key) {
		t.Error("canary key in the progress output")
	}
	if !strings.Contains(progress.String(), "debian-12/miniagent-opencode: verify done") {
		t.Errorf("progress lacks per-stage lines:\n%s", progress.String())
	}
	for _, tm := range sum.Timings {
		t.Logf("%-34s %-7s case %6.2fs harness %5.2fs overhead %5.2fs", tm.CaseID, tm.Status, tm.Seconds, tm.Harness, tm.Overhead)
	}
}

// TestCertifyUndeclaredGlibcFails runs the glibc-linked adapter without
// its requirement on the musl-only image: a clear failure, never a hang.
func TestCertifyUndeclaredGlibcFails(t *testing.T) {
	t.Parallel() // a certify run of its own: beside the other parallel tests
	imgs := needEngine(t, "alpine-class")
	warden, probe, _ := binaries(t)
	m := fixtureVariant(t, "miniagent-glibc", "undeclared", func(src string) string {
		text := strings.Replace(src, "requires: [glibc]\n", "", 1)
		if text == src || strings.Contains(text, "requires:") {
			t.Fatal("could not drop the requirement from the manifest")
		}
		return text
	})
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sum, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{m}, Images: imgs,
		Warden: warden, Probe: probe, Out: out, Limits: provider.Limits{PidsLimit: 300, MemoryBytes: 1 << 30, CPUShares: 256}})
	if err != nil {
		t.Fatal(err)
	}
	ev := readEvidence(t, out)["alpine-class/miniagent-glibc"]
	if ev == nil || ev.Status != reports.StatusFailed || !sum.Failed() {
		t.Fatalf("undeclared glibc on alpine-class: %+v, want failed", ev)
	}
	// The limits asked for, as the engine applied them.
	if want := (reports.Sandbox{Network: provider.NetworkNone, Provider: "docker", Engine: engineHost(t), PidsLimit: 300, MemoryBytes: 1 << 30, CPUShares: 256, OOMScoreAdj: provider.DefaultLimits.OOMScoreAdj}); ev.Sandbox == nil || *ev.Sandbox != want {
		t.Errorf("sandbox %+v, want %+v", ev.Sandbox, want)
	}
	if checkStatus(ev, "activation.result") != reports.StatusFailed || checkStatus(ev, "verify.deliverable") != reports.StatusFailed {
		t.Errorf("checks: %+v", ev.Checks)
	}
	// The failure says why: the binary's loader is not in the image.
	for _, c := range ev.Checks {
		if c.ID == "activation.result" && !strings.Contains(c.Detail, "ELF interpreter") {
			t.Errorf("activation.result detail %q: want warden's word on the missing ELF interpreter", c.Detail)
		}
	}
	if ev.ActivationReceipt == nil || ev.ActivationReceipt.ReturnCode == nil || *ev.ActivationReceipt.ReturnCode == 0 {
		t.Errorf("activation receipt %+v: want a non-zero exit from a binary without its loader", ev.ActivationReceipt)
	}
	if ev.Seconds > 120 {
		t.Errorf("case took %.0fs", ev.Seconds)
	}
}

// TestCertifyDaemonNeedsWardenStop certifies the daemon-leaving adapter
// with the shipped warden (passes) and with a warden whose stop is reduced
// to a process-group kill (the same case must fail: the daemon lives on).
func TestCertifyDaemonNeedsWardenStop(t *testing.T) {
	if runtime.GOOS != "linux" {
		testenv.Missing(t, "Linux (this is "+runtime.GOOS+")", "warden runs on Linux only: run the tests there")
	}
	imgs := needEngine(t, "debian-12")
	warden, probe, groupkill := binaries(t)
	ms := load(t, "miniagent-daemon")
	run := func(w string) *reports.Evidence {
		out := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if _, err := certify.Run(ctx, certify.Options{Adapters: ms, Images: imgs, Warden: w, Probe: probe, Out: out}); err != nil {
			t.Fatal(err)
		}
		return readEvidence(t, out)["debian-12/miniagent-daemon"]
	}
	good := run(warden)
	if good == nil || good.Status != reports.StatusPassed {
		t.Fatalf("shipped warden: %+v, want passed", good)
	}
	bad := run(groupkill)
	if bad == nil || bad.Status != reports.StatusFailed {
		t.Fatalf("group-kill warden: %+v, want failed", bad)
	}
	if checkStatus(bad, "verify.no_new_processes") != reports.StatusFailed || len(bad.After.HarnessProcesses) == 0 {
		t.Errorf("group-kill warden: the probe saw no leftover process: %+v", bad.After)
	}
}

// TestCertifyStrayWriteFailsDiff gives the Pi-like fixture an install step
// that leaves a file outside /task, the session dirs and the allow-list:
// the filesystem diff must name it and fail the case, while the same
// step's file under /task is allowed. The deliverable and every other
// check still pass, so only the diff can fail it.
func TestCertifyStrayWriteFailsDiff(t *testing.T) {
	t.Parallel() // a certify run of its own: beside the other parallel tests
	imgs := needEngine(t, "debian-12")
	warden, probe, _ := binaries(t)
	m := fixtureVariant(t, "miniagent-pi", "stray", func(src string) string {
		install := "install:\n  argv: [\"/bin/sh\", \"-c\", \"echo x > /var/tmp/stray-write && echo y > /task/allowed-write\"]\n  deadline: 60\nlaunch:\n"
		return strings.Replace(src, "launch:\n", install, 1)
	})
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := certify.Run(ctx, certify.Options{Adapters: []*adapter.Manifest{m}, Images: imgs, Warden: warden, Probe: probe, Out: out}); err != nil {
		t.Fatal(err)
	}
	ev := readEvidence(t, out)["debian-12/miniagent-pi"]
	if ev == nil || ev.Status != reports.StatusFailed {
		t.Fatalf("stray write: %+v, want failed", ev)
	}
	for _, c := range ev.Checks {
		switch {
		case c.ID == "verify.fs_diff":
			if c.Status != reports.StatusFailed || !strings.Contains(c.Detail, "A /var/tmp/stray-write") || strings.Contains(c.Detail, "allowed-write") {
				t.Errorf("fs_diff check: %+v, want failed naming /var/tmp/stray-write only", c)
			}
		case c.Status != reports.StatusPassed:
			t.Errorf("check %s: %s (%s), want passed: only the diff may fail", c.ID, c.Status, c.Detail)
		}
	}
}

func checkDetail(ev *reports.Evidence, id string) string {
	for _, c := range ev.Checks {
		if c.ID == id {
			return c.Detail
		}
	}
	return ""
}

// TestCertifyFakesFail runs two fakes beside an honest adapter (the
// positive control) on every image: sh -c writing the deliverable without
// the model fails naming the missing model call; a harness that calls the
// model but never runs its tool fails naming the missing round trip.
func TestCertifyFakesFail(t *testing.T) {
	t.Parallel() // a certify run of its own: beside the other parallel tests
	imgs := needEngine(t, "debian-12", "alpine-class", "old-python")
	warden, probe, _ := binaries(t)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	_, err := certify.Run(ctx, certify.Options{Adapters: load(t, "miniagent-opencode", "fake-noloop", "fake-notools"), Images: imgs,
		Parallel: 2, Warden: warden, Probe: probe, Bash: bashStatic(), Out: out})
	if err != nil {
		t.Fatal(err)
	}
	evs := readEvidence(t, out)
	for _, img := range imgs {
		good := evs[certify.CaseID(img.Name, "miniagent-opencode", certify.ScenarioChallenge)]
		if good == nil || good.Status != reports.StatusPassed || good.ModelSteps == nil || good.ModelSteps.WriteCall == 0 ||
			good.ModelSteps.ResultCall == 0 || good.After == nil || !strings.HasPrefix(good.After.Deliverable, "proof-") {
			t.Fatalf("%s: the honest adapter did not pass with a round trip: %+v", img.Name, good)
		}
		if h := good.HarnessRuntime; h == nil || h.CLIVersion != "miniagent 0.1.0" || h.Preparer != "go-build" || len(h.TreeSHA256) != 64 || h.TreeFiles != 1 {
			t.Errorf("%s: harness runtime %+v; want the go-build tree and the CLI's version", img.Name, good.HarnessRuntime)
		}
		if good.ModelSteps.SandboxAuth["canary"] != good.ModelCalls || good.ModelCalls < 3 {
			t.Errorf("%s: %d calls, sandbox keys %v; want every call with the canary", img.Name, good.ModelCalls, good.ModelSteps.SandboxAuth)
		}
		noloop := evs[certify.CaseID(img.Name, "fake-noloop", certify.ScenarioChallenge)]
		if noloop == nil || noloop.Status != reports.StatusFailed || noloop.ModelCalls != 0 ||
			checkStatus(noloop, "verify.model_called") != reports.StatusFailed ||
			!strings.Contains(checkDetail(noloop, "verify.model_called"), "never called the model") {
			t.Errorf("%s: fake-noloop: %+v; want failed on verify.model_called", img.Name, noloop)
		}
		// The fake did write what the prompt asks for: only the model
		// steps tell it from a harness.
		if noloop != nil && (noloop.After == nil || !strings.HasPrefix(noloop.After.Deliverable, "proof-sandproof-challenge-")) {
			t.Errorf("%s: fake-noloop wrote %+v; want the challenge copied", img.Name, noloop.After)
		}
		notools := evs[certify.CaseID(img.Name, "fake-notools", certify.ScenarioChallenge)]
		if notools == nil || notools.Status != reports.StatusFailed || notools.ModelCalls != 1 ||
			checkStatus(notools, "verify.model_called") != reports.StatusPassed ||
			checkStatus(notools, "verify.challenge_round_trip") != reports.StatusFailed ||
			!strings.Contains(checkDetail(notools, "verify.challenge_round_trip"), "the harness did not run the tool call of call 1") {
			t.Errorf("%s: fake-notools: %+v; want failed on verify.challenge_round_trip", img.Name, notools)
		}
	}
}

// TestCertifyModelURLRecordsEveryCall certifies against a model started
// apart with the prompt-token script (as `--model URL` with a real model
// does): the relay counts what the model counted,
// the model saw only the real key, the sandbox only the canary, and no
// output holds the real key.
func TestCertifyModelURLRecordsEveryCall(t *testing.T) {
	t.Parallel() // a certify run of its own: beside the other parallel tests
	imgs := needEngine(t, "debian-12")
	warden, probe, _ := binaries(t)
	const real = "sk-real-model-key-5150"
	// prompt-token stands in for a real model: it follows the prompt's
	// words (ProofPrefix and the challenge), not the scripted secret.
	script, err := model.ParseScript("prompt-token")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := model.Start(model.Options{APIKey: real, Script: script})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, err = certify.Run(ctx, certify.Options{Adapters: load(t, "miniagent-pi"), Images: imgs, ModelURL: srv.URL(), APIKey: real,
		Warden: warden, Probe: probe, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	ev := readEvidence(t, out)["debian-12/miniagent-pi"]
	if ev == nil || ev.Status != reports.StatusPassed {
		t.Fatalf("case: %+v; want passed", ev)
	}
	if ev.ModelCalls != srv.ModelCalls() || ev.ModelCalls != 3 {
		t.Errorf("evidence model_calls %d, the model counted %d; want 3 each", ev.ModelCalls, srv.ModelCalls())
	}
	for _, c := range srv.Calls() {
		if c.Auth != "ok" {
			t.Errorf("the model got call %+v without the real key", c)
		}
	}
	if st := ev.ModelSteps; st == nil || st.SandboxAuth["canary"] != 3 || st.Model != srv.URL() || st.ResultCall == 0 || st.WriteCall == 0 {
		t.Errorf("model steps %+v; want 3 canary calls to %s with the round trip", st, srv.URL())
	}
	// Positive control for the search, then the real key is nowhere.
	plant := t.TempDir()
	os.WriteFile(filepath.Join(plant, "x"), []byte(real), 0o600)
	if hits, _ := certify.FindCanary(plant, real); len(hits) != 1 {
		t.Fatal("the key search misses a planted key")
	}
	if hits, err := certify.FindCanary(out, real); err != nil || len(hits) != 0 {
		t.Errorf("real key in the run's files: %v %v", hits, err)
	}
}

// TestCertifyCauseReachesReports runs the glibc-linked fixture on the image
// whose glibc is older than the host's: the harness's loader refuses it
// with its own line ("version `GLIBC_2.3x' not found"), and that line, not
// only "response_status failed", must reach the evidence, report.md and
// the JUnit <failure> and <system-err>, with the case's files named.
func TestCertifyCauseReachesReports(t *testing.T) {
	t.Parallel() // a certify run of its own: beside the other parallel tests
	imgs := needEngine(t, "old-python")
	warden, probe, _ := binaries(t)
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, err := certify.Run(ctx, certify.Options{Adapters: load(t, "miniagent-glibc"), Images: imgs,
		Warden: warden, Probe: probe, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	ev := readEvidence(t, out)["old-python/miniagent-glibc"]
	if ev == nil || ev.Status != reports.StatusFailed {
		t.Fatalf("glibc-linked harness on old-python: %+v, want failed", ev)
	}
	line := ""
	for _, l := range ev.HarnessStderrTail {
		if strings.Contains(l, "version `GLIBC_") && strings.Contains(l, "not found") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("harness stderr tail %q lacks the loader's GLIBC line", ev.HarnessStderrTail)
	}
	if ev.CaseDir != "cases/old-python__miniagent-glibc" {
		t.Errorf("case_dir %q", ev.CaseDir)
	}
	if _, err := os.Stat(filepath.Join(out, ev.CaseDir, "capture")); err != nil {
		t.Errorf("case_dir does not name the case's files: %v", err)
	}
	md, err := os.ReadFile(filepath.Join(out, reports.MarkdownFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), line) || !strings.Contains(string(md), "[cases/old-python\\_\\_miniagent-glibc/](cases/old-python__miniagent-glibc/)") {
		t.Errorf("report.md lacks the harness's line %q or the link to the case's files", line)
	}
	f, err := os.Open(filepath.Join(out, reports.JUnitFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var doc struct {
		Suites []struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Text string `xml:",chardata"`
				} `xml:"failure"`
				SystemErr string `xml:"system-err"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.NewDecoder(f).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Suites) != 1 || len(doc.Suites[0].Cases) != 1 {
		t.Fatalf("junit: %+v, want one suite with one case", doc)
	}
	c := doc.Suites[0].Cases[0]
	if c.Failure == nil || !strings.Contains(c.Failure.Text, line) || !strings.Contains(c.SystemErr, line) {
		t.Errorf("junit <failure> / <system-err> lack %q: %+v", line, c)
	}
}
