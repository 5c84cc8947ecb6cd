package adapter_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/runner/host/adapter"
)

func TestFixtureManifestsLoad(t *testing.T) {
	files, _ := filepath.Glob("../../../fixtures/adapters/*.yaml")
	if len(files) != 12 {
		t.Fatalf("%d fixture manifests, want 12", len(files))
	}
	for _, f := range files {
		m, err := adapter.Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(m.SHA256) != 64 || m.Launch.Deadline <= 0 || len(m.Launch.Argv) == 0 {
			t.Errorf("%s: %+v", f, m)
		}
		// Every fixture that runs the mini-agent names its version.
		if m.Runtime.Prepare != nil && (len(m.VersionArgv) != 2 || m.VersionArgv[1] != "--version") {
			t.Errorf("%s: version_argv %q", f, m.VersionArgv)
		}
	}
}

const good = `name: x
version: "1"
launch:
  argv: ["{runtime_dir}/bin/x", "{prompt}"]
  deadline: 60
`

func TestManifestErrorsNameKeyAndLine(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown key", good + "verison: 2\n", `x.yaml:6: unknown key "verison" in manifest`},
		{"unknown nested key", strings.Replace(good, "  deadline: 60", "  deadline: 60\n  modee: events", 1), `x.yaml:6: unknown key "modee" in launch`},
		{"missing field", "name: x\nversion: \"1\"\n", `x.yaml:1: missing required key "launch" in manifest`},
		{"missing nested", "name: x\nversion: \"1\"\nlaunch:\n  argv: [a]\n", `x.yaml:4: missing required key "launch.deadline"`},
		{"bad placeholder", strings.Replace(good, "{prompt}", "{promt}", 1), `x.yaml:4: launch.argv[1]: unknown placeholder "{promt}"`},
		{"unclosed", strings.Replace(good, "{prompt}", "{prompt", 1), `x.yaml:4: launch.argv[1]: unclosed placeholder`},
		{"bad deadline", strings.Replace(good, "deadline: 60", "deadline: 1e3", 1), `x.yaml:5: launch.deadline: bad seconds "1e3"`},
		{"bad mode", strings.Replace(good, "  deadline: 60", "  deadline: 60\n  mode: stream", 1), `x.yaml:6: launch.mode: bad value "stream"`},
		{"unknown requirement", good + "requires: [glibc, gnu]\n", `x.yaml:6: requires[1]: unknown requirement "gnu"`},
		{"relative path requirement", good + "requires: [bin/bash]\n", `requires[0]: unknown requirement "bin/bash"`},
		{"unclean path requirement", good + "requires: [/bin/../etc/passwd]\n", `requires[0]: bad path requirement "/bin/../etc/passwd"`},
		{"path requirement with a comma", good + "requires: [\"/bin/a,b\"]\n", `requires[0]: bad path requirement "/bin/a,b"`},
		{"version deadline without argv", good + "version_deadline: 5\n", `version_deadline: given without version_argv`},
		{"version deadline too long", good + "version_argv: [x]\nversion_deadline: 301\n", `version_deadline: bad seconds "301" (want at most 300`},
		{"unknown preparer", good + "runtime:\n  prepare:\n    name: pip\n", `x.yaml:8: runtime.prepare.name: no preparer "pip"`},
		{"state outside session", good + "state:\n  env:\n    HOME: /root\n", `x.yaml:8: state.env.HOME: "/root" is not inside {session_dir}`},
		{"capture outside", good + "captures:\n  files:\n    - {name: a, path: /etc/passwd}\n", `x.yaml:8: captures.files[0].path: "/etc/passwd" is not inside`},
		{"result names no capture", good + "result:\n  from: sqlite:db\n  query: SELECT 1\n", `result.from: names sqlite capture "db"`},
		{"result names no file capture", good + "result:\n  from: json:traj\n  records: messages\n", `result.from: names file capture "traj"`},
		{"json result without records", good + "captures:\n  files:\n    - {name: traj, path: \"{home}/t.json\"}\nresult:\n  from: json:traj\n", `needs records`},
		{"result from an unknown source", good + "result:\n  from: yaml:x\n", `want events, sqlite:NAME or json:NAME`},
		{"relay bytes not a number", good + "relay:\n  request_bytes: 8m\n", `x.yaml:7: relay.request_bytes: bad byte count "8m"`},
		{"relay bytes too large", good + "relay:\n  request_bytes: 268435457\n", `relay.request_bytes: bad byte count "268435457"`},
		{"relay unknown key", good + "relay:\n  concurrent: 4\n", `unknown key "concurrent" in relay`},
		{"scenario unknown key", good + "scenarios:\n  timeout:\n    deadlien: 20\n", `x.yaml:8: unknown key "deadlien" in scenarios.timeout`},
		{"scenario bad deadline", good + "scenarios:\n  cancel: {deadline: -1}\n", `x.yaml:7: scenarios.cancel.deadline: bad seconds "-1"`},
		{"scenario empty reason", good + "scenarios:\n  borrowed: {unsupported: \" \"}\n", `x.yaml:7: scenarios.borrowed.unsupported: want the reason`},
		{"scenarios not a mapping", good + "scenarios: [timeout]\n", `x.yaml:6: scenarios: want a mapping, got a list`},
		{"warden launch env", strings.Replace(good, "  deadline: 60", "  deadline: 60\n  env: {WARDEN_LAUNCH: x}", 1), `launch.env: may not set WARDEN_LAUNCH`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := adapter.Parse("x.yaml", t.TempDir(), []byte(tc.doc))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, adapter.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error:\n%v\nwant it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := adapter.Parse("x.yaml", t.TempDir(), []byte(good)); err != nil {
		t.Fatalf("the base document is refused: %v", err)
	}
}

// A path requirement and version_deadline are kept as given; without
// version_deadline the version launch gets the default.
func TestPathRequirementAndVersionDeadline(t *testing.T) {
	m, err := adapter.Parse("x.yaml", t.TempDir(), []byte(good+"requires: [bash, /bin/bash]\nversion_argv: [x, --version]\nversion_deadline: 5\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Requires) != 2 || m.Requires[1] != "/bin/bash" || !adapter.IsPathRequirement(m.Requires[1]) || adapter.IsPathRequirement(m.Requires[0]) {
		t.Errorf("requires %q", m.Requires)
	}
	if m.VersionSeconds() != 5 {
		t.Errorf("version seconds %v, want 5", m.VersionSeconds())
	}
	m, err = adapter.Parse("x.yaml", t.TempDir(), []byte(good+"version_argv: [x, --version]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m.VersionSeconds() != adapter.DefaultVersionDeadline {
		t.Errorf("version seconds %v, want the default %d", m.VersionSeconds(), adapter.DefaultVersionDeadline)
	}
}

// relay.request_bytes raises the relay's body cap for the adapter's
// cases; without it the run's cap holds (0).
func TestManifestRelayRequestBytes(t *testing.T) {
	m, err := adapter.Parse("x.yaml", t.TempDir(), []byte(good+"relay:\n  request_bytes: 33554432\n"))
	if err != nil || m.Relay.RequestBytes != 32<<20 {
		t.Fatalf("relay %+v, %v; want 32 MiB", m.Relay, err)
	}
	if m, err = adapter.Parse("x.yaml", t.TempDir(), []byte(good)); err != nil || m.Relay.RequestBytes != 0 {
		t.Fatalf("relay %+v, %v; want 0 without the key", m.Relay, err)
	}
}

// scenarios: a manifest without the key has nil Scenarios (certify runs
// its challenge only); with it, each named scenario's deadline and
// reason, and a name given nothing is there with neither.
func TestManifestScenarios(t *testing.T) {
	m, err := adapter.Parse("x.yaml", t.TempDir(), []byte(good))
	if err != nil || m.Scenarios != nil {
		t.Fatalf("scenarios %v, %v; want nil without the key", m.Scenarios, err)
	}
	doc := good + "scenarios:\n  timeout: {deadline: 20}\n  borrowed: {unsupported: no service tree}\n  cancel:\n"
	if m, err = adapter.Parse("x.yaml", t.TempDir(), []byte(doc)); err != nil {
		t.Fatal(err)
	}
	// Any name parses (the scenarios are certify's, which refuses one it
	// has not: certify.CheckManifestScenarios); each keeps its key's line.
	doc += "  tiemout: {}\n"
	if m, err = adapter.Parse("x.yaml", t.TempDir(), []byte(doc)); err != nil {
		t.Fatal(err)
	}
	want := map[string]adapter.ScenarioSpec{"timeout": {Line: 7, Deadline: 20}, "borrowed": {Line: 8, Unsupported: "no service tree"}, "cancel": {Line: 9}, "tiemout": {Line: 10}}
	if len(m.Scenarios) != len(want) {
		t.Fatalf("scenarios %v, want %v", m.Scenarios, want)
	}
	for k, w := range want {
		if got, ok := m.Scenarios[k]; !ok || got != w {
			t.Errorf("scenarios[%s] = %+v (%t), want %+v", k, got, ok, w)
		}
	}
	if m, err = adapter.Parse("x.yaml", t.TempDir(), []byte(good+"scenarios: {}\n")); err != nil || m.Scenarios == nil || len(m.Scenarios) != 0 {
		t.Fatalf("scenarios: {} gave %v, %v; want an empty map", m.Scenarios, err)
	}
}

func TestExpand(t *testing.T) {
	got, err := adapter.Expand("{{literal}} {home}/x --p={prompt}", map[string]string{"home": "/h", "prompt": "a {b} c"})
	if err != nil || got != "{literal} /h/x --p=a {b} c" {
		t.Fatalf("%q, %v", got, err)
	}
	if _, err := adapter.Expand("{model}", map[string]string{}); err == nil {
		t.Fatal("a placeholder without a value expanded")
	}
}

func TestSessionAdapterParams(t *testing.T) {
	m, err := adapter.Load("../../../fixtures/adapters/miniagent-opencode.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, err := m.Session(adapter.Context{ModelURL: "http://127.0.0.1:1/v1", Model: "fake-model", TaskDir: "/task"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Launch(sessionEnv())
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(p.Argv, " ")
	for _, want := range []string{"/s/runtime/bin/miniagent", "--db /s/home/.local/share/opencode/opencode.db", "--prompt do it", "http://127.0.0.1:1/v1", "--api-key-env FAKE_API_KEY"} {
		if !strings.Contains(joined, want) {
			t.Errorf("argv %q lacks %q", joined, want)
		}
	}
	if p.Env["XDG_DATA_HOME"] != "/s/home/.local/share" || p.Env["HOME"] != "/s/home" || p.Cwd != "/task" {
		t.Errorf("env %v cwd %q", p.Env, p.Cwd)
	}
	if len(p.InheritEnv) != 1 || p.InheritEnv[0] != "FAKE_API_KEY" {
		t.Errorf("inherit_env %v: the key must come from the environment only", p.InheritEnv)
	}
	caps := a.Captures(sessionEnv())
	if len(caps) != 1 || !caps[0].SQLite || caps[0].Path != "/s/home/.local/share/opencode/opencode.db" {
		t.Errorf("captures %+v", caps)
	}
}

// {model_origin} is {model_url} without its path: Claude Code's
// ANTHROPIC_BASE_URL gets "/v1/messages" appended by its SDK.
func TestModelOriginDropsThePath(t *testing.T) {
	m, err := adapter.Load("../../../fixtures/adapters/miniagent-opencode.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for url, want := range map[string]string{"http://127.0.0.1:4321/v1": "http://127.0.0.1:4321", "http://[::1]:80/api/v1/": "http://[::1]:80"} {
		v := m.Values(adapter.Context{ModelURL: url, Model: "m", TaskDir: "/task"}, "/s", "/s/home", "p")
		if v["model_origin"] != want || v["model_url"] != url {
			t.Errorf("model_url %q: model_origin %q; want %q", url, v["model_origin"], want)
		}
		if got, err := adapter.Expand("{model_origin}/v1/messages", v); err != nil || got != want+"/v1/messages" {
			t.Errorf("expand: %q, %v", got, err)
		}
	}
}

// A key is read only as written: an alias key (whose node holds its
// anchor's name, not the value it stands for) is refused, in scenarios
// (where *challenge would have read as the challenge scenario) as
// anywhere (red team rt36).
func TestManifestAliasKeyIsRefused(t *testing.T) {
	doc := good + "description: &challenge d\nscenarios:\n  *challenge : {unsupported: no}\n"
	_, err := adapter.Parse("x.yaml", t.TempDir(), []byte(doc))
	if err == nil || !strings.Contains(err.Error(), `x.yaml:8: unknown key "*challenge" in scenarios`) {
		t.Errorf("an alias key in scenarios: %v; want refused at its line", err)
	}
	doc = "&n name: x\nversion: \"1\"\n*n : y\nlaunch:\n  argv: [x]\n  deadline: 60\n"
	if _, err := adapter.Parse("x.yaml", t.TempDir(), []byte(doc)); err == nil || !strings.Contains(err.Error(), `unknown key "*n" in manifest`) {
		t.Errorf("an alias key in the manifest: %v; want refused", err)
	}
	// Positive control: the same manifest with the key written out.
	if _, err := adapter.Parse("x.yaml", t.TempDir(), []byte(good+"description: &challenge d\nscenarios:\n  challenge: {unsupported: no}\n")); err != nil {
		t.Errorf("the key written out is refused: %v", err)
	}
}
