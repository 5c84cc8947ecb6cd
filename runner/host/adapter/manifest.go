package adapter

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sandproof/sandproof/runner/host/session"
)

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("invalid adapter manifest")

// Manifest is one validated adapter manifest.
type Manifest struct {
	// Path is the file it was read from; Dir its directory (runtime files
	// and preparers resolve paths from it).
	Path string
	Dir  string
	// SHA256 is the hash of the manifest's bytes (the evidence's
	// adapter_sha256).
	SHA256 string

	Name        string
	Version     string
	Description string
	Runtime     Runtime
	Requires    []string
	// APIKeyEnv names the variable the harness reads its key from.
	APIKeyEnv string
	// Install is nil when the adapter has no install step.
	Install *Step
	Launch  Launch
	// VersionArgv, when not empty, prints the CLI's own version (run once
	// per case under warden, in the launch's environment, for the
	// evidence's provenance).
	VersionArgv []string
	// VersionDeadline bounds the version launch (seconds); 0 means
	// DefaultVersionDeadline. A CLI that lingers after printing its
	// version (Cline's --version, 20 s and more) is stopped at it and its
	// first line still kept.
	VersionDeadline float64
	State           State
	Captures        Captures
	Result          Result
	// Relay raises the model relay's limits for this adapter's cases;
	// zero fields keep the run's.
	Relay Relay
	// Scratch are the paths outside its session dir the harness writes
	// and the adapter owns (absolute, a glob only in the last element;
	// scratch.go): close removes them, verify checks they are gone.
	Scratch []string
	// Scenarios is the manifest's scenarios key (docs/adapters.md
	// scenarios): nil when it has none (certify then runs its challenge
	// only, unless --scenario names others), else one entry per scenario
	// it says something about; an empty map asks for every scenario with
	// their own deadlines.
	Scenarios map[string]ScenarioSpec
}

// ScenarioSpec is what a manifest says of one scenario. The names are
// not this package's: the scenarios are certify's (its registry, one file
// each), which refuses a manifest naming one it does not have, worded as
// this package words an unknown key (certify.CheckManifestScenarios).
type ScenarioSpec struct {
	// Line is the line of the scenario's key in the manifest, for that
	// refusal.
	Line int
	// Deadline replaces the scenario's own launch deadline (seconds); 0
	// keeps it.
	Deadline float64
	// Unsupported, when not "", is why the harness cannot run the
	// scenario: its cases are skipped with this reason.
	Unsupported string
}

// Relay is what the adapter's harness needs of the model relay beyond
// its defaults (docs/threat-model.md, The model relay).
type Relay struct {
	// RequestBytes is the largest request body the harness sends; 0
	// keeps the run's cap.
	RequestBytes int64
}

// MaxRelayRequestBytes is the largest request_bytes a manifest may ask.
const MaxRelayRequestBytes = 256 << 20

// Runtime says how the harness gets into the sandbox.
type Runtime struct {
	// Delivery is DeliveryUpload or DeliveryMount.
	Delivery string
	Files    []RuntimeFile
	// Prepare is nil when there is no preparer.
	Prepare *Prepare
}

// Delivery modes.
const (
	DeliveryUpload = "upload"
	DeliveryMount  = "mount"
)

// RuntimeFile is a host file or directory put under the runtime dir.
type RuntimeFile struct {
	Src string // absolute host path
	Dst string // relative to the runtime dir
	// Mode is the file mode; zero means the host file's own.
	Mode os.FileMode
}

// Prepare names a registered preparer and its options.
type Prepare struct {
	Name string
	With map[string]string
	// Node is the `with` node, for preparers that report line numbers.
	Node *yaml.Node
	Line int
}

// Step is a command with its environment and deadline.
type Step struct {
	Argv     []string
	Env      map[string]string
	Deadline float64
}

// Launch is the activation's step.
type Launch struct {
	Step
	Cwd  string
	Mode string // "events" or "direct"
}

// State is where the harness's private state lives.
type State struct {
	Env  map[string]string
	Dirs []string
}

// Captures are the files downloaded at close.
type Captures struct {
	SQLite []Capture
	Files  []Capture
}

