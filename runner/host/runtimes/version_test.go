package runtimes

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// markingSpec is fakeSpec whose bin/tool, started, appends a line to the
// host file $MARK (outside the runtime's tree: a file the harness has no
// business writing) before it prints its version, as a hostile harness's
// --version could read ~/.docker/config.json or talk to the engine's
// socket instead. The spec's version_env points MARK at marker.
func markingSpec(t *testing.T, builds *atomic.Int32, marker string) Spec {
	t.Helper()
	spec := fakeSpec(t, builds)
	spec.VersionEnv = []string{"MARK=" + marker}
	spec.Stage = func(ctx context.Context, dir string, info map[string]any) error {
		builds.Add(1)
		if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "bin", "tool"), []byte("#!/bin/sh\necho \"ran as $(id -u) with $*\" >> \"$MARK\"\necho fake 1.2.3\n"), 0o755)
	}
	return spec
}

// The version check starts the harness's own code, so nothing of it runs
// on the host: not when the runtime is built, not when a cached one is
// reused. On main Prepare ran ENTRY --version on the host, as the user
// running sandproof, with the host's files and network: the marker
// appeared on the build and again on every reuse.
func TestPrepareRunsNoHarnessCodeOnTheHost(t *testing.T) {
	var builds atomic.Int32
	marker := filepath.Join(t.TempDir(), "ran-on-the-host")
	spec, cache := markingSpec(t, &builds, marker), t.TempDir()
	ctx := context.Background()
	cold, err := Prepare(ctx, spec, cache)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	warm, err := Prepare(ctx, spec, cache)
	if err != nil || !warm.Cached {
		t.Fatalf("prepare again: %v (cached %v)", err, warm != nil && warm.Cached)
	}
	if b, err := os.ReadFile(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the harness's version command ran on the host (%s holds %q, %v)", marker, b, err)
	}
	if cold.VersionChecked || warm.VersionChecked {
		t.Errorf("version_checked %v then %v with no check run, want false", cold.VersionChecked, warm.VersionChecked)
	}

	// Positive control: the entry, started, does write its marker.
	control := filepath.Join(t.TempDir(), "control")
	cmd := exec.Command(filepath.Join(cold.Dir, "bin", "tool"), "--version")
	cmd.Env = append(os.Environ(), "MARK="+control)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "fake 1.2.3") {
		t.Fatalf("positive control: bin/tool --version: %q, %v", out, err)
	}
	if b, err := os.ReadFile(control); err != nil || !strings.Contains(string(b), "--version") {
		t.Fatalf("positive control: the entry wrote no marker: %q, %v", b, err)
	}
}

// The check is handed to the caller instead, whole: the entry and
// version_args (the first element relative to the runtime dir, for the
// caller to place where it mounts the runtime), version_env and the
// pinned version; the runtime says why it is not checked. The same on a
// reuse, and nothing without version_args.
func TestPrepareHandsTheVersionCheckToTheCaller(t *testing.T) {
	var builds atomic.Int32
	spec, cache := markingSpec(t, &builds, "/nowhere/marker"), t.TempDir()
	for _, pass := range []string{"cold", "cached"} {
		rt, err := Prepare(context.Background(), spec, cache)
		if err != nil {
			t.Fatalf("%s: %v", pass, err)
		}
		v := rt.VersionCheck
		if v == nil || strings.Join(v.Argv, " ") != "bin/tool --version" || strings.Join(v.Env, " ") != "MARK=/nowhere/marker" || v.Want != "1.2.3" {
			t.Fatalf("%s: version check %+v, want bin/tool --version with MARK, wanting 1.2.3", pass, v)
		}
		if rt.VersionChecked || !strings.Contains(rt.VersionUnchecked, "not run on the host") {
			t.Errorf("%s: checked %v, unchecked %q: want not checked, saying why", pass, rt.VersionChecked, rt.VersionUnchecked)
		}
		if got := v.ArgvIn("/sb/rt"); strings.Join(got, " ") != "/sb/rt/bin/tool --version" {
			t.Errorf("%s: argv in the sandbox %q", pass, got)
		}
	}
	spec.VersionArgs = nil
	rt, err := Prepare(context.Background(), spec, t.TempDir())
	if err != nil || rt.VersionCheck != nil || rt.VersionUnchecked != "" {
		t.Fatalf("without version_args: %v, check %+v, unchecked %q", err, rt.VersionCheck, rt.VersionUnchecked)
	}
}
