package harness

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
)

// FuzzParseParams: any params file is accepted or refused, never a panic.
func FuzzParseParams(f *testing.F) {
	f.Add([]byte(`{"argv":["pi","-p","x"],"mode":"events","events":"/tmp/e","env":{"A":"1"},"inherit_env":["HOME"],"path_prefix":["/s/bin"]}`))
	f.Add([]byte(`{"argv":[],"mode":"direct"}`))
	f.Add([]byte(`{"argv":["x"],"bogus":1}`))
	f.Add([]byte(`{"argv":["x"],"env":{"WARDEN_LAUNCH":"evil"}}`))
	f.Add([]byte(`{"argv":["x"],"line_cap":-1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ParseParams(data)
	})
}

// FuzzRecorder: whatever a CLI prints, every event line is one JSON object
// with ts, seq and exactly one of event, raw, raw_b64, and the contents of
// the lines come back exactly (CR before LF dropped), however the output is
// split into writes.
func FuzzRecorder(f *testing.F) {
	f.Add([]byte("one\r\n{\"n\":1}\r\nmid\rdle\r\n\xff\xfe\n{\"a\":\"\xc3\x28\"}"), uint8(3))
	f.Add([]byte("\r\n\r\r\n\n"), uint8(1))
	f.Add([]byte(`{"type":"message_end","message":{"stopReason":"error"}}`+"\n"), uint8(7))
	f.Fuzz(func(t *testing.T, input []byte, split uint8) {
		var out bytes.Buffer
		r := NewRecorder(&out, 1<<20)
		step := int(split)%16 + 1
		for i := 0; i < len(input); i += step {
			r.Write(input[i:min(i+step, len(input))])
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		var want [][]byte
		for _, l := range bytes.SplitAfter(input, []byte("\n")) {
			if len(l) == 0 {
				continue
			}
			if l[len(l)-1] == '\n' {
				l = bytes.TrimSuffix(l[:len(l)-1], []byte("\r"))
			}
			want = append(want, l)
		}
		sc := bufio.NewScanner(&out)
		sc.Buffer(nil, 1<<24)
		n := 0
		for sc.Scan() {
			var ev map[string]json.RawMessage
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("event line %q: %v", sc.Bytes(), err)
			}
			if _, ok := ev["ts"]; !ok {
				t.Fatalf("no ts in %q", sc.Bytes())
			}
			var got []byte
			kinds := 0
			if v, ok := ev["event"]; ok {
				kinds++
				got = v
			}
			if v, ok := ev["raw"]; ok {
				kinds++
				var s string
				json.Unmarshal(v, &s)
				got = []byte(s)
			}
			if v, ok := ev["raw_b64"]; ok {
				kinds++
				var s string
				json.Unmarshal(v, &s)
				got, _ = base64.StdEncoding.DecodeString(s)
			}
			if kinds != 1 {
				t.Fatalf("%d kinds in %q", kinds, sc.Bytes())
			}
			if n >= len(want) {
				t.Fatalf("more event lines than input lines (%d)", len(want))
			}
			if _, isEvent := ev["event"]; isEvent {
				// JSON is embedded verbatim, except CR bytes (JSON
				// whitespace) that are removed; decoding drops the
				// whitespace around the value, so compare compacted.
				var a, b bytes.Buffer
				if json.Compact(&a, got) != nil || json.Compact(&b, want[n]) != nil || !bytes.Equal(a.Bytes(), b.Bytes()) {
					t.Fatalf("line %d: event %q, want %q", n, got, want[n])
				}
			} else if !bytes.Equal(got, want[n]) {
				t.Fatalf("line %d: got %q, want %q", n, got, want[n])
			}
			n++
		}
		if n != len(want) {
			t.Fatalf("%d event lines for %d input lines", n, len(want))
		}
	})
}