// Capture is one declared capture.
type Capture struct {
	Name     string
	Path     string // template
	Optional bool
}

// Result says how to read the outcome.
type Result struct {
	From  string // "events", "sqlite:NAME" or "json:NAME"
	Query string
	// Records is the gjson path of the array of records in a json:NAME
	// capture (a trajectory file's "messages").
	Records string
	Success []Rule
	Failure []Rule
	Usage   []UsageRule
	Items   []ItemRule
	Gaps    []string
}

// Cond is one `where` entry: the gjson path must hold Value ("*": exist).
type Cond struct {
	Path  string
	Value string
}

// Rule matches records.
type Rule struct {
	Where   []Cond
	Message string
}

// UsageRule reads token counts from matching records.
type UsageRule struct {
	Where                            []Cond
	Input, Output, Cached, Reasoning string
}

// ItemRule counts output item types.
type ItemRule struct {
	Where []Cond
	Type  string
	Each  string
	Kind  string
	Map   map[string]string
}

// Placeholders are the names a template may use.
var Placeholders = []string{"prompt", "model_url", "model_origin", "model", "api_key_env", "session_dir", "task_dir", "home", "runtime_dir"}

// Requirements are the names `requires` may list. An absolute path is a
// requirement too (IsPathRequirement): that file must exist in the image,
// for a harness that runs a program by a fixed path (Cline's /bin/bash)
// where a program on PATH, which `bash` provides, is not enough.
var Requirements = []string{"glibc", "musl", "libstdc++", "libgcc", "bash", "python3", "sh"}

// pathRequirementRe is what a path requirement may be: absolute, of plain
// name characters (the probe is given the list comma-joined), bounded.
var pathRequirementRe = regexp.MustCompile(`^/[A-Za-z0-9._+-][A-Za-z0-9._+/-]{0,254}$`)

// IsPathRequirement says r names a file of the image (it begins with /)
// rather than one of Requirements.
func IsPathRequirement(r string) bool { return strings.HasPrefix(r, "/") }

// DefaultVersionDeadline bounds the version launch when the manifest
// gives no version_deadline; MaxVersionDeadline is the most it may give.
const (
	DefaultVersionDeadline = 30
	MaxVersionDeadline     = 300
)

// DefaultAPIKeyEnv is used when the manifest names none.
const DefaultAPIKeyEnv = "SANDPROOF_API_KEY"

var (
	nameRe    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	capNameRe = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)
	envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	secondsRe = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
)

// Load reads and validates the manifest at path.
func Load(path string) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read adapter manifest: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("read adapter manifest: %w", err)
	}
	return Parse(path, filepath.Dir(abs), data)
}

// Parse validates manifest bytes; name is used in errors, dir resolves
// relative paths.
func Parse(name, dir string, data []byte) (*Manifest, error) {
	sum := sha256.Sum256(data)
	d := &decoder{file: name}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%w: %s: empty document", ErrInvalid, name)
	}
	m := &Manifest{Path: name, Dir: dir, SHA256: hex.EncodeToString(sum[:]), APIKeyEnv: DefaultAPIKeyEnv}
	d.manifest(doc.Content[0], m)
	if len(d.errs) > 0 {
		return nil, fmt.Errorf("%w:\n%w", ErrInvalid, errors.Join(d.errs...))
	}
	return m, nil
}

type decoder struct {
	file string
	errs []error
}

func (d *decoder) errf(n *yaml.Node, key, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	msg := fmt.Sprintf(format, args...)
	if key != "" {
		msg = key + ": " + msg
	}
	d.errs = append(d.errs, fmt.Errorf("%s:%d: %s", d.file, line, msg))
}

