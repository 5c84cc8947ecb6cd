package agenthost

import (
	"bytes"
	"fmt"
	"testing"
)

// What Remove keeps of the agent's report is bounded whatever the agent
// sends, and holds whole lines only: 3 MiB of paths in odd-sized writes
// leave at most maxRemoveOut bytes, ending at a line's end.
func TestRemoveKeepsABoundedReport(t *testing.T) {
	k := &keepFirst{max: maxRemoveOut}
	var sent int
	for i := 0; sent < 3<<20; i++ {
		line := fmt.Sprintf("/tmp/scratch/f%09d\n", i)
		n, err := k.Write([]byte(line))
		if err != nil || n != len(line) {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
		sent += n
	}
	got := k.lines()
	if len(got) > maxRemoveOut || len(got) < maxRemoveOut-64 || !bytes.HasSuffix(got, []byte("\n")) || !k.dropped {
		t.Errorf("kept %d bytes of %d (dropped %t, ends %q), want at most %d whole lines", len(got), sent, k.dropped, got[max(len(got)-8, 0):], maxRemoveOut)
	}
	// Positive control: a short report is kept whole.
	short := &keepFirst{max: maxRemoveOut}
	short.Write([]byte("/a\n/b"))
	if string(short.lines()) != "/a\n/b" {
		t.Errorf("a short report: %q", short.lines())
	}
}
