// Package sessions runs full sessions (runner/host/session, contract §6)
// inside containers of the test images, with the case owner's instruments
// around them (section 7): the probe mounted read-only outside the session
// dir, /task and the four XDG markers of the task user, probe snapshots run
// with the image's own PATH, the container's filesystem diff read from the
// engine, and an optional tripwire first on the container's PATH, so that
// every exec the session makes meets the recording stand-ins.
//
// Containers are created through runner/host/provider/docker, the provider the
// session itself uses; the tripwire is planted through
// conformance/containers on the same container.
package sessions

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/sandproof/sandproof/conformance/containers"
	"github.com/sandproof/sandproof/conformance/framework"
	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/runner/host/images"
	"github.com/sandproof/sandproof/runner/host/provider"
	"github.com/sandproof/sandproof/runner/host/provider/docker"
	"github.com/sandproof/sandproof/runner/host/session"
	"github.com/sandproof/sandproof/runner/probe"
)

// Paths inside the container, as `sandproof certify` lays them out.
const (
	TaskDir  = session.TaskDir
	TaskHome = "/home/task"
	// BaseDir is the session dirs' parent; the owner's probe is mounted
	// below it, in a dir of its own that no session uses.
	BaseDir   = session.DefaultBaseDir
	OwnerDir  = BaseDir + "/owner"
	ProbePath = OwnerDir + "/probe"
	// TaskUser runs the harness.
	TaskUser = "1000:1000"
	TaskUID  = 1000
)

// XDG are the task user's four XDG base dirs (their defaults under HOME).
var XDG = session.XDGDirs(TaskHome)

// Tools are the static builds a session uploads, plus the owner's probe dir
// (put in a read-only volume, mounted at OwnerDir: no host path is ever
// bind-mounted).
type Tools struct {
	Binaries session.Binaries
	// ProbeDir holds only the probe, for the owner's mount.
	ProbeDir string
	// Bash is the host's bash-static, the private bash of the session.
	Bash string
}

// BuildTools builds the probe and rmtree (CGO_ENABLED=0) from the module at
// root into dir and pairs them with warden and the host's bash-static.
func BuildTools(root, dir, warden string) Tools {
	ginkgo.GinkgoHelper()
	arch := runtime.GOARCH
	t := Tools{ProbeDir: filepath.Join(dir, "owner"), Bash: "/bin/bash-static"}
	gomega.Expect(os.MkdirAll(t.ProbeDir, 0o755)).To(gomega.Succeed())
	if _, err := os.Stat(t.Bash); err != nil {
		framework.Missing(fmt.Sprintf("a static bash for images without one (%v)", err),
			"run `"+testenv.Prereqs+"` as root (installs the Debian package bash-static)")
	}
	probeBin, rmtree := filepath.Join(t.ProbeDir, "probe"), filepath.Join(dir, "rmtree")
	for _, b := range []struct{ out, pkg string }{{probeBin, "./cmd/probe"}, {rmtree, "./runner/rmtree"}} {
		cmd := exec.Command("go", "build", "-trimpath", "-o", b.out, b.pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "go build %s:\n%s", b.pkg, out)
	}
	t.Binaries = session.Binaries{
		Warden: map[string]string{arch: warden},
		Probe:  map[string]string{arch: probeBin},
		Bash:   map[string]string{arch: t.Bash},
		Rmtree: map[string]string{arch: rmtree},
	}
	return t
}

// ownerVolume is the read-only volume holding dir (the probe), keyed by
// the probe's digest so every process of the suite shares one.
func ownerVolume(ctx context.Context, prov *docker.Provider, dir string) string {
	ginkgo.GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(dir, "probe"))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	sum := sha256.Sum256(data)
	name, err := prov.Volume(ctx, "conformance-owner-"+hex.EncodeToString(sum[:16]), dir)
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "the owner's volume")
	return name
}

// Box is one container of a test image, owned by the spec: the session
// borrows it.
type Box struct {
	Prov *docker.Provider
	SB   provider.Sandbox
	// Image is the test image's name, Ref its reference.
	Image, Ref string
	// PATH is the image's own PATH; the owner's probe runs with it.
	PATH string
	// Trip is the tripwire view of the same container; nil without one.
	Trip *containers.Sandbox
}

