package probe

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestFrameRoundTripLeavesTheRest(t *testing.T) {
	var b bytes.Buffer
	if err := WriteFrame(&b, TagSecret, []byte("sandproof-challenge-ab\n")); err != nil {
		t.Fatal(err)
	}
	b.WriteString("next owner's bytes")
	got, err := ReadFrame(&b, TagSecret, 64)
	if err != nil || string(got) != "sandproof-challenge-ab\n" {
		t.Fatalf("ReadFrame = %q, %v", got, err)
	}
	if b.String() != "next owner's bytes" {
		t.Errorf("left %q after the frame, want the next owner's bytes untouched", b.String())
	}
}

func TestReadFrameRefusesBadFrames(t *testing.T) {
	var good bytes.Buffer
	WriteFrame(&good, TagSnapshot, []byte(`{"schema":"x"}`))
	g := good.String()
	for _, tc := range []struct {
		name, in, want string
	}{
		{"short header", g[:5], "ended after 5 of the header's 8 bytes"},
		{"wrong tag", strings.Replace(g, TagSnapshot, TagSecret, 1), `tag "SPsc", want "SPsn"`},
		{"not a frame", `{"schema":"x"}` + "\n", `tag "{\"sc", want "SPsn"`},
		{"short payload", g[:len(g)-3], "ended after 11 of 14 bytes"},
		{"over the cap", "SPsn\xff\xff\xff\xff", "4294967295 bytes, over the cap of 1024"},
	} {
		_, err := ReadFrame(strings.NewReader(tc.in), TagSnapshot, 1024)
		if !errors.Is(err, ErrFrame) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ReadFrame = %v, want ErrFrame saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := ReadFrame(strings.NewReader(""), TagSnapshot, 1024); err != io.EOF {
		t.Errorf("empty stream: ReadFrame = %v, want io.EOF", err)
	}
	if err := WriteFrame(io.Discard, "long", nil); err != nil {
		t.Errorf("WriteFrame with a 4-byte tag: %v", err)
	}
	if err := WriteFrame(io.Discard, "bad", nil); err == nil {
		t.Error("WriteFrame with a 3-byte tag succeeded")
	}
}
