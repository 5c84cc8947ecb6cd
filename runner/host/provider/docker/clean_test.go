package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/provider/docker"
	"github.com/sandproof/sandproof/runner/warden/proc"
)

func randomTag(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// labelled starts a busybox container by hand with exactly these labels
// (the provider would put this process's owner labels over them) and the
// default limits, and removes it by id when the test ends.
func labelled(t *testing.T, labels map[string]string) string {
	t.Helper()
	d := provider.DefaultLimits
	args := []string{"run", "-d", "--network", "none", "--pids-limit", strconv.FormatInt(d.PidsLimit, 10),
		"--memory", strconv.FormatInt(d.MemoryBytes, 10), "--memory-swap", strconv.FormatInt(d.MemoryBytes, 10),
		"--cpu-shares", strconv.FormatInt(d.CPUShares, 10)}
	for k, v := range labels {
		args = append(args, "--label", k+"="+v)
	}
	out, err := exec.Command("docker", append(args, busyboxImage, "sleep", "600")...).Output()
	if err != nil {
		t.Fatalf("docker run: %v", err)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", id).Run() })
	return id
}

// exists asks the engine whether it knows the container.
func exists(id string) bool {
	return exec.Command("docker", "container", "inspect", id).Run() == nil
}

// deadOwner starts a process, records its pid and start time while it
// runs, and lets it exit: an owner that is gone.
func deadOwner(t *testing.T) (int, uint64) {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	st, err := proc.ParseStat(data)
	if err != nil {
		t.Fatal(err)
	}
	if !provider.Alive("", pid, st.StartTime) {
		t.Fatalf("positive control: owner %d@%d not seen alive while it runs", pid, st.StartTime)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if provider.Alive("", pid, st.StartTime) {
		t.Fatalf("owner %d@%d still seen alive after it was reaped", pid, st.StartTime)
	}
	return pid, st.StartTime
}

func owner(host string, pid int, start uint64, run, tag string) map[string]string {
	return map[string]string{provider.LabelKey: "1", provider.LabelHost: host, provider.LabelRun: run,
		provider.LabelOwnerPID: strconv.Itoa(pid), provider.LabelOwnerStart: strconv.FormatUint(start, 10),
		"sandproof.test": tag}
}

func ids(cs []docker.Cleaned) map[string]string {
	m := map[string]string{}
	for _, c := range cs {
		m[c.ID] = c.Reason
	}
	return m
}

func TestCleanRemovesOnlyDeadOwnersOfThisHost(t *testing.T) {
	p := engine(t)
	ctx := context.Background()
	tag := randomTag(t)
	self, err := provider.Self()
	if err != nil {
		t.Fatal(err)
	}
	host := provider.HostID()
	deadPID, deadStart := deadOwner(t)

	live, err := p.Create(ctx, provider.CreateSpec{Image: busyboxImage, Labels: map[string]string{"sandproof.test": tag}, Expire: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Destroy(context.Background()) })
	c, err := witness(t).InspectContainer(live.ID())
	if err != nil {
		t.Fatal(err)
	}
	run, _ := provider.DefaultRun()
	want := map[string]string{provider.LabelKey: "1", provider.LabelHost: host, provider.LabelRun: run,
		provider.LabelOwnerPID: strconv.Itoa(self.PID), provider.LabelOwnerStart: strconv.FormatUint(self.StartTime, 10)}
	for k, v := range want {
		if c.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, c.Config.Labels[k], v, c.Config.Labels)
		}
	}

	// The planted containers belong to a host of this test's own (the
	// clean below is told it is this machine), so a `sandproof clean` run
	// beside the suite (another host to it) keeps them: they only look
	// orphaned to this test.
	testHost := "test-" + tag
	alive := labelled(t, owner(testHost, self.PID, self.StartTime, "r-alive", tag))
	dead := labelled(t, owner(testHost, deadPID, deadStart, "r-dead", tag))
	// This test process's pid with another start time: the pid was reused.
	reused := labelled(t, owner(testHost, self.PID, self.StartTime+1, "r-reused", tag))
	otherHost := labelled(t, owner("0123456789abcdef", deadPID, deadStart, "r-other", tag))
	noOwner := labelled(t, map[string]string{provider.LabelKey: "1", "sandproof.test": tag})
	all := []string{live.ID(), alive, dead, reused, otherHost, noOwner}
	for _, id := range all {
		if !exists(id) {
			t.Fatalf("positive control: container %.12s not there before the clean", id)
		}
	}

	res, err := docker.Clean(ctx, p, provider.CleanScope{Host: testHost}, "sandproof.test="+tag)
	if err != nil {
		t.Fatal(err)
	}
	removed, kept := ids(res.Removed), ids(res.Kept)
	wantRemoved := map[string]string{dead: provider.ReasonOwnerGone, reused: provider.ReasonOwnerGone}
	wantKept := map[string]string{live.ID(): provider.ReasonOtherHost, alive: provider.ReasonOwnerAlive, otherHost: provider.ReasonOtherHost, noOwner: provider.ReasonNoOwner}
	if len(removed) != len(wantRemoved) || len(kept) != len(wantKept) {
		t.Fatalf("removed %v, kept %v; want removed %v, kept %v", removed, kept, wantRemoved, wantKept)
	}
	for id, reason := range wantRemoved {
		if removed[id] != reason || exists(id) {
			t.Errorf("container %.12s: removed %q, exists %v; want removed (%s)", id, removed[id], exists(id), reason)
		}
	}
	for id, reason := range wantKept {
		if kept[id] != reason || !exists(id) {
			t.Errorf("container %.12s: kept %q, exists %v; want kept (%s)", id, kept[id], exists(id), reason)
		}
	}
}

func TestCleanByRunAllAndAllHosts(t *testing.T) {
	p := engine(t)
	ctx := context.Background()
	tag := randomTag(t)
	self, err := provider.Self()
	if err != nil {
		t.Fatal(err)
	}
	host := provider.HostID()
	runA, runB := "run-a-"+tag, "run-b-"+tag
	// Every owner here is alive (this test process): only the scope
	// removes them.
	a1 := labelled(t, owner(host, self.PID, self.StartTime, runA, tag))
	a2 := labelled(t, owner(host, self.PID, self.StartTime, runA, tag))
	b := labelled(t, owner(host, self.PID, self.StartTime, runB, tag))
	otherA := labelled(t, owner("0123456789abcdef", self.PID, self.StartTime, runA, tag))
	for _, id := range []string{a1, a2, b, otherA} {
		if !exists(id) {
			t.Fatalf("positive control: container %.12s not there before the clean", id)
		}
	}
	step := func(scope provider.CleanScope, gone, stay []string) {
		t.Helper()
		res, err := docker.Clean(ctx, p, scope, "sandproof.test="+tag)
		if err != nil {
			t.Fatal(err)
		}
		removed := ids(res.Removed)
		if len(removed) != len(gone) {
			t.Errorf("%+v removed %v, want %d", scope, removed, len(gone))
		}
		for _, id := range gone {
			if _, ok := removed[id]; !ok || exists(id) != scope.DryRun {
				t.Errorf("%+v: container %.12s listed removed %v, exists %v", scope, id, ok, exists(id))
			}
		}
		for _, id := range stay {
			_, listed := removed[id]
			if !exists(id) || (listed && !scope.DryRun) {
				t.Errorf("%+v: container %.12s listed removed %v, exists %v; want kept", scope, id, listed, exists(id))
			}
		}
	}
	step(provider.CleanScope{}, nil, []string{a1, a2, b, otherA})
	step(provider.CleanScope{Run: runA}, []string{a1, a2}, []string{b, otherA})
	step(provider.CleanScope{All: true, DryRun: true}, []string{b}, []string{b, otherA})
	step(provider.CleanScope{All: true}, []string{b}, []string{otherA})
	step(provider.CleanScope{AllHosts: true}, []string{otherA}, nil)
}
