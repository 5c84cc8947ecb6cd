package harness

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// eventLine is one decoded line of the events file.
type eventLine struct {
	TS        string          `json:"ts"`
	Seq       int64           `json:"seq"`
	Event     json.RawMessage `json:"event"`
	Raw       *string         `json:"raw"`
	RawB64    *string         `json:"raw_b64"`
	Truncated bool            `json:"truncated"`
	Bytes     int64           `json:"bytes"`
}

// kind renders a line for comparison: "event:<json>", "raw:<text>",
// "b64:<decoded bytes, quoted>", with "+cut(N)" when truncated.
func (e eventLine) kind(t *testing.T) string {
	t.Helper()
	n := 0
	var s string
	if e.Event != nil {
		n++
		s = "event:" + string(e.Event)
	}
	if e.Raw != nil {
		n++
		s = "raw:" + *e.Raw
	}
	if e.RawB64 != nil {
		n++
		b, err := base64.StdEncoding.DecodeString(*e.RawB64)
		if err != nil {
			t.Fatalf("decode raw_b64 %q: %v", *e.RawB64, err)
		}
		s = fmt.Sprintf("b64:%q", b)
	}
	if n != 1 {
		t.Fatalf("line %d has %d of event/raw/raw_b64, want exactly 1", e.Seq, n)
	}
	if e.Truncated {
		s += fmt.Sprintf("+cut(%d)", e.Bytes)
	}
	return s
}

func decodeEvents(t *testing.T, out []byte) []eventLine {
	t.Helper()
	var lines []eventLine
	for i, l := range bytes.SplitAfter(out, []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		if l[len(l)-1] != '\n' {
			t.Fatalf("events line %d has no LF: %q", i+1, l)
		}
		var e eventLine
		dec := json.NewDecoder(bytes.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("decode events line %d %q: %v", i+1, l, err)
		}
		if e.Seq != int64(len(lines)+1) {
			t.Fatalf("events line %d has seq %d", i+1, e.Seq)
		}
		lines = append(lines, e)
	}
	return lines
}

func TestRecorder(t *testing.T) {
	tests := []struct {
		name string
		in   string
		cap  int
		want []string
	}{
		{"empty input", "", 0, nil},
		{"one line", "hello\n", 0, []string{"raw:hello"}},
		{"no final LF", "a\nb", 0, []string{"raw:a", "raw:b"}},
		{"empty lines", "\n\n", 0, []string{"raw:", "raw:"}},
		{"CRLF", "a\r\nb\r\n", 0, []string{"raw:a", "raw:b"}},
		{"only the CR before LF goes", "a\r\r\n\rb\n", 0, []string{"raw:a\r", "raw:\rb"}},
		{"CR at end without LF is content", "a\r", 0, []string{"raw:a\r"}},
		{"JSON object", `{"type":"x","n":[1,2]}` + "\n", 0, []string{`event:{"type":"x","n":[1,2]}`}},
		{"JSON scalar", "42\n\"s\"\nnull\n", 0, []string{"event:42", `event:"s"`, "event:null"}},
		{"JSON with CRLF", "{\"a\":1}\r\n", 0, []string{`event:{"a":1}`}},
		{"CR inside JSON whitespace is dropped", "{\"a\":\r1}\n", 0, []string{`event:{"a":1}`}},
		{"non-JSON then JSON", "oops {\n{\"ok\":true}\n", 0, []string{"raw:oops {", `event:{"ok":true}`}},
		{"invalid UTF-8", "\xff\xfe\x00a\n", 0, []string{`b64:"\xff\xfe\x00a"`}},
		{"JSON with invalid UTF-8 inside", "{\"a\":\"\xff\"}\n", 0, []string{`b64:"{\"a\":\"\xff\"}"`}},
		{"escapes", "q\"b\\t\tc\x01\u2028\n", 0, []string{"raw:q\"b\\t\tc\x01\u2028"}},
		{"at the cap", "abcd\n", 4, []string{"raw:abcd"}},
		{"at the cap with CRLF", "abcd\r\n", 4, []string{"raw:abcd"}},
		{"over the cap", "abcdef\n", 4, []string{"raw:abcd+cut(6)"}},
		{"over the cap with CRLF", "abcdef\r\n", 4, []string{"raw:abcd+cut(6)"}},
		{"over the cap, JSON is raw", "[1,2,3]\n", 4, []string{"raw:[1,2+cut(7)"}},
		{"over the cap, invalid UTF-8", "\xffbcdef\n", 4, []string{`b64:"\xffbcd"+cut(6)`}},
		{"over the cap, no final LF", "abcdef", 4, []string{"raw:abcd+cut(6)"}},
		{"cap then next line whole", "abcdef\nxy\n", 4, []string{"raw:abcd+cut(6)", "raw:xy"}},
	}
	for _, tc := range tests {
		// Every split of the input into two writes, and byte by byte: the
		// result may not depend on how the pipe delivered the bytes.
		splits := [][]string{{tc.in}, splitBytes(tc.in)}
		for i := 1; i < len(tc.in); i++ {
			splits = append(splits, []string{tc.in[:i], tc.in[i:]})
		}
		for _, chunks := range splits {
			var out bytes.Buffer
			r := NewRecorder(&out, tc.cap)
			for _, c := range chunks {
				if _, err := r.Write([]byte(c)); err != nil {
					t.Fatalf("%s: write: %v", tc.name, err)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatalf("%s: close: %v", tc.name, err)
			}
			var got []string
			for _, e := range decodeEvents(t, out.Bytes()) {
				if _, err := time.Parse(time.RFC3339Nano, e.TS); err != nil {
					t.Fatalf("%s: ts %q: %v", tc.name, e.TS, err)
				}
				got = append(got, e.kind(t))
			}
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tc.want) {
				t.Errorf("%s, written as %q:\n got %q\nwant %q", tc.name, chunks, got, tc.want)
			}
		}
	}
}

