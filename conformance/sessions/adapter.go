package sessions

import (
	"sync"

	"github.com/sandproof/sandproof/runner/host/session"
	"github.com/sandproof/sandproof/runner/warden/harness"
)

// Deliverable is where the fixture harness writes its token (contract §7.2).
const Deliverable = TaskDir + "/deliverable.txt"

// Files the harness writes in the launch's run dir; close downloads them
// with the run dir: the adversary's record, and the PATH the harness got.
const (
	RecordName = "adversary.record"
	PathName   = "harness-path.txt"
)

// FixtureAdapter is a small harness adapter for full sessions. It needs
// bash, so on an image without one the session provides bash-static from
// its private bin. The harness is `bash -c`: a builtin writes the prompt (a
// token) to Deliverable and its PATH to the run dir, then bash execs the static adversary fixture
// (uploaded as an adapter file), which double-forks a daemon and exits 0,
// so warden's cleanup has a process to stop. Nothing of the image is run
// but bash itself; PATH is inherited, so a tripwire on the container's PATH
// is on the harness's too.
type FixtureAdapter struct {
	mu   sync.Mutex
	envs []session.Env
}

// Adapter returns the session.Adapter, uploading the adversary from the
// host path adversary.
func (f *FixtureAdapter) Adapter(adversary string) session.Adapter {
	return session.Adapter{
		Name:      "integrity-fixture",
		NeedsBash: true,
		Files:     map[string]session.File{"fixture/adversary": {HostPath: adversary, Mode: 0o755}},
		Launch: func(e session.Env) (harness.Params, error) {
			f.mu.Lock()
			f.envs = append(f.envs, e)
			f.mu.Unlock()
			return harness.Params{
				Argv: []string{"bash", "-c",
					`printf '%s' "$1" > ` + Deliverable + ` && printf '%s' "$PATH" > "$4" && exec "$2" --record "$3" daemon exit 0`,
					"harness", e.Prompt, e.Dir + "/fixture/adversary", e.RunDir + "/" + RecordName, e.RunDir + "/" + PathName},
				Cwd:        TaskDir,
				Env:        map[string]string{"HOME": e.Home},
				InheritEnv: []string{"PATH"},
			}, nil
		},
	}
}

// Launches returns the environments the session built launches with.
func (f *FixtureAdapter) Launches() []session.Env {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]session.Env(nil), f.envs...)
}
