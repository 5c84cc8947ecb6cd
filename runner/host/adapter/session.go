package adapter

import (
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"path"
	"path/filepath"
	"slices"

	"github.com/sandproof/sandproof/runner/host/session"
	"github.com/sandproof/sandproof/runner/warden/harness"
)

// Context is what a case knows that the manifest does not.
type Context struct {
	ModelURL string
	Model    string
	TaskDir  string
	// RuntimeHostDir is the prepared runtime on the host ("" for none).
	RuntimeHostDir string
	// RuntimeDir is the sandbox path of a mounted runtime; "" means the
	// runtime is uploaded to {session_dir}/runtime.
	RuntimeDir string
	// NeedsBash overrides the manifest's `requires: [bash]` when set.
	NeedsBash bool
	// RuntimeEnv is set in every step's environment over the manifest's
	// (a glibc layer's LD_LIBRARY_PATH); nil sets nothing.
	RuntimeEnv map[string]string
}

// RuntimeMountDir is where a mounted runtime appears in the sandbox.
func RuntimeMountDir(name string) string {
	return session.DefaultBaseDir + "/runtime/" + name
}

// GlibcLayerMountDir is where a runtime's glibc layer is mounted in the
// sandbox: short, so its loader's path (26 bytes) fits in the PT_INTERP
// of an x86-64 or arm64 glibc executable (27 and 26 bytes) edited in place.
const GlibcLayerMountDir = "/var/lib/sandproof/g"

// Values returns the placeholder values for a session env.
func (m *Manifest) Values(c Context, sessionDir, home, prompt string) map[string]string {
	rt := c.RuntimeDir
	if rt == "" {
		rt = path.Join(sessionDir, "runtime")
	}
	return map[string]string{
		"prompt": prompt, "model_url": c.ModelURL, "model_origin": modelOrigin(c.ModelURL), "model": c.Model, "api_key_env": m.APIKeyEnv,
		"session_dir": sessionDir, "task_dir": c.TaskDir, "home": home, "runtime_dir": rt,
	}
}

// modelOrigin is the model URL without its path ("http://HOST:PORT"), for
// clients that add "/v1" themselves: Anthropic's SDK (Claude Code's
// ANTHROPIC_BASE_URL) posts to BASE/v1/messages.
func modelOrigin(modelURL string) string {
	u, err := url.Parse(modelURL)
	if err != nil || u.Host == "" {
		return modelURL
	}
	return u.Scheme + "://" + u.Host
}