// Ref resolves a test image's name to its reference.
func Ref(name string) string {
	ginkgo.GinkgoHelper()
	all, err := images.Resolve(nil)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	for _, img := range all {
		if img.Name == name {
			return img.Ref
		}
	}
	ginkgo.Fail(fmt.Sprintf("no test image named %q", name))
	return ""
}

// Start creates a container of the image with network "none", no init, pid
// 1 the provider's plain sleep, and the owner's probe mounted read-only; its
// removal is registered at once and checked (the engine must no longer know
// it). With tripwire, the container's PATH starts with the recording
// stand-ins (containers.TripwireBin), so every exec that sets no PATH of its
// own, as the session's execs do, and every harness that inherits PATH meet
// them; a stand-in of each tool called that way is proved recorded before
// the log is emptied.
func Start(ctx context.Context, image string, t Tools, tripwire bool) *Box {
	ginkgo.GinkgoHelper()
	pool, err := containers.Pool()
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "no docker engine answers (bash images/engine.sh start)")
	prov, err := docker.New()
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "no docker engine answers (bash images/engine.sh start)")
	b := &Box{Prov: prov, Image: image, Ref: Ref(image)}
	img, err := pool.Client.InspectImage(b.Ref)
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "image %s is missing: go run ./cmd/sandproof images build", b.Ref)
	for _, kv := range img.Config.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			b.PATH = v
		}
	}
	gomega.Expect(b.PATH).NotTo(gomega.BeEmpty(), "image %s sets no PATH", b.Ref)
	spec := provider.CreateSpec{
		Image: b.Ref, Network: provider.NetworkNone, Expire: containers.Expire * time.Second,
		Labels:  map[string]string{containers.Label: "conformance-integrity"},
		Volumes: []provider.VolumeMount{{Volume: ownerVolume(ctx, prov, t.ProbeDir), Target: OwnerDir}},
	}
	if tripwire {
		spec.Env = []string{"PATH=" + containers.TripwireBin + ":" + b.PATH}
	}
	b.SB, err = b.Prov.Create(ctx, spec)
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "start a container of %s", b.Ref)
	ginkgo.DeferCleanup(func(ctx context.Context) {
		gomega.Expect(b.SB.Destroy(ctx)).To(gomega.Succeed())
		info, err := b.SB.Inspect(ctx)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(info.Exists).To(gomega.BeFalse(), "container %.12s still known to the engine after removal", b.SB.ID())
	})
	ginkgo.GinkgoWriter.Printf("container %.12s of %s (tripwire %t)\n", b.SB.ID(), b.Ref, tripwire)
	if tripwire {
		b.Trip = &containers.Sandbox{Pool: pool, ID: b.SB.ID(), Ref: b.Ref, PATH: b.PATH}
		b.Trip.PlantTripwire(ctx)
		// Positive control through the session's own route: an exec of
		// the provider with no environment of its own finds each stand-in
		// by name on the container's PATH, and the call is recorded.
		var want []any
		for _, tool := range containers.TripwireTools {
			r, err := b.SB.Exec(ctx, provider.ExecSpec{Argv: []string{tool, "--control"}})
			gomega.Expect(err).NotTo(gomega.HaveOccurred())
			gomega.Expect(r.ExitCode).To(gomega.Equal(1), "the %s stand-in fails: %s", tool, r.Stderr)
			want = append(want, gomega.Equal("tripwire: "+containers.TripwireBin+"/"+tool+" --control"))
		}
		gomega.Expect(b.Trip.TripwireCalls(ctx)).To(gomega.ConsistOf(want...),
			"positive control: every stand-in called by name through the container's PATH is recorded")
		b.ResetCalls(ctx)
	}
	return b
}

// ResetCalls empties the tripwire log.
func (b *Box) ResetCalls(ctx context.Context) {
	ginkgo.GinkgoHelper()
	b.Trip.Upload(containers.File{Path: containers.TripwireLog, Mode: 0o666})
	gomega.Expect(b.Trip.TripwireCalls(ctx)).To(gomega.BeEmpty())
}

