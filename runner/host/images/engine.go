package images

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/sandproof/sandproof/runner/host/engine"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// Engine drives a Docker engine through the docker CLI. The CLI, rather than
// an API client, because it is what a person debugging a failed case types,
// and it negotiates the API version with whatever dockerd runs.
type Engine struct {
	// Docker is the docker CLI; empty means "docker" found on PATH.
	Docker string
}

// ErrNoEngine means the docker CLI is missing or no engine answers.
var ErrNoEngine = errors.New("no docker engine answers (start one with images/engine.sh start)")

func (e Engine) cli() string {
	if e.Docker != "" {
		return e.Docker
	}
	return "docker"
}

// run runs the docker CLI and returns its stdout; a failure carries the
// command and its stderr.
func (e Engine) run(ctx context.Context, args ...string) (string, error) {
	var out, errb bytes.Buffer
	ep, err := engine.Default()
	if err != nil {
		return "", fmt.Errorf("run docker %s: %w", strings.Join(short(args), " "), err)
	}
	cmd := exec.CommandContext(ctx, e.cli(), args...)
	// The engine certify reaches too (runner/host/engine), given to the CLI as
	// DOCKER_HOST.
	cmd.Env = ep.Env(os.Environ())
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("run docker %s: %w: %s", strings.Join(short(args), " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// short keeps error messages readable when an argument is a whole script.
func short(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if len(a) > 60 {
			a = a[:57] + "..."
		}
		out[i] = a
	}
	return out
}

// Ping checks that the engine answers and returns its version.
func (e Engine) Ping(ctx context.Context) (string, error) {
	if _, err := exec.LookPath(e.cli()); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoEngine, err)
	}
	v, err := e.run(ctx, "version", "--format", "{{.Server.Version}}")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoEngine, err)
	}
	return strings.TrimSpace(v), nil
}

// Info is what the engine says about an image.
type Info struct {
	ID      string
	Size    int64
	Created time.Time
	Labels  map[string]string
}

