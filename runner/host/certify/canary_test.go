package certify

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/capture"
	"github.com/sandproof/sandproof/runner/warden/harness"
)

// recorded returns what warden's runner writes to the events file for
// the harness's stdout.
func recorded(t *testing.T, stdout string) []byte {
	t.Helper()
	var b bytes.Buffer
	r := harness.NewRecorder(&b, 0)
	if _, err := r.Write([]byte(stdout)); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The canary is found in every encoding sandproof applies, with a
// positive control each time that the plain search would miss it.
func TestFindCanaryDecodes(t *testing.T) {
	key := NewCanary()
	other := NewCanary()
	mdKey := "sk_live_" + strings.TrimPrefix(key, "sk-sandproof-canary-") // a key Markdown escapes
	cases := []struct {
		name, key string
		data      []byte
		want      bool
	}{
		{"raw_b64 after a non-UTF-8 byte", key, recorded(t, "\xff"+key+"\n"), true},
		{"raw_b64, second alignment", key, recorded(t, "\xff\xfe"+key+"\n"), true},
		{"raw_b64, third alignment", key, recorded(t, "\xff\xfe\xfd"+key+" tail\n"), true},
		{"JSON string escapes", key, recorded(t, `{"type":"x","msg":"`+strings.ReplaceAll(key, "-", `\u002d`)+`"}`+"\n"), true},
		{"JSON inside a JSON string", key, []byte(`{"body":"{\"auth\":\"Bearer ` + strings.ReplaceAll(key, "-", `\\u002d`) + `\"}"}` + "\n"), true},
		{"Markdown escapes", mdKey, []byte(reports.Renderings(mdKey)[1] + "\n"), true},
		{"another key in raw_b64", key, recorded(t, "\xff"+other+"\n"), false},
		{"clean events", key, recorded(t, `{"type":"agent_end"}`+"\n\xffbinary\n"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "events.jsonl"), c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			if c.want && bytes.Contains(c.data, []byte(c.key)) {
				t.Fatalf("positive control: the key is in the file as is, a plain search finds it: %q", c.data)
			}
			if c.name == "raw_b64 after a non-UTF-8 byte" && !bytes.Contains(c.data, []byte(`"raw_b64"`)) {
				t.Fatalf("positive control: the line is not stored as raw_b64: %q", c.data)
			}
			hits, err := FindCanary(dir, c.key)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(hits) == 1; got != c.want {
				t.Errorf("found %t, want %t in %q", got, c.want, c.data)
			}
		})
	}
}

// A line longer than the decode cap is still searched raw across the
// reader's chunk boundaries.
func TestFindCanaryLongLine(t *testing.T) {
	key := NewCanary()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "long"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"x":"`)                   // held as JSON up to the cap, then streamed
	pad := bytes.Repeat([]byte("a"), 1<<20-7) // the key straddles 1 MiB chunks
	for i := 0; i*len(pad) <= capture.MaxEventLine; i++ {
		f.Write(pad)
	}
	f.WriteString(key + "\"}\n")
	f.Close()
	// A non-JSON file is streamed from its start.
	os.WriteFile(filepath.Join(dir, "short"), []byte("x\nplain "+key[:10]+"\n"+key[10:]+"\n"), 0o600)
	// "short" splits the key over two lines: not a leak of the key.
	if hits, err := FindCanary(dir, key); err != nil || len(hits) != 1 || filepath.Base(hits[0]) != "long" {
		t.Errorf("key after %d bytes on one line: %v %v", capture.MaxEventLine, hits, err)
	}
}

// A harness output tail that holds the key, as is or in base64, is
// withheld from the evidence; one without it is kept.
func TestTailWithholdsTheKey(t *testing.T) {
	key := NewCanary()
	cr := &caseRun{r: &runner{key: key}}
	dir := t.TempDir()
	for name, text := range map[string]string{
		"plain":  "error: bad key " + key + "\n",
		"base64": "dump " + base64.StdEncoding.EncodeToString([]byte("k="+key)) + "\n",
		"clean":  "version `GLIBC_2.34' not found\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("an earlier line\n"+text), 0o600); err != nil {
			t.Fatal(err)
		}
		got := cr.tail(p)
		switch {
		case name == "clean" && (len(got) != 2 || got[1] != "version `GLIBC_2.34' not found"):
			t.Errorf("clean tail: %q", got)
		case name != "clean" && !slices.Equal(got, withheldTail):
			t.Errorf("%s: tail %q kept, want it withheld", name, got)
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if got := cr.tail(filepath.Join(dir, "link")); got != nil {
		t.Errorf("a link was followed: %q", got)
	}
}

// The run-dir scan uses the relay's decoders: hex, URL escapes and a
// reversed key in a captured file (or model_relay.jsonl) are found, each
// with the positive control that the key is not there as is.
func TestFindCanarySharesTheRelaysDecoders(t *testing.T) {
	key := NewCanary()
	rev := []byte(key)
	slices.Reverse(rev)
	for name, data := range map[string]string{
		"hex upper":    strings.ToUpper(hex.EncodeToString([]byte(key))),
		"URL escapes":  `{"path":"/v1/x?k=` + strings.ReplaceAll(key, "-", "%2D") + `"}`,
		"reversed":     "tool said " + string(rev),
		"reversed hex": hex.EncodeToString(rev),
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if strings.Contains(data, key) {
				t.Fatalf("positive control: the key is there as is")
			}
			os.WriteFile(filepath.Join(dir, "model_relay.jsonl"), []byte(data+"\n"), 0o600)
			if hits, err := FindCanary(dir, key); err != nil || len(hits) != 1 {
				t.Errorf("hits %v, %v; want the file", hits, err)
			}
		})
	}
}

// A scan past its byte or time bound is an error (never a clean pass):
// a clean 4 MiB file under a 1 MiB bound, and under a deadline already
// past.
func TestFindCanaryIsBounded(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "big"), bytes.Repeat([]byte("clean line\n"), 400<<10), 0o600)
	if hits, err := FindCanary(dir, NewCanary()); err != nil || len(hits) != 0 {
		t.Fatalf("positive control: within the defaults the file is clean: %v %v", hits, err)
	}
	for _, lim := range []ScanLimits{{Bytes: 1 << 20}, {Time: time.Nanosecond}} {
		if _, err := FindCanaryLimit(dir, NewCanary(), lim); !errors.Is(err, ErrScanBounded) {
			t.Errorf("limits %+v: err %v, want ErrScanBounded", lim, err)
		}
	}
}

// BenchmarkFindCanary scans 64 MiB of events-like JSON lines (with
// escapes, so the JSON decoder runs) for a key that is not there: the
// cost of secrets.canary per captured byte (docs/performance.md).
func BenchmarkFindCanary(b *testing.B) {
	dir := b.TempDir()
	line := []byte(`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"line one\nline \"two\" \u00e9 50% done"}]}}` + "\n")
	f, err := os.Create(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	for n := 0; n < 64<<20; n += len(line) {
		f.Write(line)
	}
	f.Close()
	key := NewCanary()
	b.SetBytes(64 << 20)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if hits, err := FindCanary(dir, key); err != nil || len(hits) != 0 {
			b.Fatal(hits, err)
		}
	}
}
