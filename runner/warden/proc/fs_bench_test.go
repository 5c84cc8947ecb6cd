package proc

import "testing"

// BenchmarkScan reads the host's real process table once per iteration.
func BenchmarkScan(b *testing.B) {
	fs := NewFS("")
	n := 0
	for i := 0; i < b.N; i++ {
		stats, err := fs.Scan()
		if err != nil {
			b.Fatal(err)
		}
		n = len(stats)
	}
	b.ReportMetric(float64(n), "processes")
}
