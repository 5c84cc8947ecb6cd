package docker_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/warden/proc"
)

// cgroupRead returns a cgroup file of the container as seen from inside:
// the v2 name at /sys/fs/cgroup, else the v1 name in its controller's
// directory.
func cgroupRead(t *testing.T, sb provider.Sandbox, v2, v1 string) string {
	t.Helper()
	res, err := sb.Exec(context.Background(), provider.ExecSpec{Argv: []string{"sh", "-c",
		`if [ -e "/sys/fs/cgroup/$1" ]; then cat "/sys/fs/cgroup/$1"; else cat "/sys/fs/cgroup/$2"; fi`, "sh", v2, v1}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("read cgroup %s / %s: %v, exit %d: %s", v2, v1, err, res.ExitCode, res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}

func TestDockerContainersHaveLimits(t *testing.T) {
	p := engine(t)
	ctx := context.Background()
	def := create(t, p)
	custom, err := p.Create(ctx, provider.CreateSpec{Image: busyboxImage, Expire: 10 * time.Minute,
		Limits: provider.Limits{PidsLimit: 64, MemoryBytes: 64 << 20, CPUShares: 256, OOMScoreAdj: 700}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { custom.Destroy(context.Background()) })
	for _, tc := range []struct {
		sb   provider.Sandbox
		want provider.Limits
	}{
		{def, provider.DefaultLimits},
		{custom, provider.Limits{PidsLimit: 64, MemoryBytes: 64 << 20, CPUShares: 256, OOMScoreAdj: 700}},
	} {
		c, err := witness(t).InspectContainer(tc.sb.ID())
		if err != nil {
			t.Fatal(err)
		}
		hc := c.HostConfig
		if hc.PidsLimit != tc.want.PidsLimit || hc.Memory != tc.want.MemoryBytes || hc.MemorySwap != tc.want.MemoryBytes ||
			hc.CPUShares != tc.want.CPUShares || hc.OomScoreAdj != tc.want.OOMScoreAdj {
			t.Errorf("%.12s HostConfig pids %d memory %d swap %d shares %d oom %d; want %+v", tc.sb.ID(),
				hc.PidsLimit, hc.Memory, hc.MemorySwap, hc.CPUShares, hc.OomScoreAdj, tc.want)
		}
		info, err := tc.sb.Inspect(ctx)
		if err != nil || info.Limits == nil || *info.Limits != tc.want {
			t.Errorf("Inspect().Limits = %+v, %v; want %+v", info.Limits, err, tc.want)
		}
		// What the kernel enforces, read inside the container.
		if got := cgroupRead(t, tc.sb, "pids.max", "pids/pids.max"); got != strconv.FormatInt(tc.want.PidsLimit, 10) {
			t.Errorf("%.12s pids.max = %q, want %d", tc.sb.ID(), got, tc.want.PidsLimit)
		}
		if got := cgroupRead(t, tc.sb, "memory.max", "memory/memory.limit_in_bytes"); got != strconv.FormatInt(tc.want.MemoryBytes, 10) {
			t.Errorf("%.12s memory limit = %q, want %d", tc.sb.ID(), got, tc.want.MemoryBytes)
		}
		// pid 1 and an exec'd process (as the harness is) both carry it.
		res, err := tc.sb.Exec(ctx, provider.ExecSpec{Argv: []string{"cat", "/proc/1/oom_score_adj", "/proc/self/oom_score_adj"}})
		want := strconv.Itoa(tc.want.OOMScoreAdj)
		if err != nil || string(res.Stdout) != want+"\n"+want+"\n" {
			t.Errorf("%.12s oom_score_adj of pid 1 and an exec = %q, %v; want %s twice", tc.sb.ID(), res.Stdout, err, want)
		}
	}
}

// bomb is a fork bomb bounded in depth: each call records itself, then
// forks two copies of itself one level down; a leaf holds its pid for two
// seconds. Unlimited it would make 2^10-1 shells and 512 sleeps, then end:
// even a failure of the limit leaves nothing unbounded on the host. Under
// the limit the shells fork all at once, so forks fail (and a shell whose
// fork failed exits) long before a leaf is reached.
const bomb = `b() { echo call >>/tmp/calls; if [ "$1" -gt 0 ]; then b $(($1 - 1)) & b $(($1 - 1)) & wait; else sleep 2; fi; }
b 9
wait
exit 0`

func TestDockerForkBombIsContained(t *testing.T) {
	p := engine(t)
	const limit = 32
	sb, err := p.Create(context.Background(), provider.CreateSpec{Image: busyboxImage, Expire: 10 * time.Minute,
		Limits: provider.Limits{PidsLimit: limit}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	if got := cgroupRead(t, sb, "pids.max", "pids/pids.max"); got != strconv.Itoa(limit) {
		t.Fatalf("pids.max = %q, want %d", got, limit)
	}
	before := cgroupRead(t, sb, "pids.events", "pids/pids.events")
	if before != "max 0" {
		t.Fatalf("pids.events before the bomb = %q, want %q", before, "max 0")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := sb.Exec(ctx, provider.ExecSpec{Argv: []string{"sh", "-c", bomb}})
	if err != nil {
		t.Fatalf("the bomb's exec: %v (the container must survive it)", err)
	}
	// Positive controls: the bomb ran (its forked calls were recorded)
	// and hit the limit (the kernel refused forks, and a shell said so).
	calls, err := provider.DownloadBytes(context.Background(), sb, "/tmp/calls")
	if err != nil {
		t.Fatalf("read the calls: %v", err)
	}
	n := strings.Count(string(calls), "call\n")
	events := cgroupRead(t, sb, "pids.events", "pids/pids.events")
	refused, _ := strconv.Atoi(strings.TrimPrefix(events, "max "))
	t.Logf("bomb: exit %d, %d calls of 1023, pids.events %q, stderr %d bytes", res.ExitCode, n, events, len(res.Stderr))
	if n < limit/2 {
		t.Fatalf("positive control: the bomb made %d calls, want at least %d: %s", n, limit/2, res.Stderr)
	}
	if refused == 0 || !strings.Contains(string(res.Stderr), "fork") {
		t.Fatalf("the bomb never hit the pids limit: pids.events %q, stderr %q", events, res.Stderr)
	}
	// Contained: the bomb's shells end (those whose fork failed exited;
	// pid 1 reaps nothing, so they stay as zombies, inside the limit).
	// Polled, not slept on: a leaf may still hold its pid for a moment.
	deadline := time.Now().Add(30 * time.Second)
	for {
		live, zombies := bombProcesses(t, sb)
		if live == 0 {
			t.Logf("after the bomb: %d zombies, none alive", zombies)
			if zombies+1 > limit {
				t.Errorf("%d zombies and pid 1 exceed the limit %d", zombies, limit)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d bomb processes still alive 30s after the bomb's exec ended", live)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// bombProcesses counts the container's processes other than pid 1 and the
// reader: those alive and the zombies.
func bombProcesses(t *testing.T, sb provider.Sandbox) (live, zombies int) {
	t.Helper()
	res, err := sb.Exec(context.Background(), provider.ExecSpec{Argv: []string{"sh", "-c", `echo $$; cat /proc/[0-9]*/stat 2>/dev/null; true`}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("read the process table: %v, exit %d", err, res.ExitCode)
	}
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	self, _ := strconv.Atoi(lines[0])
	seen1 := false
	for _, l := range lines[1:] {
		st, err := proc.ParseStat([]byte(l))
		if err != nil {
			t.Fatalf("stat line %q: %v", l, err)
		}
		switch {
		case st.PID == 1:
			seen1 = true
		case st.PID == self || (st.Comm == "cat" && !st.Dead()):
		case st.Dead():
			zombies++
		default:
			live++
		}
	}
	if !seen1 {
		t.Fatalf("positive control: pid 1 missing from the process table read: %q", res.Stdout)
	}
	return live, zombies
}
