package session

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/provider"
)

// The seed tree is the one transfer Seed makes: its order (a dir before
// what goes into it), its modes and owners and its confinement to the
// session dir are what the sandbox ends up with, engine or not.
func TestSeedTreeEntries(t *testing.T) {
	const dir = "/var/lib/sandproof/s-1"
	tree := seedTree{
		dir: dir, uid: 1000, gid: 1001, arch: "amd64", warden: "/h/warden",
		bins: Binaries{
			Probe:  map[string]string{"amd64": "/h/probe", "arm64": "/h/probe-arm"},
			Rmtree: map[string]string{"amd64": "/h/rmtree"},
		},
		// "home" is the session's own; "a/b" and "a/c" share a parent;
		// "../../etc" climbs no higher than the session dir.
		dirs: []string{"home/.cache", "a/b", "a/c", "../../etc", "/", "x//y/"},
		files: map[string]File{
			"e.txt":      {Data: []byte("e")},
			"b.json":     {Data: nil},
			"d/host":     {HostPath: "/h/d", Data: []byte("ignored"), Mode: 0o755},
			"../c.sh":    {Data: []byte("c"), Mode: 0o700},
			"a.txt":      {Data: []byte("a")},
			"f/../g.txt": {Data: []byte("g")},
		},
	}
	got, probe, wardenFrom := tree.entries()
	if wardenFrom != "" {
		t.Errorf("warden placed from %q without WardenAt, want it uploaded", wardenFrom)
	}
	if probe != dir+"/tools/probe" {
		t.Errorf("probe path %q, want %q", probe, dir+"/tools/probe")
	}
	u, g := 1000, 1001
	want := []provider.Entry{
		{Path: dir, Dir: true, Mode: 0o755},
		{Path: dir + "/bin", Dir: true, Mode: 0o755},
		{Path: dir + "/tools", Dir: true, Mode: 0o755},
		{Path: dir + "/state", Dir: true, Mode: 0o755},
		{Path: dir + "/run", Dir: true, Mode: 0o755},
		{Path: dir + "/home", Dir: true, Mode: 0o700, UID: u, GID: g},
		{Path: dir + "/bin/warden", HostPath: "/h/warden", Mode: 0o755},
		{Path: dir + "/tools/probe", HostPath: "/h/probe", Mode: 0o755},
		{Path: dir + "/bin/rmtree", HostPath: "/h/rmtree", Mode: 0o755},
		{Path: dir + "/home/.cache", Dir: true, Mode: 0o700, UID: u, GID: g},
		{Path: dir + "/a", Dir: true, Mode: 0o700, UID: u, GID: g},
		{Path: dir + "/a/b", Dir: true, Mode: 0o700, UID: u, GID: g},
		{Path: dir + "/a/c", Dir: true, Mode: 0o700, UID: u, GID: g},
		{Path: dir + "/etc", Dir: true, Mode: 0o700, UID: u, GID: g},
		{Path: dir + "/x", Dir: true, Mode: 0o700, UID: u, GID: g},
		{Path: dir + "/x/y", Dir: true, Mode: 0o700, UID: u, GID: g},
		{Path: dir + "/c.sh", Data: []byte("c"), Mode: 0o700, UID: u, GID: g},
		{Path: dir + "/a.txt", Data: []byte("a"), Mode: 0o644, UID: u, GID: g},
		{Path: dir + "/b.json", Data: []byte{}, Mode: 0o644, UID: u, GID: g},
		{Path: dir + "/d/host", HostPath: "/h/d", Mode: 0o755, UID: u, GID: g},
		{Path: dir + "/e.txt", Data: []byte("e"), Mode: 0o644, UID: u, GID: g},
		{Path: dir + "/g.txt", Data: []byte("g"), Mode: 0o644, UID: u, GID: g},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("entries differ:")
		for i := range max(len(got), len(want)) {
			var g, w any = "(none)", "(none)"
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("  [%d] got %+v\n       want %+v", i, g, w)
			}
		}
	}
	// An empty file is sent as data, never as a host file named "".
	for _, e := range got {
		if e.Path == dir+"/b.json" && e.Data == nil {
			t.Errorf("b.json has nil Data: Put would read HostPath %q", e.HostPath)
		}
	}
}

// Without a build for the sandbox's arch, neither the probe nor the
// removal helper is in the tree, and seed hashes with sha256sum.
func TestSeedTreeWithoutOptionalBuilds(t *testing.T) {
	tree := seedTree{dir: "/s", arch: "arm64", warden: "/h/warden",
		bins: Binaries{Probe: map[string]string{"amd64": "/h/probe"}, Rmtree: map[string]string{"amd64": "/h/rmtree"}}}
	got, probe, _ := tree.entries()
	if probe != "" {
		t.Errorf("probe path %q for an arch without a probe build, want \"\"", probe)
	}
	var paths []string
	for _, e := range got {
		paths = append(paths, e.Path)
	}
	want := []string{"/s", "/s/bin", "/s/tools", "/s/state", "/s/run", "/s/home", "/s/bin/warden"}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("paths %q, want %q", paths, want)
	}
}