// Inspect returns the image's info; found is false when the engine does not
// have it.
func (e Engine) Inspect(ctx context.Context, ref string) (info Info, found bool, err error) {
	out, err := e.run(ctx, "image", "inspect", "--format", "{{json .}}", ref)
	if err != nil {
		if strings.Contains(err.Error(), "No such image") || strings.Contains(err.Error(), "No such object") {
			return Info{}, false, nil
		}
		return Info{}, false, fmt.Errorf("inspect image %q: %w", ref, err)
	}
	var v struct {
		ID      string    `json:"Id"`
		Size    int64     `json:"Size"`
		Created time.Time `json:"Created"`
		Config  struct {
			Labels map[string]string `json:"Labels"`
		} `json:"Config"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return Info{}, false, fmt.Errorf("inspect image %q: decode: %w", ref, err)
	}
	return Info{ID: v.ID, Size: v.Size, Created: v.Created, Labels: v.Config.Labels}, true, nil
}

// RemoveImage removes an image by reference.
func (e Engine) RemoveImage(ctx context.Context, ref string) error {
	_, err := e.run(ctx, "image", "rm", "--force", ref)
	return err
}

// RemoveImageID removes an image by id unless a container uses it.
func (e Engine) RemoveImageID(ctx context.Context, id string) error {
	_, err := e.run(ctx, "image", "rm", id)
	return err
}

// CleanContainers removes every container carrying the sandproof label and
// every label in also (KEY or KEY=VALUE, at least one: a test names its
// own), running or not, and returns their ids. Owners are not looked at:
// clean-ups of leftovers on a shared engine are `sandproof clean`'s
// (runner/host/provider/docker.Clean).
func (e Engine) CleanContainers(ctx context.Context, also ...string) ([]string, error) {
	if len(also) == 0 {
		return nil, fmt.Errorf("clean containers: no label selector (use sandproof clean for leftovers)")
	}
	args := []string{"container", "ls", "--all", "--quiet", "--no-trunc", "--filter", "label=" + Label}
	for _, l := range also {
		args = append(args, "--filter", "label="+l)
	}
	out, err := e.run(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("list sandproof containers: %w", err)
	}
	ids := strings.Fields(out)
	if len(ids) == 0 {
		return nil, nil
	}
	if _, err := e.run(ctx, append([]string{"container", "rm", "--force", "--volumes"}, ids...)...); err != nil {
		return nil, fmt.Errorf("remove sandproof containers: %w", err)
	}
	return ids, nil
}

// Facts is what a look inside an image finds, with the image's own shell.
type Facts struct {
	// OS is ID-VERSION_ID from /etc/os-release, "unknown" without one.
	OS string
	// Bash and Python3 are paths found on the image's PATH, "none" when absent.
	Bash    string
	Python3 string
	// Python3Version is what `python3 --version` printed ("Python 3.9.2").
	Python3Version string
	// TaskUID is the uid of user "task", "none" when there is no such user.
	TaskUID string
	// Exists says, for each path asked about, whether it exists (a dangling
	// symlink counts as existing).
	Exists map[string]bool
}

// factsScript is POSIX sh that runs under dash, bash and BusyBox alike and
// uses only shell builtins plus `id`, so it works in any image with a shell.
const factsScript = `
os=unknown
if [ -r /etc/os-release ]; then os=$(. /etc/os-release; echo "${ID:-unknown}${VERSION_ID:+-$VERSION_ID}"); fi
echo "os=$os"
echo "bash=$(command -v bash || echo none)"
p=$(command -v python3 || echo none)
echo "python3=$p"
if [ "$p" != none ]; then v=$("$p" --version 2>&1); echo "python3_version=$v"; fi
echo "task_uid=$(id -u task 2>/dev/null || echo none)"
for f in "$@"; do
	if [ -e "$f" ] || [ -L "$f" ]; then echo "exists $f=yes"; else echo "exists $f=no"; fi
done
`

// Facts starts a throwaway container of ref (no network, removed on exit)
// and reports what its shell sees; paths are checked for existence.
func (e Engine) Facts(ctx context.Context, ref string, paths ...string) (Facts, error) {
	// Owner labels and limits as every sandproof container has, so
	// `sandproof clean` beside it knows whose it is: the Docker provider's
	// (these images are the Docker engine's), from the registry, which
	// has them when the binary links the provider.
	f, _ := provider.Lookup(provider.DefaultName)
	if f.RunArgs == nil {
		return Facts{}, fmt.Errorf("look inside image %q: %w", ref, provider.UnknownName(provider.DefaultName))
	}
	own, err := f.RunArgs(map[string]string{Label + ".images": "facts"}, provider.Limits{})
	if err != nil {
		return Facts{}, fmt.Errorf("look inside image %q: %w", ref, err)
	}
	args := append([]string{"run", "--rm", "--network", "none"}, own...)
	args = append(args, "--entrypoint", "/bin/sh", ref, "-c", factsScript, "facts")
	out, err := e.run(ctx, append(args, paths...)...)
	if err != nil {
		return Facts{}, fmt.Errorf("look inside image %q: %w", ref, err)
	}
	return parseFacts(out), nil
}

func parseFacts(out string) Facts {
	f := Facts{OS: "unknown", Bash: "none", Python3: "none", TaskUID: "none", Exists: map[string]bool{}}
	for _, line := range strings.Split(out, "\n") {
		if p, ok := strings.CutPrefix(line, "exists "); ok {
			if i := strings.LastIndexByte(p, '='); i >= 0 {
				f.Exists[p[:i]] = p[i+1:] == "yes"
			}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		switch k {
		case "os":
			f.OS = v
		case "bash":
			f.Bash = v
		case "python3":
			f.Python3 = v
		case "python3_version":
			f.Python3Version = v
		case "task_uid":
			f.TaskUID = v
		}
	}
	return f
}

// check compares facts with what the recipe expects and lists every
// difference.
func (x Expect) check(f Facts) []string {
	var bad []string
	if x.OS != "" && f.OS != x.OS {
		bad = append(bad, fmt.Sprintf("os is %q, want %q", f.OS, x.OS))
	}
	switch x.Bash {
	case "present":
		if f.Bash == "none" {
			bad = append(bad, "bash is missing")
		}
	case "none":
		if f.Bash != "none" {
			bad = append(bad, fmt.Sprintf("bash is present at %q", f.Bash))
		}
	}
	if x.Python3 == "none" && f.Python3 != "none" {
		bad = append(bad, fmt.Sprintf("python3 is present at %q", f.Python3))
	} else if path, ver, ok := strings.Cut(x.Python3, " "); ok {
		if f.Python3 != path {
			bad = append(bad, fmt.Sprintf("python3 resolves to %q on PATH, want %q", f.Python3, path))
		}
		if !strings.HasPrefix(strings.TrimPrefix(f.Python3Version, "Python "), ver) {
			bad = append(bad, fmt.Sprintf("python3 --version says %q, want %s", f.Python3Version, ver))
		}
	}
	if f.TaskUID != "1000" {
		bad = append(bad, fmt.Sprintf("user task has uid %q, want 1000", f.TaskUID))
	}
	for _, p := range x.Absent {
		if f.Exists[p] {
			bad = append(bad, fmt.Sprintf("%s exists", p))
		}
	}
	for _, p := range x.Present {
		if !f.Exists[p] {
			bad = append(bad, fmt.Sprintf("%s is missing", p))
		}
	}
	return bad
}

// streamTail keeps the last n bytes written to it, for error messages.
type streamTail struct {
	buf []byte
	n   int
}

func (t *streamTail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.n {
		t.buf = t.buf[len(t.buf)-t.n:]
	}
	return len(p), nil
}

var _ io.Writer = (*streamTail)(nil)
