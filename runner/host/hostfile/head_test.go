package hostfile_test

import (
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/hostfile"
)

func TestHeadBufferKeepsTheHead(t *testing.T) {
	h := &hostfile.HeadBuffer{Max: 5}
	for _, s := range []string{"abc", "defg", "hij"} {
		if n, err := h.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("write %q: %d, %v", s, n, err)
		}
	}
	if got := h.String(); got != "abcde" {
		t.Fatalf("kept %q, want %q", got, "abcde")
	}
	if got := (&hostfile.HeadBuffer{Max: 64}); got.String() != "" || strings.Contains(got.String(), "x") {
		t.Fatal("an empty buffer holds something")
	}
}
