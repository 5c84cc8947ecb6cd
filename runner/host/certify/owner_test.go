package certify

import (
	"os"
	"path"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/images"
)

// Every build a case runs or places from the owner's volume is in the
// volume's tree, from the option that names its host build; the session
// places warden from there (WardenAt) and runs the probe from there
// (ProbeAt), while warden's host build stays the one its copy is hashed
// against.
func TestOwnerVolumeHoldsWhatSessionsUse(t *testing.T) {
	o := Options{Warden: "/h/warden", Probe: "/h/probe", Agent: "/h/sandagent"}
	files := ownerFiles(o)
	for p, src := range map[string]string{probePath: o.Probe, agentPath: o.Agent, wardenPath: o.Warden} {
		if path.Dir(p) != ownerDir {
			t.Errorf("%s is not directly under the owner volume %s", p, ownerDir)
		}
		if got := files[path.Base(p)]; got != src {
			t.Errorf("owner tree has %q for %s, want %q", got, p, src)
		}
	}
	if len(files) != 3 {
		t.Errorf("owner tree %v, want the probe, the agent and warden only", files)
	}
	dir := t.TempDir()
	for _, n := range []string{"warden", "probe", "sandagent"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w := filepath.Join(dir, "warden")
	r, err := newRunner(Options{Warden: w, Probe: filepath.Join(dir, "probe"), Out: filepath.Join(dir, "out"),
		Adapters: []*adapter.Manifest{{Name: "a"}}, Images: []images.Image{{Name: "i", Ref: "r"}}})
	if err != nil {
		t.Fatal(err)
	}
	a := runtime.GOARCH
	if r.bins.WardenAt[a] != wardenPath || r.bins.ProbeAt[a] != probePath || r.bins.Warden[a] != w {
		t.Errorf("session builds %+v: want warden placed from %s (hashed against %s's) and the probe run from %s",
			r.bins, wardenPath, w, probePath)
	}
}
