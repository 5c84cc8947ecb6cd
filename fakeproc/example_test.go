package fakeproc_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sandproof/sandproof/fakeproc"
	"github.com/sandproof/sandproof/runner/warden/proc"
	"github.com/sandproof/sandproof/runner/warden/stop"
)

// exampleTB stands in for a *testing.T outside a test function.
type exampleTB struct{ dir string }

func (exampleTB) Helper()                           {}
func (exampleTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (t exampleTB) TempDir() string                 { return t.dir }

// A harness that ignores TERM, stopped by the production engine on
// simulated time: once the grace is over it is held (STOP) and, one round
// later, seen stopped and KILLed.
func ExampleKernel_Engine() {
	dir, err := os.MkdirTemp("", "fakeproc-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	k := fakeproc.New(exampleTB{dir}, fakeproc.Options{Subreaper: 100})
	k.Spawn(fakeproc.Proc{PID: 100, Comm: "warden", Setsid: true})
	h := k.Fork(100, fakeproc.Proc{PID: 200, Comm: "pi", Setpgid: true,
		Env: []string{proc.MarkerVar + "=L1"}, OnTERM: fakeproc.IgnoreTERM})
	start := k.Now()
	launch := stop.Launch{ID: "L1", Self: 100, Harness: h, Since: h.StartTime}
	res := k.Engine(launch, time.Second, time.Second).Run(context.Background())
	for _, d := range k.Deliveries() {
		fmt.Println(d.To.PID, stop.SignalName(d.Signal), d.At.Sub(start))
	}
	fmt.Println("confirmed:", res.Confirmed)
	// Output:
	// 200 TERM 0s
	// 200 STOP 1s
	// 200 KILL 1.02s
	// confirmed: true
}
