package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandproof/sandproof/runner/warden/mutant"
)

// maxParamsSize bounds the params file; a real one is a few kilobytes.
const maxParamsSize = 16 << 20

// maxLineCap bounds line_cap: the runner holds one line of that size.
const maxLineCap = 1 << 30

// DefaultPath is the CLI's PATH when neither env nor inherit_env gives one
// (the usual Debian and Alpine default, without the current directory).
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// launchVar is the supervisor's marker (contract §2); the runner passes
// its own value on, first in the CLI's environment.
const launchVar = "WARDEN_LAUNCH"

// Modes of Params.Mode.
const (
	ModeDirect = "direct"
	ModeEvents = "events"
)

// Params is the JSON params file of `warden run` (contract §5). Only
// this file configures the runner: no environment variable does. Relative
// paths are relative to the runner's own working directory, not to Cwd.
type Params struct {
	// Argv is the CLI and its arguments; required. A name without a slash is
	// looked up in the CLI's PATH (absolute entries only; an empty or relative
	// entry would run a program from the task's directory).
	Argv []string `json:"argv"`
	// Cwd is the CLI's working directory; empty means the runner's.
	Cwd string `json:"cwd"`
	// Env holds variables set for the CLI; they win over InheritEnv. It may
	// not set WARDEN_LAUNCH, which only the supervisor sets.
	Env map[string]string `json:"env"`
	// InheritEnv names variables copied from the runner's environment, in
	// this order; absent ones are skipped. Nothing else is inherited except
	// WARDEN_LAUNCH.
	InheritEnv []string `json:"inherit_env"`
	// PathPrefix holds absolute directories put before PATH, in order. PATH
	// itself comes from Env, else InheritEnv, else DefaultPath.
	PathPrefix []string `json:"path_prefix"`
	// Stdin is a file to read; nil (JSON null or omitted) means /dev/null.
	// The runner's own stdin is never passed on.
	Stdin *string `json:"stdin"`
	// Stdout receives the CLI's stdout in direct mode (created or
	// truncated, mode 0600); empty means the runner's own stdout. It is
	// refused in events mode, where stdout goes to Events.
	Stdout string `json:"stdout"`
	// Stderr receives the CLI's stderr in both modes; empty means the
	// runner's own stderr. The same path as Stdout shares one file.
	Stderr string `json:"stderr"`
	// Mode is "direct" (the default when empty) or "events".
	Mode string `json:"mode"`
	// Events is the events file (created or truncated, mode 0600); required
	// in events mode, refused in direct mode.
	Events string `json:"events"`
	// LineCap is the longest line kept whole in events mode, in bytes; nil
	// means DefaultLineCap. Refused in direct mode.
	LineCap *int64 `json:"line_cap"`
}

// LoadParams reads and validates the params file at path.
func LoadParams(path string) (*Params, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open params %q: %w", path, unwrapPath(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxParamsSize+1))
	if err != nil {
		return nil, fmt.Errorf("read params %q: %w", path, unwrapPath(err))
	}
	if len(data) > maxParamsSize {
		return nil, fmt.Errorf("read params %q: larger than %d bytes", path, maxParamsSize)
	}
	p, err := ParseParams(data)
	if err != nil {
		return nil, fmt.Errorf("params %q: %w", path, err)
	}
	return p, nil
}

