package certify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/host/agenthost"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/provider/docker"
	"github.com/sandproof/sandproof/runner/probe"
)

// The probe's setup run becomes the session agent in a real container,
// as certify starts it: the agent is the baseline's self (the same pid and
// start time across the execve), so the baseline does not hold it, an
// agent still running at the owner's next look is a new process, and once
// its channel ends the look is clean.
func TestSetupBecomesAgentThatVerifySees(t *testing.T) {
	// needEngine fails under strict (and skips otherwise) when the engine
	// or the built image is missing; debian-12 is always one of the
	// project's images, so an empty list is a broken image catalogue.
	imgs := needEngine(t, "debian-12")
	if len(imgs) == 0 {
		t.Fatal("debian-12 is not among the project's images")
	}
	_, probeBin, _ := binaries(t)
	prov, err := docker.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sb, err := prov.Create(ctx, provider.CreateSpec{Image: imgs[0].Ref, Network: provider.NetworkNone, Expire: 5 * time.Minute,
		Labels: map[string]string{"sandproof-test": "agentself"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	for _, b := range []string{probeBin, filepath.Join(filepath.Dir(probeBin), "sandagent")} {
		data, err := os.ReadFile(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := sb.Upload(ctx, "/owner/"+filepath.Base(b), bytes.NewReader(data), int64(len(data)), 0o755, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	snap := func() probe.Snapshot {
		t.Helper()
		res, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"/owner/probe", "snapshot", "--no-exec"}, User: "0"})
		var s probe.Snapshot
		if err != nil || res.ExitCode != 0 || json.Unmarshal(res.Stdout, &s) != nil {
			t.Fatalf("probe snapshot: %v, exit %d, %s", err, res.ExitCode, res.Stderr)
		}
		return s
	}

	st, _ := provider.As[provider.Streamer](sb)
	var stderr bytes.Buffer
	proc, err := st.Start(ctx, provider.ExecSpec{User: "0", Argv: []string{"/owner/probe", "setup", "--owner", "1000:1000",
		"--dirs", "/task", "--secret", "/task/challenge.txt", "--", "/owner/sandagent", "serve"}}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if err := probe.WriteFrame(proc.Stdin, probe.TagSecret, []byte("sandproof-challenge-self\n")); err != nil {
		t.Fatal(err)
	}
	b, err := probe.ReadFrame(proc.Stdout, probe.TagSnapshot, 16<<20)
	if err != nil {
		t.Fatalf("the baseline's frame: %v (stderr %q)", err, stderr.String())
	}
	var before probe.Snapshot
	if err := json.Unmarshal(b, &before); err != nil || before.Self.PID == 0 || before.Self.StartTime == 0 {
		t.Fatalf("baseline: %v, self %+v", err, before.Self)
	}
	agent, err := agenthost.Attach(ctx, sb, proc, agenthost.Options{})
	if err != nil {
		t.Fatalf("the agent after the baseline: %v (stderr %q)", err, stderr.String())
	}
	// Positive control: the agent answers, and it runs as the baseline's
	// self.
	res, err := agent.Exec(ctx, provider.ExecSpec{Argv: []string{"cat", "/task/challenge.txt"}})
	if err != nil || string(res.Stdout) != "sandproof-challenge-self\n" {
		t.Fatalf("the challenge through the agent: %q %v", res.Stdout, err)
	}
	alive := snap()
	var asAgent []probe.Process
	for _, p := range probe.Diff(before, alive).NewProcesses {
		if p.PID == before.Self.PID && p.StartTime == before.Self.StartTime {
			asAgent = append(asAgent, p)
		}
	}
	if len(asAgent) != 1 || asAgent[0].Comm != "sandagent" {
		t.Fatalf("with the agent running, new processes that are the baseline's self: %+v, want the sandagent (diff %+v)",
			asAgent, probe.Diff(before, alive))
	}
	if code, err := agent.Close(); err != nil || code != 0 {
		t.Fatalf("the agent's end: %d %v (stderr %q)", code, err, stderr.String())
	}
	// The tools' versions are not looked at (--no-exec): processes only.
	if r := probe.Diff(before, snap()); len(r.NewProcesses) != 0 || len(r.Gone) != 0 {
		t.Fatalf("after the agent's stop: new %+v, gone %+v; want neither", r.NewProcesses, r.Gone)
	}
}
