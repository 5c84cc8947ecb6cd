package bench

import (
	"os/exec"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/warden/proc"
	"github.com/sandproof/sandproof/runner/warden/stop"
)

// BenchmarkRoundParts: what one stop round costs, part by part, with 1,000
// and with 5,000 unrelated processes on the host, so a ratio that grows with
// the host (BenchmarkHostProcessScaling) can be traced to its part. The
// launch here is this test process (Self) started "now": every unrelated
// process is older than it, as in a real stop.
func BenchmarkRoundParts(b *testing.B) {
	fs := proc.NewFS("")
	parts := func(label string) {
		// The stand-in supervisor: a process of its own with no children,
		// started after every unrelated process.
		sup := exec.Command("sleep", "600")
		if err := sup.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { sup.Process.Kill(); sup.Wait() }()
		st, err := fs.Stat(sup.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		self, since := st.PID, st.StartTime
		old := stop.NewOldSet(since, 1<<16)
		defer old.Close()
		stats, err := fs.Scan()
		if err != nil {
			b.Fatal(err)
		}
		old.Prime(stats)
		sc := &stop.Scanner{FS: fs, Old: old, Launch: stop.Launch{ID: "bench", Self: self, Since: since}}
		measure := func(name string, f func()) {
			const n = 50
			t0 := time.Now()
			for i := 0; i < n; i++ {
				f()
			}
			b.ReportMetric(float64(time.Since(t0).Microseconds())/n/1000, label+"-"+name+"-ms")
		}
		measure("pids", func() { fs.PIDs() })
		measure("live", func() { old.Live() })
		measure("scan", func() { sc.Scan() })
		measure("walk", func() { sc.Walk(nil) })
		measure("fullscan", func() { fs.Scan() })
	}
	base := startUnrelated(b, 1000)
	defer base()
	for i := 0; i < b.N; i++ {
		parts("host1000")
		more := startUnrelated(b, 4000)
		parts("host5000")
		more()
	}
}
