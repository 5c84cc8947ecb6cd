package agenthost

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/sandproof/sandproof/runner/host/hostfile"
)

// What Remove keeps of the agent's report is bounded whatever the agent
// sends, and holds whole lines only: 3 MiB of paths in odd-sized writes
// leave at most maxRemoveOut bytes, ending at a line's end.
func TestRemoveKeepsABoundedReport(t *testing.T) {
	k := &hostfile.HeadBuffer{Max: maxRemoveOut}
	var sent int
	for i := 0; sent < 3<<20; i++ {
		line := fmt.Sprintf("/tmp/scratch/f%09d\n", i)
		n, err := k.Write([]byte(line))
		if err != nil || n != len(line) {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
		sent += n
	}
	got := wholeLines(k)
	if len(got) > maxRemoveOut || len(got) < maxRemoveOut-64 || !bytes.HasSuffix(got, []byte("\n")) || !k.Dropped() {
		t.Errorf("kept %d bytes of %d (dropped %t, ends %q), want at most %d whole lines", len(got), sent, k.Dropped(), got[max(len(got)-8, 0):], maxRemoveOut)
	}
	// Positive control: a short report is kept whole.
	short := &hostfile.HeadBuffer{Max: maxRemoveOut}
	short.Write([]byte("/a\n/b"))
	if string(wholeLines(short)) != "/a\n/b" {
		t.Errorf("a short report: %q", wholeLines(short))
	}
}