// ParseParams decodes and validates a params file's contents. Unknown fields
// are refused: a misspelt "inherit_env" must not silently run the CLI with
// an empty environment.
func ParseParams(data []byte) (*Params, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Params
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("decode JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("decode JSON: data after the params object")
	}
	if bytes.HasPrefix(bytes.TrimSpace(data), []byte("null")) {
		return nil, errors.New("decode JSON: params must be an object, got null")
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

func (p *Params) validate() error {
	if len(p.Argv) == 0 {
		return errors.New("argv: must name the CLI (got an empty list)")
	}
	if p.Argv[0] == "" {
		return errors.New(`argv[0]: must not be ""`)
	}
	for i, a := range p.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("argv[%d] %q: contains a NUL byte", i, a)
		}
	}
	if err := checkPath("cwd", p.Cwd); err != nil {
		return err
	}
	for k, v := range p.Env {
		if err := checkName("env", k); err != nil {
			return err
		}
		if k == launchVar && !mutant.Is(mutant.ParamsMarker) {
			return fmt.Errorf("env %q: set by the supervisor, not by params", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("env %q=%q: value contains a NUL byte", k, v)
		}
	}
	for _, k := range p.InheritEnv {
		if err := checkName("inherit_env", k); err != nil {
			return err
		}
	}
	for i, d := range p.PathPrefix {
		field := fmt.Sprintf("path_prefix[%d]", i)
		if !filepath.IsAbs(d) || strings.ContainsAny(d, ":\x00") {
			return fmt.Errorf("%s %q: must be an absolute directory without ':'", field, d)
		}
	}
	if p.Stdin != nil {
		if *p.Stdin == "" {
			return errors.New(`stdin "": use null for /dev/null`)
		}
		if err := checkPath("stdin", *p.Stdin); err != nil {
			return err
		}
	}
	for _, f := range []struct{ name, v string }{{"stdout", p.Stdout}, {"stderr", p.Stderr}, {"events", p.Events}} {
		if err := checkPath(f.name, f.v); err != nil {
			return err
		}
	}
	switch p.Mode {
	case "", ModeDirect:
		if p.Events != "" {
			return fmt.Errorf("events %q: only used in events mode (mode is %q)", p.Events, p.Mode)
		}
		if p.LineCap != nil {
			return fmt.Errorf("line_cap %d: only used in events mode (mode is %q)", *p.LineCap, p.Mode)
		}
	case ModeEvents:
		if p.Events == "" {
			return errors.New(`events: required in events mode`)
		}
		if p.Stdout != "" {
			return fmt.Errorf("stdout %q: not used in events mode (stdout goes to events)", p.Stdout)
		}
		if p.Stderr != "" && filepath.Clean(p.Stderr) == filepath.Clean(p.Events) {
			return fmt.Errorf("stderr %q: same file as events", p.Stderr)
		}
		if p.LineCap != nil && (*p.LineCap <= 0 || *p.LineCap > maxLineCap) {
			return fmt.Errorf("line_cap %d: must be between 1 and %d", *p.LineCap, maxLineCap)
		}
	default:
		return fmt.Errorf("mode %q: must be %q or %q", p.Mode, ModeDirect, ModeEvents)
	}
	return nil
}

func checkName(field, k string) error {
	if k == "" || strings.ContainsAny(k, "=\x00") {
		return fmt.Errorf("%s %q: not a variable name", field, k)
	}
	return nil
}

func checkPath(field, v string) error {
	if strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("%s %q: contains a NUL byte", field, v)
	}
	return nil
}

// environ builds the CLI's environment from the runner's own (getenv):
// WARDEN_LAUNCH first, then inherit_env in order, then env sorted by name,
// then PATH with path_prefix before it.
func (p *Params) environ(getenv func(string) (string, bool)) []string {
	var keys []string
	vals := map[string]string{}
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			keys = append(keys, k)
		}
		vals[k] = v
	}
	if v, ok := getenv(launchVar); ok {
		set(launchVar, v)
	}
	for _, k := range p.InheritEnv {
		if v, ok := getenv(k); ok {
			set(k, v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(p.Env)) {
		set(k, p.Env[k])
	}
	path, ok := vals["PATH"]
	if !ok {
		path = DefaultPath
	}
	if len(p.PathPrefix) > 0 {
		dirs := slices.Clone(p.PathPrefix)
		if path != "" { // an empty entry would mean the working directory
			dirs = append(dirs, path)
		}
		path = strings.Join(dirs, ":")
	}
	set("PATH", path)
	env := make([]string, len(keys))
	for i, k := range keys {
		env[i] = k + "=" + vals[k]
	}
	return env
}

// unwrapPath drops the path an *os.PathError repeats, since callers quote it.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