// fields walks a mapping node (WalkMapping): each key must be known;
// required keys must be present. It returns false when n is not a
// mapping.
func (d *decoder) fields(n *yaml.Node, where string, required []string, handlers map[string]func(key string, v *yaml.Node)) bool {
	in := where
	if in == "" {
		in = "manifest"
	}
	return WalkMapping(n, where, required, handlers, func(is MappingIssue) {
		switch is.Kind {
		case NotMapping:
			d.errf(n, where, "want a mapping, got %s", kindName(n))
		case UnknownKey:
			d.errf(is.Node, "", "unknown key %q in %s (known: %s)", is.Name, in, strings.Join(is.Known, ", "))
		case GivenTwice:
			d.errf(is.Node, is.Path, "given twice")
		case MissingKey:
			d.errf(n, "", "missing required key %q in %s", is.Path, in)
		}
	})
}

// KindName says what a YAML node is, for errors ("a mapping", "a list",
// the quoted scalar, "nothing").
func KindName(n *yaml.Node) string { return kindName(n) }

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "a document"
}

func (d *decoder) str(key string, n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		d.errf(n, key, "want a string, got %s", kindName(n))
		return ""
	}
	return n.Value
}

func (d *decoder) template(key string, n *yaml.Node) string {
	s := d.str(key, n)
	if err := CheckTemplate(s); err != nil {
		d.errf(n, key, "%v", err)
	}
	return s
}

func (d *decoder) boolean(key string, n *yaml.Node) bool {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		b, err := strconv.ParseBool(n.Value)
		if err == nil {
			return b
		}
	}
	d.errf(n, key, "want true or false, got %s", kindName(n))
	return false
}

func (d *decoder) seconds(key string, n *yaml.Node) float64 {
	s := d.str(key, n)
	v, err := strconv.ParseFloat(s, 64)
	if !secondsRe.MatchString(s) || err != nil || v <= 0 || v > 31536000 {
		d.errf(n, key, "bad seconds %q (want a decimal number > 0 and <= 31536000)", s)
		return 0
	}
	return v
}

func (d *decoder) list(key string, n *yaml.Node, each func(key string, v *yaml.Node)) {
	if n.Kind != yaml.SequenceNode {
		d.errf(n, key, "want a list, got %s", kindName(n))
		return
	}
	for i, v := range n.Content {
		each(fmt.Sprintf("%s[%d]", key, i), v)
	}
}

func (d *decoder) strings(key string, n *yaml.Node, tmpl bool) []string {
	out := []string{}
	d.list(key, n, func(k string, v *yaml.Node) {
		if tmpl {
			out = append(out, d.template(k, v))
		} else {
			out = append(out, d.str(k, v))
		}
	})
	return out
}

// stringMap reads a mapping of strings; keys are kept in file order by the
// caller when it matters (it does not here).
func (d *decoder) stringMap(key string, n *yaml.Node, tmpl bool, keyOK func(string) bool) map[string]string {
	out := map[string]string{}
	if n.Kind != yaml.MappingNode {
		d.errf(n, key, "want a mapping, got %s", kindName(n))
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		kk := join(key, k.Value)
		if keyOK != nil && !keyOK(k.Value) {
			d.errf(k, kk, "bad name %q", k.Value)
			continue
		}
		if _, dup := out[k.Value]; dup {
			d.errf(k, kk, "given twice")
			continue
		}
		if tmpl {
			out[k.Value] = d.template(kk, v)
		} else {
			out[k.Value] = d.str(kk, v)
		}
	}
	return out
}

