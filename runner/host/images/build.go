package images

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultMirror is the Debian mirror the recipes fetch from.
const DefaultMirror = "http://deb.debian.org/debian"

// BuildOptions tune Build. The zero value is ready to use.
type BuildOptions struct {
	// Mirror is the Debian mirror; empty means DefaultMirror.
	Mirror string
	// WorkDir holds the scratch directories and lock files; empty means
	// /var/tmp (rootfs tars are 100+ MB, too big for a small /tmp).
	WorkDir string
	// Log receives one progress line per step, each timed; nil discards.
	Log io.Writer
	// Force rebuilds even when the engine has the image.
	Force bool
}

// Step is one timed part of a build.
type Step struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

// Result says what Build did.
type Result struct {
	Name string `json:"name"`
	Ref  string `json:"ref"`
	ID   string `json:"id"`
	// Built is false when the engine already had the image.
	Built   bool    `json:"built"`
	Seconds float64 `json:"seconds"`
	Steps   []Step  `json:"steps"`
}

// Build makes sure the engine has r's image: when its tag is there already
// nothing is built. Otherwise build.sh writes a rootfs tar, docker import
// turns it into the image (ENV, CMD and labels from the recipe), and the
// image is kept only if a look inside matches the recipe's expectations.
// A lock file per recipe keeps two concurrent builds from doing the work
// twice.
func Build(ctx context.Context, e Engine, r Recipe, o BuildOptions) (Result, error) {
	if o.Mirror == "" {
		o.Mirror = DefaultMirror
	}
	if o.WorkDir == "" {
		o.WorkDir = "/var/tmp"
	}
	b := &build{start: time.Now(), e: e, r: r, o: o, log: o.Log, res: Result{Name: r.Name, Ref: r.Ref()}}
	if b.log == nil {
		b.log = io.Discard
	}
	prev, found, err := e.Inspect(ctx, b.res.Ref)
	if err != nil {
		return b.fail(err)
	}
	if found && !o.Force {
		b.res.ID = prev.ID
		fmt.Fprintf(b.log, "images: %s: %s is up to date (%.1fs)\n", r.Name, b.res.Ref, time.Since(b.start).Seconds())
		return b.finish(), nil
	}
	unlock, err := lockFile(ctx, filepath.Join(o.WorkDir, "sandproof-image-"+r.Name+".lock"))
	if err != nil {
		return b.fail(err)
	}
	defer unlock()
	if !o.Force {
		// Another build may have finished while this one waited for the lock.
		if info, found, err := e.Inspect(ctx, b.res.Ref); err == nil && found {
			b.res.ID = info.ID
			fmt.Fprintf(b.log, "images: %s: %s was built meanwhile\n", r.Name, b.res.Ref)
			return b.finish(), nil
		}
	}
	if err := b.make(ctx); err != nil {
		return b.fail(err)
	}
	info, _, err := e.Inspect(ctx, b.res.Ref)
	if err != nil {
		return b.fail(err)
	}
	b.res.ID, b.res.Built = info.ID, true
	if prev.ID != "" && prev.ID != info.ID {
		// A forced rebuild leaves the old image untagged; drop it unless a
		// container still uses it (then the engine refuses, which is fine).
		_ = e.RemoveImageID(ctx, prev.ID)
	}
	out := b.finish()
	fmt.Fprintf(b.log, "images: %s: built %s in %.1fs (%s)\n", r.Name, b.res.Ref, out.Seconds, HumanSize(info.Size))
	return out, nil
}

// build is one Build under way: its result so far, timed from start.
type build struct {
	start time.Time
	e     Engine
	r     Recipe
	o     BuildOptions
	log   io.Writer
	res   Result
}

// finish is the result, timed to now.
func (b *build) finish() Result {
	b.res.Seconds = time.Since(b.start).Seconds()
	return b.res
}

// fail is the result with err, wrapped with the recipe's name.
func (b *build) fail(err error) (Result, error) {
	return b.finish(), fmt.Errorf("build image %q: %w", b.r.Name, err)
}

// step runs f as the named step, timed and logged.
func (b *build) step(name string, f func() error) error {
	t := time.Now()
	fmt.Fprintf(b.log, "images: %s: %s ...\n", b.r.Name, name)
	err := f()
	s := Step{Name: name, Seconds: time.Since(t).Seconds()}
	b.res.Steps = append(b.res.Steps, s)
	if err != nil {
		fmt.Fprintf(b.log, "images: %s: %s failed after %.1fs\n", b.r.Name, name, s.Seconds)
		return err
	}
	fmt.Fprintf(b.log, "images: %s: %s done in %.1fs\n", b.r.Name, name, s.Seconds)
	return nil
}

