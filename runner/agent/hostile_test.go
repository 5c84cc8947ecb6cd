package agent_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"github.com/sandproof/sandproof/runner/agent"
	"github.com/sandproof/sandproof/runner/host/agenthost"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandproof/sandproof/runner/host/provider"
)

// hostileAgent is an agent end that answers every operation with answer
// (after reading its request): what a compromised sandbox can send.
func hostileAgent(t *testing.T, answer func(s *agent.Stream)) *agenthost.Host {
	t.Helper()
	ar, hw := io.Pipe()
	hr, aw := io.Pipe()
	a := agent.NewConn(ar, aw, false, 0, aw, ar)
	go func() {
		for {
			s, err := a.Accept()
			if err != nil {
				return
			}
			go func() {
				if _, err := agent.ReadRequest(s); err == nil {
					answer(s)
				}
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := agenthost.NewHost(ctx, hr, hw, agenthost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(); a.Close() })
	return h
}

func record(kind byte, p []byte) []byte {
	b := []byte{kind}
	b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
	return append(b, p...)
}

// A record longer than the cap is refused before it is read: the exec
// fails as a transport error, nothing is allocated for it.
func TestHostileRecordLength(t *testing.T) {
	h := hostileAgent(t, func(s *agent.Stream) {
		hdr := []byte{agent.RecOut}
		s.Write(binary.BigEndian.AppendUint32(hdr, 1<<30))
		s.Write(make([]byte, 1024))
	})
	_, err := h.Exec(context.Background(), provider.ExecSpec{Argv: []string{"true"}})
	if !agenthost.IsTransport(err) || !errors.Is(err, agent.ErrProtocol) {
		t.Fatalf("exec answered with a 1 GiB record: %v", err)
	}
}

// A get answered with an archive that climbs out of the destination or
// plants links writes nothing outside it and creates no link.
func TestHostileArchive(t *testing.T) {
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "top/", Mode: 0o755})
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "top/link", Linkname: "/etc/passwd"})
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "top/../../evil", Mode: 0o644, Size: 4})
	tw.Write([]byte("evil"))
	tw.Close()
	arch := tb.Bytes()
	h := hostileAgent(t, func(s *agent.Stream) {
		for p := arch; len(p) > 0; {
			n := min(len(p), 1000)
			s.Write(record(agent.RecOut, p[:n]))
			p = p[n:]
		}
		s.Write(record(agent.RecResult, []byte(`{"code":0}`)))
		s.CloseWrite()
	})
	base := t.TempDir()
	dst := filepath.Join(base, "in", "top")
	got, err := h.Fetch(context.Background(), "/top", dst, provider.FetchLimits{})
	if err == nil {
		t.Fatal("an archive with ../../evil was accepted")
	}
	// Positive control: the link before the bad entry was seen and
	// recorded, not created.
	if len(got.Withheld) != 1 || got.Withheld[0].Kind != provider.WithheldSymlink {
		t.Errorf("withheld %+v", got.Withheld)
	}
	if _, err := os.Lstat(filepath.Join(dst, "link")); err == nil {
		t.Error("the link was created on the host")
	}
	for _, p := range []string{filepath.Join(base, "evil"), filepath.Join(base, "in", "evil")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s written outside the destination", p)
		}
	}
}

// An agent that sends past the window it was granted fails the exec as
// a transport error: the host either reads the garbage as a bad record or
// sees the overrun first and breaks the channel (TestOverrunBreaksEveryStream
// shows that one alone); it never buffers past the window.
func TestHostileOverrun(t *testing.T) {
	h := hostileAgent(t, func(s *agent.Stream) {
		for range 20 { // 20 x 32 KiB past a 256 KiB window
			s.WriteFrame(agent.FrameData, make([]byte, agent.MaxPayload))
		}
	})
	_, err := h.Exec(context.Background(), provider.ExecSpec{Argv: []string{"true"}})
	// Which of the two comes first is a race between the host's reader
	// and its Exec; either way the answer is a transport error, never a
	// result (1 run in ~30 ends with the agent's end already closed).
	if !agenthost.IsTransport(err) {
		t.Fatalf("exec against an overrunning agent: %v", err)
	}
}
