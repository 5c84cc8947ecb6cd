package adapter_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/adapter"
)

// A scratch entry that could take the task, the system's trees or the
// session dirs' parent with it is refused at parse, naming the file, the
// line and the value; the line is the entry's own (the list starts on
// line 7 of the document).
func TestScratchRefusals(t *testing.T) {
	for _, tc := range []struct{ entry, why string }{
		{"/task", "it matches /task"},
		{"/task/out", "under /task"},
		{"/task/*", "under /task"},
		{"/ta*", "it matches /task"},
		{"/t?sk", "it matches /task"},
		{"/[st]ask", "it matches /task"},
		{"/", "it is /"},
		{"/*", "it matches /task"},
		{"/etc", "it matches /etc"},
		{"/etc/openclaw.json", "under /etc"},
		{"/usr/local/x", "under /usr"},
		{"/var/lib/sandproof", "it matches /var/lib/sandproof"},
		{"/var/lib/sandproof/s-1/x", "under /var/lib/sandproof"},
		{"/var/lib/sand*", "it matches /var/lib/sandproof"},
		{"/var/lib", "it matches /var/lib, above /var/lib/sandproof"},
		{"/var", "it matches /var, above /var/lib/sandproof"},
		{"/v*", "it matches /var, above /var/lib/sandproof"},
		{"tmp/openclaw", "not an absolute path"},
		{"/tmp/../task", "not a plain path"},
		{"/tmp//openclaw", "not a plain path"},
		{"/tmp/openclaw/", "not a plain path"},
		{"/tmp/./openclaw", "not a plain path"},
		{"/tmp/*/lock", "a glob may be only in the last element"},
		{"/tmp/open claw", "want a plain absolute path"},
		{"/tmp/$(reboot)", "want a plain absolute path"},
		{"/tmp/{session_dir}", "want a plain absolute path"},
		{"/tmp/[x", "bad glob"},
		{"/tmp/.*", "its last element may match . or .."},
		{"/tmp/.?", "its last element may match . or .."},
		{"/tmp/..", "not a plain path"},
	} {
		t.Run(tc.entry, func(t *testing.T) {
			doc := good + "scratch:\n  - /tmp/openclaw*\n  - \"" + tc.entry + "\"\n"
			_, err := adapter.Parse("x.yaml", t.TempDir(), []byte(doc))
			if err == nil || !errors.Is(err, adapter.ErrInvalid) {
				t.Fatalf("err %v, want ErrInvalid", err)
			}
			want := `x.yaml:8: scratch[1]: "` + tc.entry + `" cannot be scratch: ` + tc.why
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("err:\n%v\nwant it to hold:\n%s", err, want)
			}
			if strings.Contains(err.Error(), "scratch[0]") {
				t.Fatalf("the good entry was refused too: %v", err)
			}
		})
	}
}

// The entries a harness really needs load, in order, each once; a
// manifest without scratch has none.
func TestScratchAccepted(t *testing.T) {
	doc := good + "scratch: [/tmp/openclaw*, /tmp/openclaw-0/gateway.lock, /var/tmp/x, /tmp/openclaw*, /var/lib/other, /tasks, /tmp/.oc-*]\n"
	m, err := adapter.Parse("x.yaml", t.TempDir(), []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/tmp/openclaw*", "/tmp/openclaw-0/gateway.lock", "/var/tmp/x", "/var/lib/other", "/tasks", "/tmp/.oc-*"}
	if !slices.Equal(m.Scratch, want) {
		t.Fatalf("scratch %q, want %q", m.Scratch, want)
	}
	m, err = adapter.Parse("x.yaml", t.TempDir(), []byte(good))
	if err != nil || len(m.Scratch) != 0 {
		t.Fatalf("no scratch key: %v, scratch %q", err, m.Scratch)
	}
	if _, err := adapter.Parse("x.yaml", t.TempDir(), []byte(good+"scratch: /tmp/x\n")); err == nil || !strings.Contains(err.Error(), "x.yaml:6: scratch: want a list") {
		t.Fatalf("a scalar scratch: %v", err)
	}
}
