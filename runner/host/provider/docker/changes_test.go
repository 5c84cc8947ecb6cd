package docker

import (
	"os"
	"testing"

	"github.com/docker/docker/api/types"
)

// localOverlay trusts the engine's paths only for a running overlay2
// container whose merged dir is its pid 1's root as this host sees it.
// This process stands in for the container's pid 1: its root is "/".
func TestLocalOverlayProvesTheContainer(t *testing.T) {
	upper := t.TempDir()
	ctr := func(driver string, running bool, pid int, merged string) types.ContainerJSON {
		return types.ContainerJSON{ContainerJSONBase: &types.ContainerJSONBase{
			State:       &types.ContainerState{Running: running, Pid: pid},
			GraphDriver: types.GraphDriverData{Name: driver, Data: map[string]string{"UpperDir": upper, "MergedDir": merged, "LowerDir": "/l1:/l2"}},
		}}
	}
	me := os.Getpid()
	if u, lowers, ok := localOverlay(ctr("overlay2", true, me, "/")); !ok || u != upper || len(lowers) != 2 || lowers[0] != "/l1" {
		t.Fatalf("own root as merged dir: %q %q %t, want the upper dir and two lowers", u, lowers, ok)
	}
	for name, c := range map[string]types.ContainerJSON{
		"another driver":        ctr("vfs", true, me, "/"),
		"stopped":               ctr("overlay2", false, me, "/"),
		"no pid":                ctr("overlay2", true, 0, "/"),
		"merged is not root":    ctr("overlay2", true, me, t.TempDir()),
		"merged does not exist": ctr("overlay2", true, me, "/nonexistent-merged"),
		"no graph driver":       {ContainerJSONBase: &types.ContainerJSONBase{State: &types.ContainerState{Running: true, Pid: me}}},
		"no state":              {ContainerJSONBase: &types.ContainerJSONBase{}},
	} {
		if _, _, ok := localOverlay(c); ok {
			t.Errorf("%s: trusted the engine's paths", name)
		}
	}
}

// An exec that raced the container's death gets the OCI runtime's 126; a
// program that is not there gets a 126 too on this engine, and is the
// command's own failure.
func TestStartFailed(t *testing.T) {
	for _, tc := range []struct {
		code int
		out  string
		want bool
	}{
		{126, "OCI runtime exec failed: exec failed: unable to start container process: error writing config to pipe: write init-p: broken pipe: unknown\r\n", true},
		{126, "OCI runtime exec failed: exec failed: unable to start container process: exec: \"pidof\": executable file not found in $PATH: unknown\r\n", false},
		{126, "sh: /x: Permission denied\n", false},
		{127, "OCI runtime exec failed: broken pipe", false},
		{0, "", false},
	} {
		if got := startFailed(tc.code, []byte(tc.out)); got != tc.want {
			t.Errorf("startFailed(%d, %q) = %v, want %v", tc.code, tc.out, got, tc.want)
		}
	}
}