// make runs the build's steps in a scratch dir: the rootfs tar, its
// import, and the look inside, which removes an image that does not match
// its recipe.
func (b *build) make(ctx context.Context) error {
	work, err := os.MkdirTemp(b.o.WorkDir, "sandproof-image-"+b.r.Name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	tarPath := filepath.Join(work, "rootfs.tar")
	if err := b.step("rootfs", func() error { return runScript(ctx, b.r, work, tarPath, b.o.Mirror) }); err != nil {
		return err
	}
	if err := b.step("import", func() error { return importTar(ctx, b.e, b.r, tarPath) }); err != nil {
		return err
	}
	err = b.step("verify", func() error {
		paths := append(append([]string{}, b.r.Expect.Absent...), b.r.Expect.Present...)
		f, err := b.e.Facts(ctx, b.res.Ref, paths...)
		if err != nil {
			return err
		}
		if bad := b.r.Expect.check(f); len(bad) > 0 {
			return fmt.Errorf("image does not match its recipe: %s", strings.Join(bad, "; "))
		}
		return nil
	})
	if err != nil {
		// A tag that exists means "built and good": never leave a bad one.
		if rmErr := b.e.RemoveImage(context.WithoutCancel(ctx), b.res.Ref); rmErr != nil {
			fmt.Fprintf(b.log, "images: %s: remove bad image: %v\n", b.r.Name, rmErr)
		}
		return err
	}
	return nil
}

// debianArch maps GOARCH to the Debian architecture the images are built
// for: always the host's, since build.sh runs the image's binaries (BusyBox)
// on the host.
func debianArch() (string, error) {
	switch runtime.GOARCH {
	case "amd64", "arm64":
		return runtime.GOARCH, nil
	}
	return "", fmt.Errorf("build images on %q: only amd64 and arm64 hosts are supported", runtime.GOARCH)
}

// runScript writes the recipe's files into work and runs build.sh, its
// output going to build.log; a failure quotes the log's tail.
func runScript(ctx context.Context, r Recipe, work, tarPath, mirror string) error {
	arch, err := debianArch()
	if err != nil {
		return err
	}
	src := filepath.Join(work, "recipe")
	scratch := filepath.Join(work, "scratch")
	for _, d := range []string{src, scratch} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create work dir: %w", err)
		}
	}
	for name, b := range r.files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("write recipe file %q: %w", name, err)
		}
		if err := os.WriteFile(p, b, 0o755); err != nil {
			return fmt.Errorf("write recipe file %q: %w", name, err)
		}
	}
	logPath := filepath.Join(work, "build.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("create build log: %w", err)
	}
	defer logf.Close()
	tail := &streamTail{n: 4000}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(src, "build.sh"))
	cmd.Dir = scratch
	cmd.Stdout = io.MultiWriter(logf, tail)
	cmd.Stderr = cmd.Stdout
	cmd.Env = append(os.Environ(),
		"SANDPROOF_OUT="+tarPath,
		"SANDPROOF_WORK="+scratch,
		"SANDPROOF_PACKAGES="+strings.Join(r.Packages, " "),
		"SANDPROOF_MIRROR="+mirror,
		"SANDPROOF_ARCH="+arch,
		"SANDPROOF_COMMON="+filepath.Join(src, "common.sh"),
	)
	// Its own process group, so a cancelled build takes mmdebstrap's
	// children with it instead of leaving them behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("run build.sh: %w\n%s", err, lastLines(string(tail.buf), 15))
	}
	fi, err := os.Stat(tarPath)
	if err != nil {
		return fmt.Errorf("run build.sh: no rootfs tar: %w", err)
	}
	if fi.Size() == 0 {
		return fmt.Errorf("run build.sh: rootfs tar %q is empty", tarPath)
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// importTar imports the rootfs with the recipe's ENV and CMD and the
// sandproof labels.
func importTar(ctx context.Context, e Engine, r Recipe, tarPath string) error {
	args := []string{"image", "import"}
	for _, kv := range r.Env {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--change", "ENV "+k+"="+strconv.Quote(v))
	}
	cmd, err := json.Marshal(r.Cmd)
	if err != nil {
		return fmt.Errorf("encode cmd: %w", err)
	}
	args = append(args,
		"--change", "CMD "+string(cmd),
		"--change", fmt.Sprintf("LABEL %s=1 %s.image=%s %s.hash=%s", Label, Label, r.Name, Label, r.Hash()),
		"--message", "sandproof image "+r.Name,
		tarPath, r.Ref())
	_, err = e.run(ctx, args...)
	return err
}

// lockFile takes an exclusive flock on path, waiting until ctx ends.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %q: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("lock %q: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %q: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// HumanSize prints a byte count the way docker does (decimal units).
func HumanSize(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	f := float64(n)
	for _, u := range []string{"kB", "MB", "GB", "TB"} {
		f /= unit
		if f < unit {
			return fmt.Sprintf("%.3g%s", f, u)
		}
	}
	return fmt.Sprintf("%.3gPB", f/unit)
}