func splitBytes(s string) []string {
	var out []string
	for i := range len(s) {
		out = append(out, s[i:i+1])
	}
	return out
}

// TestRecorderRawRoundTrips checks the JSON string escaper against every
// byte value and the characters encoding/json treats specially.
func TestRecorderRawRoundTrips(t *testing.T) {
	var b strings.Builder
	for c := 0; c < 0x80; c++ {
		if c != '\n' {
			b.WriteByte(byte(c))
		}
	}
	b.WriteString("é漢\u2028\u2029\U0001F600<>&")
	in := b.String()
	var out bytes.Buffer
	r := NewRecorder(&out, 0)
	r.Write([]byte(in + "\n"))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	lines := decodeEvents(t, out.Bytes())
	if len(lines) != 1 || lines[0].Raw == nil || *lines[0].Raw != in {
		t.Fatalf("raw does not round-trip:\n got %s\nwant %q", out.Bytes(), in)
	}
	if bytes.ContainsAny(out.Bytes()[:out.Len()-1], "\r\n\u2028") {
		t.Errorf("events line holds a raw line separator: %q", out.Bytes())
	}
}

// TestRecorderStamp checks that ts is taken when the line ends.
func TestRecorderStamp(t *testing.T) {
	var out bytes.Buffer
	r := NewRecorder(&out, 0)
	clock := time.Date(2026, 11, 29, 10, 0, 0, 1, time.UTC)
	r.Now = func() time.Time { return clock }
	r.Write([]byte("part"))
	clock = clock.Add(time.Second)
	r.Write([]byte("ial\n"))
	r.Close()
	lines := decodeEvents(t, out.Bytes())
	if len(lines) != 1 || lines[0].TS != "2026-11-29T10:00:01.000000001Z" {
		t.Fatalf("got %s, want one line stamped 2026-11-29T10:00:01.000000001Z", out.Bytes())
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	w.n++
	return 0, fmt.Errorf("disk full")
}

// TestRecorderWriteError checks that a failing events file is reported and
// that the recorder keeps accepting input, so the CLI is never blocked.
func TestRecorderWriteError(t *testing.T) {
	w := &failWriter{}
	r := NewRecorder(w, 0)
	big := bytes.Repeat([]byte("y"), 2*writeBuf)
	for range 3 {
		n, _ := r.Write(append(big, '\n'))
		if n != len(big)+1 {
			t.Fatalf("Write took %d of %d bytes", n, len(big)+1)
		}
	}
	if err := r.Close(); err == nil {
		t.Fatal("Close after a failed write: want the error")
	}
	if r.Seq() != 3 {
		t.Errorf("seq is %d after 3 lines, want 3", r.Seq())
	}
}

// BenchmarkRecorder feeds single lines of growing size in 256 KiB chunks (as
// the runner's pipe reader does). MB/s that stays flat from 1 MB to 64 MB
// shows time linear in the line length.
func BenchmarkRecorder(b *testing.B) {
	for _, kind := range []string{"text", "json", "invalid-utf8"} {
		for _, mb := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("%s/%dMB", kind, mb), func(b *testing.B) {
				line := benchLine(kind, mb*1000*1000)
				b.SetBytes(int64(len(line)))
				r := NewRecorder(io.Discard, 0)
				b.ResetTimer()
				for range b.N {
					feed(r, line)
				}
				if err := r.Close(); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
	b.Run("short-lines/16MB", func(b *testing.B) {
		line := bytes.Repeat([]byte(`{"type":"text","text":"hello, world"}`+"\r\n"), 16*1000*1000/38)
		b.SetBytes(int64(len(line)))
		r := NewRecorder(io.Discard, 0)
		b.ResetTimer()
		for range b.N {
			feed(r, line)
		}
	})
}

func benchLine(kind string, n int) []byte {
	var line []byte
	switch kind {
	case "text":
		line = bytes.Repeat([]byte("lorem \"ipsum\"\tdolor "), n/20+1)[:n]
	case "json":
		line = append([]byte(`{"text":"`), bytes.Repeat([]byte("abcdefghij"), (n-12)/10)...)
		line = append(line, `"}`...)
	case "invalid-utf8":
		line = bytes.Repeat([]byte("abc\xff"), n/4)
	}
	return append(line, '\r', '\n')
}

// feed writes line to r in reads of the runner's buffer size, as the
// runner's copy loop does.
func feed(r *Recorder, line []byte) {
	for p := line; len(p) > 0; {
		n := min(len(p), readBuf)
		r.Write(p[:n])
		p = p[n:]
	}
}