func (d *decoder) manifest(n *yaml.Node, m *Manifest) {
	var stateNode *yaml.Node
	d.fields(n, "", []string{"name", "version", "launch"}, map[string]func(string, *yaml.Node){
		"name": func(k string, v *yaml.Node) {
			m.Name = d.str(k, v)
			if m.Name != "" && !nameRe.MatchString(m.Name) {
				d.errf(v, k, "bad name %q (want [a-z0-9][a-z0-9._-]{0,63})", m.Name)
			}
		},
		"version":     func(k string, v *yaml.Node) { m.Version = d.str(k, v) },
		"description": func(k string, v *yaml.Node) { m.Description = d.str(k, v) },
		"runtime":     func(k string, v *yaml.Node) { d.runtime(k, v, m) },
		"requires":    func(k string, v *yaml.Node) { d.requires(k, v, m) },
		"api_key_env": func(k string, v *yaml.Node) {
			m.APIKeyEnv = d.str(k, v)
			if !envNameRe.MatchString(m.APIKeyEnv) {
				d.errf(v, k, "bad variable name %q", m.APIKeyEnv)
			}
		},
		"install": func(k string, v *yaml.Node) {
			s := &Step{}
			d.fields(v, k, []string{"argv", "deadline"}, map[string]func(string, *yaml.Node){
				"argv":     func(k string, v *yaml.Node) { s.Argv = d.argv(k, v) },
				"env":      func(k string, v *yaml.Node) { s.Env = d.env(k, v) },
				"deadline": func(k string, v *yaml.Node) { s.Deadline = d.seconds(k, v) },
			})
			m.Install = s
		},
		"launch":       func(k string, v *yaml.Node) { d.launch(k, v, m) },
		"version_argv": func(k string, v *yaml.Node) { m.VersionArgv = d.argv(k, v) },
		"version_deadline": func(k string, v *yaml.Node) {
			m.VersionDeadline = d.seconds(k, v)
			if m.VersionDeadline > MaxVersionDeadline {
				d.errf(v, k, "bad seconds %q (want at most %d: the version launch runs in every case)", v.Value, MaxVersionDeadline)
			}
		},
		"state":     func(k string, v *yaml.Node) { stateNode = v; d.state(k, v, m) },
		"captures":  func(k string, v *yaml.Node) { d.captures(k, v, m) },
		"result":    func(k string, v *yaml.Node) { d.result(k, v, m) },
		"relay":     func(k string, v *yaml.Node) { d.relay(k, v, m) },
		"scratch":   func(k string, v *yaml.Node) { d.scratch(k, v, m) },
		"scenarios": func(k string, v *yaml.Node) { d.scenarios(k, v, m) },
	})
	if m.VersionDeadline > 0 && len(m.VersionArgv) == 0 {
		d.errf(n, "version_deadline", "given without version_argv")
	}
	if stateNode == nil {
		m.State = DefaultState()
	}
	if m.Result.From == "" {
		m.Result.From = "events"
	}
	if name, ok := strings.CutPrefix(m.Result.From, "sqlite:"); ok {
		if !slices.ContainsFunc(m.Captures.SQLite, func(c Capture) bool { return c.Name == name }) {
			d.errf(n, "result.from", "names sqlite capture %q, which captures.sqlite does not declare", name)
		}
	}
	if name, ok := strings.CutPrefix(m.Result.From, "json:"); ok {
		if !slices.ContainsFunc(m.Captures.Files, func(c Capture) bool { return c.Name == name }) {
			d.errf(n, "result.from", "names file capture %q, which captures.files does not declare", name)
		}
	}
}

// VersionSeconds is the version launch's deadline in seconds.
func (m *Manifest) VersionSeconds() float64 {
	if m.VersionDeadline > 0 {
		return m.VersionDeadline
	}
	return DefaultVersionDeadline
}

// DefaultState is the state env used when a manifest gives none.
func DefaultState() State {
	env := session.XDGDefaults("{home}")
	env["HOME"] = "{home}"
	env["TMPDIR"] = "{home}/tmp"
	var dirs []string
	for _, v := range env {
		dirs = append(dirs, v)
	}
	slices.Sort(dirs)
	return State{Env: env, Dirs: dirs}
}

func (d *decoder) argv(k string, v *yaml.Node) []string {
	a := d.strings(k, v, true)
	if v.Kind == yaml.SequenceNode && len(a) == 0 {
		d.errf(v, k, "empty")
	}
	return a
}

func (d *decoder) env(k string, v *yaml.Node) map[string]string {
	e := d.stringMap(k, v, true, envNameRe.MatchString)
	if _, ok := e["WARDEN_LAUNCH"]; ok {
		d.errf(v, k, "may not set WARDEN_LAUNCH (only warden sets it)")
	}
	return e
}

