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

// Dropped says whether a write did not fit: false while everything was
// kept (up to Max exactly), true from the first byte left out.
func TestHeadBufferSaysWhatItDropped(t *testing.T) {
	h := &hostfile.HeadBuffer{Max: 4}
	h.Write([]byte("ab"))
	h.Write([]byte("cd"))
	if h.Dropped() || h.String() != "abcd" {
		t.Fatalf("4 bytes in a head of 4: dropped %t, %q", h.Dropped(), h.String())
	}
	h.Write([]byte("e"))
	if !h.Dropped() || h.String() != "abcd" {
		t.Fatalf("a fifth byte: dropped %t, %q", h.Dropped(), h.String())
	}
}
