package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/provider/docker"
)

// hostTree makes a tree with what a runtime tree holds: dirs, files of
// several modes, one owned by someone else, a link inside it and one
// pointing out of it, and an empty dir.
func hostTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "a/deep/er"), 0o755))
	must(os.Chmod(filepath.Join(dir, "a"), 0o750))
	must(os.WriteFile(filepath.Join(dir, "a/x"), []byte("x content\n"), 0o640))
	must(os.Chmod(filepath.Join(dir, "a/x"), 0o640))
	must(os.WriteFile(filepath.Join(dir, "a/deep/er/f"), []byte("deep\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "run"), []byte("#!/bin/sh\necho ran\n"), 0o755))
	must(os.Chmod(filepath.Join(dir, "run"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "owned"), []byte("owned\n"), 0o600))
	must(os.Chmod(filepath.Join(dir, "owned"), 0o600))
	must(os.Symlink("a/x", filepath.Join(dir, "link")))
	must(os.Symlink("/etc/hostname", filepath.Join(dir, "out")))
	must(os.Mkdir(filepath.Join(dir, "empty"), 0o700))
	must(os.Chmod(filepath.Join(dir, "empty"), 0o700))
	if os.Geteuid() == 0 {
		must(os.Lchown(filepath.Join(dir, "owned"), 1234, 5678))
	}
	return dir
}

func removeVolume(t *testing.T, p *docker.Provider, name string) {
	t.Cleanup(func() { p.Client.VolumeRemove(context.Background(), name, true) })
}

// mounted creates a sandbox with the volume at /rt.
func mounted(t *testing.T, p *docker.Provider, name string) provider.Sandbox {
	t.Helper()
	sb, err := p.Create(context.Background(), provider.CreateSpec{Image: busyboxImage, Expire: 10 * time.Minute,
		Volumes: []provider.VolumeMount{{Volume: name, Target: "/rt"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(context.Background()) })
	return sb
}

func run(t *testing.T, sb provider.Sandbox, script string) (string, int) {
	t.Helper()
	res, err := sb.Exec(context.Background(), provider.ExecSpec{Argv: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	return string(res.Stdout) + string(res.Stderr), res.ExitCode
}

func TestDockerVolumeHoldsTheTree(t *testing.T) {
	p := engine(t)
	ctx := context.Background()
	dir := hostTree(t)
	key := "test-" + randomTag(t)
	name, err := p.Volume(ctx, key, dir)
	if err != nil {
		t.Fatal(err)
	}
	removeVolume(t, p, name)
	if name != "sandproof-vol-"+key {
		t.Fatalf("name = %q", name)
	}
	v, err := p.Client.VolumeInspect(ctx, name)
	if err != nil || v.Labels[provider.LabelKey] == "" || v.Labels[docker.LabelVolumeKey] != key {
		t.Fatalf("volume %q labels %v, %v", name, v.Labels, err)
	}
	sb := mounted(t, p, name)
	out, code := run(t, sb, "cd /rt && ls -lnd a a/x a/deep/er/f run owned link out empty | while read m n u g s mon day tm rest; do echo \"$m $u $g $rest\"; done; cat a/x link a/deep/er/f; ./run; cat .sandproof-volume-complete")
	want := []string{
		"drwxr-x--- 0 0 a",
		"-rw-r----- 0 0 a/x",
		"-rw-r--r-- 0 0 a/deep/er/f",
		"-rwxr-xr-x 0 0 run",
		"-rw------- 1234 5678 owned",
		"lrwxrwxrwx 0 0 link -> a/x",
		"lrwxrwxrwx 0 0 out -> /etc/hostname",
		"drwx------ 0 0 empty",
		"x content\nx content\ndeep\nran\n" + key,
	}
	if os.Geteuid() != 0 {
		want[4] = "-rw------- " // owner not settable by this user
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("the mounted tree lacks %q:\n%s", w, out)
		}
	}
	if code != 0 {
		t.Errorf("reading the tree exited %d:\n%s", code, out)
	}
	// Read-only: the sandbox cannot change what every case shares.
	if out, code := run(t, sb, "echo x > /rt/new"); code == 0 {
		t.Errorf("wrote into the volume: %s", out)
	}
	// Found afterwards, by this provider and by a new one, without a new
	// fill: the same key is the same tree, whatever dir says.
	other, err := docker.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []*docker.Provider{p, other} {
		if got, err := q.Volume(ctx, key, t.TempDir()); err != nil || got != name {
			t.Fatalf("again: %q, %v", got, err)
		}
	}
	if docker.Fills(p) != 1 || docker.Fills(other) != 0 {
		t.Fatalf("fills: %d and %d, want 1 and 0", docker.Fills(p), docker.Fills(other))
	}
	if out, _ := run(t, mounted(t, p, name), "cat /rt/a/x"); out != "x content\n" {
		t.Fatalf("after the second call: %q", out)
	}
}

// A volume whose fill died before its marker is made again.
func TestDockerVolumeHalfFilledIsRefilled(t *testing.T) {
	p := engine(t)
	ctx := context.Background()
	key := "test-" + randomTag(t)
	name := "sandproof-vol-" + key
	removeVolume(t, p, name)
	// A half fill: the volume with one stray file and no marker.
	c, err := p.Client.ContainerCreate(ctx, &container.Config{Image: busyboxImage, Cmd: []string{"true"}},
		&container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: name, Target: "/v"}}}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Client.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	tw.WriteHeader(&tar.Header{Name: "stray", Mode: 0o644, Size: 3, Typeflag: tar.TypeReg})
	tw.Write([]byte("old"))
	tw.Close()
	if err := p.Client.CopyToContainer(ctx, c.ID, "/v", &tb, container.CopyToContainerOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := p.Client.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	got, err := p.Volume(ctx, key, hostTree(t))
	if err != nil || got != name {
		t.Fatalf("volume = %q, %v", got, err)
	}
	out, _ := run(t, mounted(t, p, name), "ls /rt; cat /rt/a/x")
	if strings.Contains(out, "stray") || !strings.Contains(out, "x content") || docker.Fills(p) != 1 {
		t.Fatalf("after the refill (%d fills):\n%s", docker.Fills(p), out)
	}
}

// Many callers at once, through two providers (two processes' worth of
// state): one fill in all, and every caller gets the complete volume.
func TestDockerVolumeConcurrentCallersShareOneFill(t *testing.T) {
	p := engine(t)
	q, err := docker.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dir := hostTree(t)
	key := "test-" + randomTag(t)
	removeVolume(t, p, "sandproof-vol-"+key)
	var wg sync.WaitGroup
	names := make([]string, 16)
	errs := make([]error, 16)
	for i := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prov := p
			if i%2 == 1 {
				prov = q
			}
			names[i], errs[i] = prov.Volume(ctx, key, dir)
		}()
	}
	wg.Wait()
	for i := range names {
		if errs[i] != nil || names[i] != "sandproof-vol-"+key {
			t.Fatalf("caller %d: %q, %v", i, names[i], errs[i])
		}
	}
	if n := docker.Fills(p) + docker.Fills(q); n != 1 {
		t.Fatalf("%d fills for one key, want 1", n)
	}
	if out, _ := run(t, mounted(t, p, names[0]), "cat /rt/a/deep/er/f /rt/.sandproof-volume-complete"); out != "deep\n"+key {
		t.Fatalf("the shared volume: %q", out)
	}
}

func TestDockerVolumeBadInput(t *testing.T) {
	p := engine(t)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "f")
	os.WriteFile(file, nil, 0o644)
	fifoDir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(fifoDir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifoKey := "test-" + randomTag(t)
	removeVolume(t, p, "sandproof-vol-"+fifoKey)
	for _, tc := range []struct{ key, dir, want string }{
		{"../up", t.TempDir(), `key "../up"`},
		{"", t.TempDir(), `key ""`},
		{"ok", file, "not a directory"},
		{"ok", filepath.Join(file, "nope"), "not a directory"},
		{fifoKey, fifoDir, "pipe\": a p"},
	} {
		_, err := p.Volume(ctx, tc.key, tc.dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Volume(%q, %q) = %v, want an error with %q", tc.key, tc.dir, err, tc.want)
		}
	}
	_, err := p.Create(ctx, provider.CreateSpec{Image: busyboxImage, Volumes: []provider.VolumeMount{{Volume: "someones-volume", Target: "/x"}}})
	if err == nil || !strings.Contains(err.Error(), `"someones-volume"`) {
		t.Errorf("a volume Volume did not make: %v", err)
	}
}

// clean --volumes: an unused sandproof volume goes (not on a dry run), one
// a container mounts stays.
func TestCleanVolumes(t *testing.T) {
	p := engine(t)
	ctx := context.Background()
	dir := hostTree(t)
	unused, used := "test-"+randomTag(t), "test-"+randomTag(t)
	var names []string
	for _, k := range []string{unused, used} {
		name, err := p.Volume(ctx, k, dir)
		if err != nil {
			t.Fatal(err)
		}
		removeVolume(t, p, name)
		names = append(names, name)
	}
	mounted(t, p, names[1])
	exists := func(name string) bool {
		_, err := p.Client.VolumeInspect(ctx, name)
		return err == nil
	}
	for _, dry := range []bool{true, false} {
		res, err := docker.CleanVolumes(ctx, p, dry, docker.LabelVolumeKey+"="+unused)
		if err != nil || len(res.Removed) != 1 || res.Removed[0].Name != names[0] || len(res.Kept) != 0 {
			t.Fatalf("clean volumes (dry run %t) of the unused one: %+v, %v", dry, res, err)
		}
		if exists(names[0]) != dry {
			t.Fatalf("dry run %t: the unused volume exists: %t", dry, exists(names[0]))
		}
	}
	res, err := docker.CleanVolumes(ctx, p, false, docker.LabelVolumeKey+"="+used)
	if err != nil || len(res.Removed) != 0 || len(res.Kept) != 1 || res.Kept[0].Reason != docker.ReasonVolumeInUse || !exists(names[1]) {
		t.Fatalf("clean volumes of the used one: %+v, %v (exists %t)", res, err, exists(names[1]))
	}
}

// A sandbox whose harness became root tries to change a shared volume for
// the next case (volumes outlive cases and runs, keyed by content):
// overwrite, remove, chmod, forge the fill's marker, remount read-write,
// and an upload through the provider. Each fails; the same commands on a
// copy of the tree succeed (the positive control); a new sandbox, and a
// new Volume call (no refill), see the tree as it was.
func TestDockerVolumeRootCannotChangeItForTheNextCase(t *testing.T) {
	p := engine(t)
	ctx := context.Background()
	key := "test-" + randomTag(t)
	name, err := p.Volume(ctx, key, hostTree(t))
	if err != nil {
		t.Fatal(err)
	}
	removeVolume(t, p, name)
	attack := func(d string) string {
		return "for c in 'echo evil > " + d + "/run' 'rm " + d + "/a/x' 'chmod 777 " + d + "/run' " +
			"'echo forged > " + d + "/.sandproof-volume-complete' 'mkdir " + d + "/new'; do " +
			"sh -c \"$c\" 2>/dev/null && echo \"did: $c\"; done; true"
	}
	sb := mounted(t, p, name)
	if out, code := run(t, sb, "id -u; cp -a /rt /tmp/copy && "+attack("/tmp/copy")); code != 0 ||
		!strings.HasPrefix(out, "0\n") || strings.Count(out, "did: ") != 5 {
		t.Fatalf("positive control: root on a copy of the tree: %d %q", code, out)
	}
	if out, _ := run(t, sb, attack("/rt")); strings.Contains(out, "did: ") {
		t.Errorf("root changed the shared volume: %q", out)
	}
	if out, code := run(t, sb, "mount -o remount,rw /rt 2>&1 || mount -o remount,rw,bind /rt 2>&1"); code == 0 {
		t.Errorf("root remounted the volume read-write: %q", out)
	}
	if err := provider.UploadBytes(ctx, sb, []byte("evil"), "/rt/uploaded", 0o644, 0, 0); err == nil {
		t.Errorf("an upload through the provider wrote into the volume")
	}
	next := mounted(t, p, name)
	if out, code := run(t, next, "cat /rt/run /rt/a/x /rt/.sandproof-volume-complete; stat -c %a /rt/run; ls /rt/uploaded /rt/new 2>&1 >/dev/null | wc -l"); code != 0 ||
		out != "#!/bin/sh\necho ran\nx content\n"+key+"755\n2\n" {
		t.Errorf("the next sandbox sees %q (exit %d), want the tree as it was", out, code)
	}
	if got, err := p.Volume(ctx, key, t.TempDir()); err != nil || got != name || docker.Fills(p) != 1 {
		t.Errorf("again: %q, %v, %d fills", got, err, docker.Fills(p))
	}
}