// requires reads `requires`: known requirements, each once.
func (d *decoder) requires(k string, v *yaml.Node, m *Manifest) {
	d.list(k, v, func(k string, v *yaml.Node) {
		r := d.str(k, v)
		if IsPathRequirement(r) {
			if !pathRequirementRe.MatchString(r) || path.Clean(r) != r {
				d.errf(v, k, "bad path requirement %q (want a clean absolute path of letters, digits and ._+-/, at most 256 bytes)", r)
				return
			}
		} else if r != "" && !slices.Contains(Requirements, r) {
			d.errf(v, k, "unknown requirement %q (known: %s, or an absolute path the image must have)", r, strings.Join(Requirements, ", "))
			return
		}
		if !slices.Contains(m.Requires, r) {
			m.Requires = append(m.Requires, r)
		}
	})
}

// relay reads `relay`: the model relay's per-manifest limits.
func (d *decoder) relay(k string, v *yaml.Node, m *Manifest) {
	d.fields(v, k, nil, map[string]func(string, *yaml.Node){
		"request_bytes": func(k string, v *yaml.Node) {
			s := d.str(k, v)
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n < 1 || n > MaxRelayRequestBytes {
				d.errf(v, k, "bad byte count %q (want an integer 1..%d)", s, MaxRelayRequestBytes)
				return
			}
			m.Relay.RequestBytes = n
		},
	})
}

// scenarios reads `scenarios: {NAME: {deadline: S, unsupported: WHY}}`:
// each value a mapping (or nothing), each name once; whether certify has a
// scenario of that name is certify's to say (ScenarioSpec).
func (d *decoder) scenarios(k string, v *yaml.Node, m *Manifest) {
	m.Scenarios = map[string]ScenarioSpec{}
	handlers := map[string]func(string, *yaml.Node){}
	for i := 0; v.Kind == yaml.MappingNode && i+1 < len(v.Content); i += 2 {
		name, line := v.Content[i].Value, v.Content[i].Line
		if _, ok := handlers[name]; ok || v.Content[i].Kind != yaml.ScalarNode {
			continue // WalkMapping says it is given twice
		}
		handlers[name] = func(k string, v *yaml.Node) {
			sp := ScenarioSpec{Line: line}
			if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
				m.Scenarios[name] = sp
				return
			}
			d.fields(v, k, nil, map[string]func(string, *yaml.Node){
				"deadline": func(k string, v *yaml.Node) { sp.Deadline = d.seconds(k, v) },
				"unsupported": func(k string, v *yaml.Node) {
					if sp.Unsupported = strings.TrimSpace(d.str(k, v)); sp.Unsupported == "" {
						d.errf(v, k, "want the reason the harness cannot run the scenario, got an empty string")
					}
				},
			})
			m.Scenarios[name] = sp
		}
	}
	d.fields(v, k, nil, handlers)
}

func (d *decoder) runtime(k string, v *yaml.Node, m *Manifest) {
	m.Runtime.Delivery = DeliveryUpload
	d.fields(v, k, nil, map[string]func(string, *yaml.Node){
		"delivery": func(k string, v *yaml.Node) {
			m.Runtime.Delivery = d.str(k, v)
			if m.Runtime.Delivery != DeliveryUpload && m.Runtime.Delivery != DeliveryMount {
				d.errf(v, k, "bad value %q (want upload or mount)", m.Runtime.Delivery)
			}
		},
		"files": func(k string, v *yaml.Node) {
			d.list(k, v, func(k string, v *yaml.Node) { m.Runtime.Files = append(m.Runtime.Files, d.runtimeFile(k, v, m.Dir)) })
		},
		"prepare": func(k string, v *yaml.Node) { m.Runtime.Prepare = d.prepare(k, v, m.Dir) },
	})
}

