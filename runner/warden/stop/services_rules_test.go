package stop_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sandproof/sandproof/fakeproc"
	"github.com/sandproof/sandproof/runner/warden/proc"
	"github.com/sandproof/sandproof/runner/warden/stop"
)

// A declared service is named by (pid, start time): once it has exited, a
// harness process that is given its pid is not that service. It is reached,
// stopped, and the receipt's confirmation rests on its death (contract §2,
// services by identity). The positive control is the same tree with the
// service still alive: then the service is kept and the harness's tool
// stopped.
func TestAServicesReusedPidIsNotPreserved(t *testing.T) {
	for _, serviceExits := range []bool{false, true} {
		k := fakeproc.New(t, fakeproc.Options{Subreaper: 100})
		k.Spawn(fakeproc.Proc{PID: 100, Comm: "warden", Setsid: true, Env: []string{"PATH=/bin"}})
		k.Advance(time.Second)
		harness := k.Fork(100, fakeproc.Proc{PID: 200, Comm: "pi", Setpgid: true, Env: []string{proc.MarkerVar + "=L1"}})
		svc := k.Fork(100, fakeproc.Proc{Comm: "warden", Setsid: true, Subreaper: true, Env: []string{"PATH=/bin"}})
		k.Advance(time.Second)
		// A tool of the harness's that left its group and its marker:
		// only the process links reach it.
		tool := k.Fork(harness.PID, fakeproc.Proc{Comm: "tool", Setsid: true, Env: []string{"PATH=/bin"}})
		if serviceExits {
			k.Exit(svc.PID)
			k.Advance(time.Second)
			tool = k.Reuse(svc.PID, fakeproc.Proc{Comm: "tool", PPID: harness.PID, Setsid: true, Env: []string{"PATH=/bin"}})
			if tool.PID != svc.PID || tool.StartTime == svc.StartTime || !k.Alive(tool) {
				t.Fatalf("the tool %v should hold the dead service's pid %d with a later start time, alive", tool, svc.PID)
			}
		}

		e := k.Engine(stop.Launch{ID: "L1", Self: 100, Harness: harness, Since: harness.StartTime, Services: []proc.Identity{svc}}, time.Second, time.Second)
		res := e.Run(context.Background())

		preserved := ids(res.Preserved)
		if !slices.Contains(ids(res.Reached), tool) || k.Alive(tool) {
			t.Errorf("service exited %t: the tool %v reached %t, alive %t (preserved %v); want reached and dead", serviceExits, tool, slices.Contains(ids(res.Reached), tool), k.Alive(tool), preserved)
		}
		if slices.Contains(preserved, tool) {
			t.Errorf("service exited %t: the tool %v is preserved as the service %v", serviceExits, tool, svc)
		}
		if !serviceExits && (!slices.Contains(preserved, svc) || !k.Alive(svc)) {
			t.Errorf("positive control: the live service %v is not kept (preserved %v, alive %t)", svc, preserved, k.Alive(svc))
		}
		if !res.Confirmed {
			t.Errorf("service exited %t: cleanup not confirmed: survivors %v", serviceExits, res.Survivors)
		}
	}
}

func ids(ms []stop.Member) []proc.Identity {
	out := []proc.Identity{}
	for _, m := range ms {
		out = append(out, m.Identity())
	}
	return out
}
