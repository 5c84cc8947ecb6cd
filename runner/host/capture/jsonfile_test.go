package capture

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/hostfile"
)

func TestReadJSONRecordsReadsTheArray(t *testing.T) {
	p := filepath.Join(t.TempDir(), "traj.json")
	os.WriteFile(p, []byte(`{"info": {}, "messages": [{"role": "user"}, {"role": "assistant", "n": 2}, {"role": "exit"}]}`), 0o644)
	var got []string
	n, err := ReadJSONRecords(p, "messages", func(doc string) bool { got = append(got, doc); return len(got) < 2 })
	if err != nil || n != 2 || got[1] != `{"role": "assistant", "n": 2}` {
		t.Fatalf("read %d %q, %v: want the first two elements, then a stop", n, got, err)
	}
}

func TestReadJSONRecordsRefusesWhatIsNoTranscript(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"notjson": `{"messages": [`, "notarray": `{"messages": {"a": 1}}`, "missing": `{"info": 1}`} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := ReadJSONRecords(p, "messages", func(string) bool { return true }); !errors.Is(err, ErrNoRecords) {
			t.Errorf("%s: %v, want ErrNoRecords", name, err)
		}
	}
	// A link the harness left in place of its file is not followed.
	link := filepath.Join(dir, "link")
	os.Symlink("/etc/passwd", link)
	if _, err := ReadJSONRecords(link, "messages", func(string) bool { return true }); !errors.Is(err, hostfile.ErrNotRegular) {
		t.Errorf("a link: %v, want ErrNotRegular", err)
	}
	// Bounded: a file past the cap is an error, not a read of it all.
	big := filepath.Join(dir, "big")
	f, _ := os.Create(big)
	f.Truncate(MaxJSONFileBytes + 1)
	f.Close()
	if _, err := ReadJSONRecords(big, "messages", func(string) bool { return true }); err == nil || !strings.Contains(err.Error(), "larger than the cap") {
		t.Errorf("over the cap: %v", err)
	}
}