// runtimeFile reads one of `runtime.files`; a relative src is below dir
// (the manifest's), and dst defaults to src's base name.
func (d *decoder) runtimeFile(k string, v *yaml.Node, dir string) RuntimeFile {
	var f RuntimeFile
	d.fields(v, k, []string{"src"}, map[string]func(string, *yaml.Node){
		"src": func(k string, v *yaml.Node) {
			s := d.str(k, v)
			if s != "" && !filepath.IsAbs(s) {
				s = filepath.Join(dir, s)
			}
			f.Src = s
		},
		"dst": func(k string, v *yaml.Node) {
			f.Dst = d.str(k, v)
			if f.Dst != "" && (filepath.IsAbs(f.Dst) || strings.HasPrefix(filepath.Clean(f.Dst), "..")) {
				d.errf(v, k, "%q leaves the runtime dir (want a relative path inside it)", f.Dst)
			}
		},
		"mode": func(k string, v *yaml.Node) {
			s := d.str(k, v)
			mode, err := strconv.ParseUint(s, 8, 32)
			if err != nil || mode > 0o7777 {
				d.errf(v, k, "bad mode %q (want an octal string such as \"0755\")", s)
			}
			f.Mode = os.FileMode(mode)
		},
	})
	if f.Dst == "" {
		f.Dst = filepath.Base(f.Src)
		// A src of "/" (or ".") has no usable base name.
		if f.Dst == "/" || f.Dst == "." || f.Dst == ".." {
			d.errf(v, k, "src %q gives no file name to put in the runtime dir (set dst)", f.Src)
		}
	}
	return f
}

// prepare reads `runtime.prepare`: a registered preparer's name and its
// `with` block, which the preparer checks itself when it has a Check
// (dir resolves its relative paths).
func (d *decoder) prepare(k string, v *yaml.Node, dir string) *Prepare {
	p := &Prepare{Line: v.Line}
	var spec PreparerSpec
	known := false
	var withKey string
	d.fields(v, k, []string{"name"}, map[string]func(string, *yaml.Node){
		"name": func(k string, v *yaml.Node) {
			p.Name = d.str(k, v)
			if p.Name == "" {
				return
			}
			if spec, known = lookupPreparer(p.Name); !known {
				d.errf(v, k, "no preparer %q is registered (known: %s)", p.Name, strings.Join(preparerNames(), ", "))
			}
		},
		"with": func(k string, v *yaml.Node) { p.Node = v; withKey = k },
	})
	if p.Node != nil {
		if known && spec.Check != nil {
			// A structured block: the preparer validates it
			// (nested values allowed); With keeps its scalars.
			p.With = scalars(p.Node)
			for _, e := range spec.Check(dir, p.Node) {
				d.errs = append(d.errs, fmt.Errorf("%s:%d: %s: %s", d.file, e.Line, e.Key, e.Msg))
			}
		} else {
			p.With = d.stringMap(withKey, p.Node, false, nil)
		}
	} else if known && spec.Check != nil {
		for _, e := range spec.Check(dir, nil) {
			d.errs = append(d.errs, fmt.Errorf("%s:%d: %s: %s", d.file, v.Line, e.Key, e.Msg))
		}
	}
	return p
}

// scalars returns the scalar values of a mapping node (nested ones left
// out).
func scalars(n *yaml.Node) map[string]string {
	out := map[string]string{}
	if n == nil || n.Kind != yaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if v := n.Content[i+1]; v.Kind == yaml.ScalarNode && v.Tag != "!!null" {
			out[n.Content[i].Value] = v.Value
		}
	}
	return out
}

func (d *decoder) launch(k string, v *yaml.Node, m *Manifest) {
	m.Launch.Mode = "events"
	m.Launch.Cwd = "{task_dir}"
	d.fields(v, k, []string{"argv", "deadline"}, map[string]func(string, *yaml.Node){
		"argv":     func(k string, v *yaml.Node) { m.Launch.Argv = d.argv(k, v) },
		"env":      func(k string, v *yaml.Node) { m.Launch.Env = d.env(k, v) },
		"deadline": func(k string, v *yaml.Node) { m.Launch.Deadline = d.seconds(k, v) },
		"cwd":      func(k string, v *yaml.Node) { m.Launch.Cwd = d.template(k, v) },
		"mode": func(k string, v *yaml.Node) {
			m.Launch.Mode = d.str(k, v)
			if m.Launch.Mode != "events" && m.Launch.Mode != "direct" {
				d.errf(v, k, "bad value %q (want events or direct)", m.Launch.Mode)
			}
		},
	})
}