// A probe the sandbox already holds (ProbeAt) is the one seed runs, and
// no probe bytes are in the transfer; a build for another arch only is
// not taken for it.
func TestSeedTreeProbeAlreadyInSandbox(t *testing.T) {
	bins := Binaries{Probe: map[string]string{"amd64": "/h/probe"}, ProbeAt: map[string]string{"amd64": "/owner/probe"}}
	got, probe, _ := seedTree{dir: "/s", arch: "amd64", warden: "/h/warden", bins: bins}.entries()
	if probe != "/owner/probe" {
		t.Errorf("probe path %q, want the sandbox's /owner/probe", probe)
	}
	for _, e := range got {
		if e.HostPath == "/h/probe" || strings.HasSuffix(e.Path, "/probe") {
			t.Errorf("the probe is uploaded (%+v) although the sandbox holds one", e)
		}
	}
	if _, probe, _ := (seedTree{dir: "/s", arch: "arm64", warden: "/h/warden", bins: bins}).entries(); probe != "" {
		t.Errorf("probe path %q for arm64, which has neither a build nor one in the sandbox; want \"\"", probe)
	}
}

// A warden build the sandbox holds (WardenAt) is placed by the probe, not
// uploaded: its bytes are not in the transfer, bin/ (where it goes) is, and
// the rest of the tree is as with an upload. Without a probe to place and
// hash it, or without a build for the sandbox's arch there, warden is
// uploaded as before.
func TestSeedTreeWardenAlreadyInSandbox(t *testing.T) {
	paths := func(es []provider.Entry) []string {
		var ps []string
		for _, e := range es {
			ps = append(ps, e.Path)
		}
		return ps
	}
	bins := Binaries{
		ProbeAt:  map[string]string{"amd64": "/owner/probe"},
		WardenAt: map[string]string{"amd64": "/owner/warden"},
		Rmtree:   map[string]string{"amd64": "/h/rmtree"},
	}
	got, probe, from := seedTree{dir: "/s", arch: "amd64", warden: "/h/warden", bins: bins}.entries()
	if probe != "/owner/probe" || from != "/owner/warden" {
		t.Errorf("probe %q, warden from %q; want /owner/probe and /owner/warden", probe, from)
	}
	want := []string{"/s", "/s/bin", "/s/tools", "/s/state", "/s/run", "/s/home", "/s/bin/rmtree"}
	if !reflect.DeepEqual(paths(got), want) {
		t.Errorf("paths %q, want %q (no bin/warden: the probe places it)", paths(got), want)
	}

	withWarden := []string{"/s", "/s/bin", "/s/tools", "/s/state", "/s/run", "/s/home", "/s/bin/warden"}
	for _, c := range []struct {
		name string
		bins Binaries
		arch string
	}{
		{"no probe", Binaries{WardenAt: bins.WardenAt}, "amd64"},
		{"another arch's build", Binaries{ProbeAt: map[string]string{"arm64": "/owner/probe"}, WardenAt: bins.WardenAt}, "arm64"},
	} {
		got, _, from := seedTree{dir: "/s", arch: c.arch, warden: "/h/warden", bins: c.bins}.entries()
		if from != "" || !reflect.DeepEqual(paths(got), withWarden) {
			t.Errorf("%s: warden from %q, paths %q; want it uploaded: %q", c.name, from, paths(got), withWarden)
		}
		if e := got[len(got)-1]; e.HostPath != "/h/warden" || e.Mode != 0o755 || e.UID != 0 {
			t.Errorf("%s: warden entry %+v, want /h/warden 0755 root", c.name, e)
		}
	}
}

// A capture inside another one's path comes with that download only when
// the same ids read it and it lands where that download puts it; the
// outermost such download covers it.
func TestCoveringJobs(t *testing.T) {
	jobs := []*captureJob{
		{p: "/s/run", dst: "/c/run", user: "1000"},                           // 0
		{p: "/s/run/db", dst: "/c/run/db", user: "1000"},                     // 1: inside 0
		{p: "/s/run/db/x.sqlite", dst: "/c/run/db/x.sqlite", user: "1000"},   // 2: inside 0 and 1, 0 is outermost
		{p: "/s/run/y.sqlite", dst: "/c/files/s/run/y.sqlite", user: "1000"}, // 3: lands elsewhere
		{p: "/s/run/z", dst: "/c/run/z", user: ""},                           // 4: other ids
		{p: "/s/run2/a", dst: "/c/run2/a", user: "1000"},                     // 5: a sibling, not inside
		{p: "/s/run2", dst: "/c/run2", user: "1000"},                         // 6: covers 5
		// 7: a sibling whose dst happens to be where 0 would put it.
		{p: "/s/run2/b", dst: "/c/run/s/run2/b", user: "1000"},
	}
	got := coveringJobs(jobs)
	want := []int{-1, 0, 0, -1, -1, 6, -1, -1}
	for i, k := range got {
		at := -1
		for n, j := range jobs {
			if j == k {
				at = n
			}
		}
		if at != want[i] {
			t.Errorf("job %d (%s) covered by job %d, want %d", i, jobs[i].p, at, want[i])
		}
	}
}