// Setup does the owner's part of contract §7.1 that the session must leave
// alone: /task for the task user, and a marker with random content in each
// XDG dir (XDG/sandproof-owner/marker). It returns the markers' paths.
func (b *Box) Setup(ctx context.Context) []string {
	ginkgo.GinkgoHelper()
	gomega.Expect(b.SB.Mkdir(ctx, TaskDir, 0o755, TaskUID, TaskUID)).To(gomega.Succeed())
	gomega.Expect(b.SB.Mkdir(ctx, TaskHome+"/.local", 0o755, TaskUID, TaskUID)).To(gomega.Succeed())
	var markers []string
	for i, mk := range session.OwnerMarkers(TaskHome) {
		d := XDG[i]
		gomega.Expect(b.SB.Mkdir(ctx, d, 0o755, TaskUID, TaskUID)).To(gomega.Succeed())
		gomega.Expect(b.SB.Mkdir(ctx, path.Dir(mk), 0o755, TaskUID, TaskUID)).To(gomega.Succeed())
		gomega.Expect(provider.UploadBytes(ctx, b.SB, []byte("owner marker "+Random()+"\n"), mk, 0o644, TaskUID, TaskUID)).To(gomega.Succeed())
		markers = append(markers, mk)
	}
	return markers
}

// Snapshot runs the owner's probe as root, as its own exec (no shell), with
// the image's PATH: the owner sees the image's python3 and bash, never the
// tripwire's stand-ins.
func (b *Box) Snapshot(ctx context.Context, markers []string) probe.Snapshot {
	ginkgo.GinkgoHelper()
	argv := []string{ProbePath, "snapshot"}
	if len(markers) > 0 {
		argv = append(argv, "--markers", strings.Join(markers, ","))
	}
	r, err := b.SB.Exec(ctx, provider.ExecSpec{Argv: argv, User: "0", Env: []string{"PATH=" + b.PATH}})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	gomega.Expect(r.ExitCode).To(gomega.Equal(0), "probe snapshot: %s", r.Stderr)
	var s probe.Snapshot
	gomega.Expect(json.Unmarshal(r.Stdout, &s)).To(gomega.Succeed())
	gomega.Expect(s.Schema).To(gomega.Equal(probe.Schema))
	return s
}

// Change is one entry of the container's filesystem diff.
type Change struct {
	Kind string // "A", "C" or "D"
	Path string
}

func (c Change) String() string { return c.Kind + " " + c.Path }

// Changes reads the container's filesystem diff from the engine
// (GET /containers/ID/changes, what `docker diff` prints), sorted by path.
func (b *Box) Changes() []Change {
	ginkgo.GinkgoHelper()
	pool, err := containers.Pool()
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "no docker engine answers")
	cs, err := pool.Client.ContainerChanges(b.SB.ID())
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "docker diff %.12s", b.SB.ID())
	out := make([]Change, 0, len(cs))
	for _, c := range cs {
		k := map[dc.ChangeType]string{dc.ChangeAdd: "A", dc.ChangeModify: "C", dc.ChangeDelete: "D"}[c.Kind]
		gomega.Expect(k).NotTo(gomega.BeEmpty(), "unknown change kind %d of %q", c.Kind, c.Path)
		out = append(out, Change{Kind: k, Path: path.Clean(c.Path)})
	}
	slices.SortFunc(out, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// Allowed is the diff's allow-list: /task, the session dirs' parent, the
// owner's marker dirs, plus extra.
func Allowed(extra ...string) []string {
	a := []string{TaskDir, BaseDir}
	a = append(a, session.OwnerMarkerDirs(TaskHome)...)
	return append(a, extra...)
}

// Outside returns the changes neither at or under an allowed path nor, for
// additions and modifications, a directory on the way to one (a parent
// changes when a child is added; a deleted ancestor is never "on the way").
func Outside(cs []Change, allowed []string) []string {
	out := []string{}
	for _, c := range cs {
		ok := false
		for _, a := range allowed {
			if c.Path == a || strings.HasPrefix(c.Path, a+"/") ||
				c.Kind != "D" && (c.Path == "/" || strings.HasPrefix(a, c.Path+"/")) {
				ok = true
				break
			}
		}
		if !ok {
			out = append(out, c.String())
		}
	}
	return out
}

// Random returns 16 hex digits from the host's CSPRNG.
func Random() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b[:])
}