// inside reports whether template t expands to a path under one of the
// given placeholders' directories.
func inside(t string, roots ...string) bool {
	for _, r := range roots {
		p := "{" + r + "}"
		if t == p || strings.HasPrefix(t, p+"/") && !strings.Contains(t, "/../") && !strings.HasSuffix(t, "/..") {
			return true
		}
	}
	return false
}

func (d *decoder) state(k string, v *yaml.Node, m *Manifest) {
	var dirsGiven bool
	d.fields(v, k, nil, map[string]func(string, *yaml.Node){
		"env": func(k string, v *yaml.Node) {
			m.State.Env = d.env(k, v)
			for i := 0; i+1 < len(v.Content); i += 2 {
				val := m.State.Env[v.Content[i].Value]
				if val != "" && !inside(val, "session_dir", "home") {
					d.errf(v.Content[i+1], join(k, v.Content[i].Value), "%q is not inside {session_dir} (private state must be removed with the session)", val)
				}
			}
		},
		"dirs": func(k string, v *yaml.Node) {
			dirsGiven = true
			m.State.Dirs = d.strings(k, v, true)
			for i, dir := range m.State.Dirs {
				if dir != "" && !inside(dir, "session_dir", "home") {
					d.errf(v.Content[i], fmt.Sprintf("%s[%d]", k, i), "%q is not inside {session_dir}", dir)
				}
			}
		},
	})
	if !dirsGiven {
		for _, val := range m.State.Env {
			m.State.Dirs = append(m.State.Dirs, val)
		}
		slices.Sort(m.State.Dirs)
	}
}

func (d *decoder) captures(k string, v *yaml.Node, m *Manifest) {
	names := map[string]bool{}
	one := func(k string, v *yaml.Node) Capture {
		var c Capture
		d.fields(v, k, []string{"name", "path"}, map[string]func(string, *yaml.Node){
			"name": func(k string, v *yaml.Node) {
				c.Name = d.str(k, v)
				if !capNameRe.MatchString(c.Name) {
					d.errf(v, k, "bad name %q (want [a-z0-9_-]+)", c.Name)
				} else if names[c.Name] {
					d.errf(v, k, "capture name %q used twice", c.Name)
				}
				names[c.Name] = true
			},
			"path": func(k string, v *yaml.Node) {
				c.Path = d.template(k, v)
				if c.Path != "" && !inside(c.Path, "session_dir", "home", "task_dir") {
					d.errf(v, k, "%q is not inside {session_dir} or {task_dir}", c.Path)
				}
			},
			"optional": func(k string, v *yaml.Node) { c.Optional = d.boolean(k, v) },
		})
		return c
	}
	d.fields(v, k, nil, map[string]func(string, *yaml.Node){
		"sqlite": func(k string, v *yaml.Node) {
			d.list(k, v, func(k string, v *yaml.Node) { m.Captures.SQLite = append(m.Captures.SQLite, one(k, v)) })
		},
		"files": func(k string, v *yaml.Node) {
			d.list(k, v, func(k string, v *yaml.Node) { m.Captures.Files = append(m.Captures.Files, one(k, v)) })
		},
	})
}

func (d *decoder) where(k string, v *yaml.Node) []Cond {
	mp := d.stringMap(k, v, false, nil)
	var out []Cond
	if v.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(v.Content); i += 2 {
			p := v.Content[i].Value
			if val, ok := mp[p]; ok {
				out = append(out, Cond{Path: p, Value: val})
			}
		}
	}
	return out
}