func expandAll(ss []string, vals map[string]string) ([]string, error) {
	out := make([]string, len(ss))
	for i, s := range ss {
		v, err := Expand(s, vals)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func expandMap(ms map[string]string, vals map[string]string, into map[string]string) error {
	for k, s := range ms {
		v, err := Expand(s, vals)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		into[k] = v
	}
	return nil
}

// StateDirs are the dirs to create (owned by the harness user) before seed.
func (m *Manifest) StateDirs(c Context, sessionDir, home string) ([]string, error) {
	return expandAll(m.State.Dirs, m.Values(c, sessionDir, home, ""))
}

// CapturePaths returns the sandbox path of every declared capture by name.
func (m *Manifest) CapturePaths(c Context, sessionDir, home string) (map[string]string, error) {
	vals := m.Values(c, sessionDir, home, "")
	out := map[string]string{}
	for _, cp := range slices.Concat(m.Captures.SQLite, m.Captures.Files) {
		p, err := Expand(cp.Path, vals)
		if err != nil {
			return nil, err
		}
		out[cp.Name] = p
	}
	return out, nil
}

func (m *Manifest) params(c Context, s Step, e session.Env, extraEnv map[string]string) (harness.Params, error) {
	vals := m.Values(c, e.Dir, e.Home, e.Prompt)
	argv, err := expandAll(s.Argv, vals)
	if err != nil {
		return harness.Params{}, fmt.Errorf("argv: %w", err)
	}
	env := map[string]string{}
	if err := expandMap(m.State.Env, vals, env); err != nil {
		return harness.Params{}, fmt.Errorf("state.env: %w", err)
	}
	if err := expandMap(extraEnv, vals, env); err != nil {
		return harness.Params{}, err
	}
	if err := expandMap(s.Env, vals, env); err != nil {
		return harness.Params{}, fmt.Errorf("env: %w", err)
	}
	maps.Copy(env, c.RuntimeEnv)
	return harness.Params{Argv: argv, Env: env, InheritEnv: []string{m.APIKeyEnv}}, nil
}

// VersionLaunchID is the launch id under which a session's Activate runs
// the manifest's version_argv instead of its launch.
const VersionLaunchID = "cli-version"

// Session turns the manifest into the adapter a session runs.
func (m *Manifest) Session(c Context) (session.Adapter, error) {
	a := session.Adapter{Name: m.Name, NeedsBash: c.NeedsBash || slices.Contains(m.Requires, "bash"), Files: map[string]session.File{},
		Scratch: slices.Clone(m.Scratch)}
	if c.RuntimeHostDir != "" && c.RuntimeDir == "" {
		err := filepath.WalkDir(c.RuntimeHostDir, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			fi, err := e.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(c.RuntimeHostDir, p)
			a.Files[path.Join("runtime", filepath.ToSlash(rel))] = session.File{HostPath: p, Mode: fi.Mode().Perm()}
			return nil
		})
		if err != nil {
			return a, fmt.Errorf("list runtime of %s: %w", m.Name, err)
		}
	}
	if m.Install != nil {
		st := *m.Install
		a.Install = func(e session.Env) (session.Step, error) {
			p, err := m.params(c, st, e, nil)
			if err != nil {
				return session.Step{}, fmt.Errorf("install: %w", err)
			}
			p.Cwd = e.Home
			p.Mode = harness.ModeDirect
			p.Stdout = path.Join(e.RunDir, "stdout.log")
			p.Stderr = path.Join(e.RunDir, "stderr.log")
			return session.Step{Params: p, Deadline: st.Deadline}, nil
		}
	}
	a.Launch = func(e session.Env) (harness.Params, error) {
		if path.Base(e.RunDir) == VersionLaunchID && len(m.VersionArgv) > 0 {
			p, err := m.params(c, Step{Argv: m.VersionArgv, Env: m.Launch.Env}, e, nil)
			if err != nil {
				return p, fmt.Errorf("version_argv: %w", err)
			}
			p.Cwd, p.Mode = e.Home, harness.ModeDirect
			p.Stdout = path.Join(e.RunDir, "stdout.log")
			p.Stderr = p.Stdout
			return p, nil
		}
		p, err := m.params(c, m.Launch.Step, e, nil)
		if err != nil {
			return p, fmt.Errorf("launch: %w", err)
		}
		if p.Cwd, err = Expand(m.Launch.Cwd, m.Values(c, e.Dir, e.Home, e.Prompt)); err != nil {
			return p, fmt.Errorf("launch.cwd: %w", err)
		}
		p.Mode = m.Launch.Mode
		if p.Mode == harness.ModeDirect {
			p.Stdout = path.Join(e.RunDir, "stdout.log")
		}
		return p, nil
	}
	a.Captures = func(e session.Env) []session.Capture {
		vals := m.Values(c, e.Dir, e.Home, "")
		var out []session.Capture
		for _, cp := range m.Captures.SQLite {
			if p, err := Expand(cp.Path, vals); err == nil {
				out = append(out, session.Capture{Path: p, SQLite: true, Optional: cp.Optional})
			}
		}
		for _, cp := range m.Captures.Files {
			if p, err := Expand(cp.Path, vals); err == nil {
				out = append(out, session.Capture{Path: p, Optional: cp.Optional})
			}
		}
		return out
	}
	return a, nil
}