func (d *decoder) result(k string, v *yaml.Node, m *Manifest) {
	r := &m.Result
	rules := func(k string, v *yaml.Node) []Rule {
		var out []Rule
		d.list(k, v, func(k string, v *yaml.Node) {
			var ru Rule
			d.fields(v, k, []string{"where"}, map[string]func(string, *yaml.Node){
				"where":   func(k string, v *yaml.Node) { ru.Where = d.where(k, v) },
				"message": func(k string, v *yaml.Node) { ru.Message = d.str(k, v) },
			})
			out = append(out, ru)
		})
		return out
	}
	d.fields(v, k, nil, map[string]func(string, *yaml.Node){
		"from": func(k string, v *yaml.Node) {
			r.From = d.str(k, v)
			if r.From != "events" && !strings.HasPrefix(r.From, "sqlite:") && !strings.HasPrefix(r.From, "json:") {
				d.errf(v, k, "bad value %q (want events, sqlite:NAME or json:NAME)", r.From)
			}
		},
		"query":   func(k string, v *yaml.Node) { r.Query = d.str(k, v) },
		"records": func(k string, v *yaml.Node) { r.Records = d.str(k, v) },
		"success": func(k string, v *yaml.Node) { r.Success = rules(k, v) },
		"failure": func(k string, v *yaml.Node) { r.Failure = rules(k, v) },
		"usage": func(k string, v *yaml.Node) {
			d.list(k, v, func(k string, v *yaml.Node) {
				var u UsageRule
				d.fields(v, k, []string{"where"}, map[string]func(string, *yaml.Node){
					"where":     func(k string, v *yaml.Node) { u.Where = d.where(k, v) },
					"input":     func(k string, v *yaml.Node) { u.Input = d.str(k, v) },
					"output":    func(k string, v *yaml.Node) { u.Output = d.str(k, v) },
					"cached":    func(k string, v *yaml.Node) { u.Cached = d.str(k, v) },
					"reasoning": func(k string, v *yaml.Node) { u.Reasoning = d.str(k, v) },
				})
				r.Usage = append(r.Usage, u)
			})
		},
		"items": func(k string, v *yaml.Node) {
			d.list(k, v, func(k string, v *yaml.Node) {
				var it ItemRule
				d.fields(v, k, []string{"where"}, map[string]func(string, *yaml.Node){
					"where": func(k string, v *yaml.Node) { it.Where = d.where(k, v) },
					"type":  func(k string, v *yaml.Node) { it.Type = d.str(k, v) },
					"each":  func(k string, v *yaml.Node) { it.Each = d.str(k, v) },
					"kind":  func(k string, v *yaml.Node) { it.Kind = d.str(k, v) },
					"map":   func(k string, v *yaml.Node) { it.Map = d.stringMap(k, v, false, nil) },
				})
				if (it.Type == "") == (it.Each == "") {
					d.errf(v, k, "want exactly one of type or each")
				}
				if it.Each != "" && it.Kind == "" {
					d.errf(v, k, "each needs kind")
				}
				r.Items = append(r.Items, it)
			})
		},
		"gaps": func(k string, v *yaml.Node) { r.Gaps = d.strings(k, v, false) },
	})
	if strings.HasPrefix(r.From, "sqlite:") && r.Query == "" {
		d.errf(v, k, "from %q needs a query", r.From)
	}
	if strings.HasPrefix(r.From, "json:") && r.Records == "" {
		d.errf(v, k, "from %q needs records (the gjson path of its array of records)", r.From)
	}
}

// CheckTemplate reports the first unknown or malformed placeholder in s.
func CheckTemplate(s string) error {
	_, err := expand(s, nil)
	return err
}

// Expand replaces placeholders in s with vals; {{ and }} are literal braces.
// Unknown placeholders are an error.
func Expand(s string, vals map[string]string) (string, error) {
	return expand(s, vals)
}

func expand(s string, vals map[string]string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '{' && i+1 < len(s) && s[i+1] == '{':
			b.WriteByte('{')
			i++
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			b.WriteByte('}')
			i++
		case c == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("unclosed placeholder in %q (write {{ for a literal brace)", s)
			}
			name := s[i+1 : i+end]
			if !slices.Contains(Placeholders, name) {
				return "", fmt.Errorf("unknown placeholder %q (known: {%s})", "{"+name+"}", strings.Join(Placeholders, "}, {"))
			}
			if vals != nil {
				v, ok := vals[name]
				if !ok {
					return "", fmt.Errorf("placeholder {%s} has no value here", name)
				}
				b.WriteString(v)
			}
			i += end
		case c == '}':
			return "", fmt.Errorf("stray } in %q (write }} for a literal brace)", s)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
