package runtimes

import (
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sandproof/sandproof/runner/host/adapter"
)

// WithKey is where every kind's block is in a manifest.
const WithKey = "runtime.prepare.with"

var (
	hex64Re = regexp.MustCompile(`^[0-9a-f]{64}$`)
	envRe   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// WithParser reads a kind's with block and collects its problems, each at
// the line of the node it is about: every kind's parser embeds it, so the
// same mistake reads the same in every kind (docs/add-runtime-kind.md).
type WithParser struct {
	Errs []adapter.FieldError
}

// Errf records a problem of key at n's line (0 for none).
func (p *WithParser) Errf(n *yaml.Node, key, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	p.Errs = append(p.Errs, adapter.FieldError{Line: line, Key: key, Msg: fmt.Sprintf(format, args...)})
}

// Str is n's string value; anything but a non-null scalar is an error.
func (p *WithParser) Str(key string, n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.Errf(n, key, "want a string, got %s", adapter.KindName(n))
		return ""
	}
	return n.Value
}

// Mapping walks a mapping node with one handler per known key
// (adapter.WalkMapping); unknown and repeated keys and missing required
// ones are errors.
func (p *WithParser) Mapping(key string, n *yaml.Node, required []string, h map[string]func(k string, v *yaml.Node)) {
	adapter.WalkMapping(n, key, required, h, func(is adapter.MappingIssue) {
		switch is.Kind {
		case adapter.NotMapping:
			p.Errf(n, key, "want a mapping, got %s", adapter.KindName(n))
		case adapter.UnknownKey:
			p.Errf(is.Node, key, "unknown key %q (known: %s)", is.Name, strings.Join(is.Known, ", "))
		case adapter.GivenTwice:
			p.Errf(is.Node, is.Path, "given twice")
		case adapter.MissingKey:
			p.Errf(n, key, "missing required key %q", is.Name)
		}
	})
}

// SHA is a sha256 in 64 lower-case hex digits.
func (p *WithParser) SHA(key string, n *yaml.Node) string {
	s := p.Str(key, n)
	if s != "" && !hex64Re.MatchString(s) {
		p.Errf(n, key, "bad sha256 %q (want 64 lower-case hex digits)", s)
	}
	return s
}

// Bool is true or false.
func (p *WithParser) Bool(key string, n *yaml.Node) bool {
	s := p.Str(key, n)
	if s != "" && s != "true" && s != "false" {
		p.Errf(n, key, "want true or false, got %q", s)
	}
	return s == "true"
}

// Strings is a list of strings (version_args).
func (p *WithParser) Strings(k string, v *yaml.Node) []string {
	if v.Kind != yaml.SequenceNode {
		p.Errf(v, k, "want a list, got %s", adapter.KindName(v))
		return nil
	}
	args := []string{}
	for i, a := range v.Content {
		args = append(args, p.Str(fmt.Sprintf("%s[%d]", k, i), a))
	}
	return args
}

// Env is a mapping of variable names to strings (version_env); nil when
// it is not a mapping.
func (p *WithParser) Env(k string, v *yaml.Node) map[string]string {
	if v.Kind != yaml.MappingNode {
		p.Errf(v, k, "want a mapping, got %s", adapter.KindName(v))
		return nil
	}
	env := map[string]string{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		name := v.Content[i].Value
		if !envRe.MatchString(name) {
			p.Errf(v.Content[i], k, "bad variable name %q", name)
		}
		env[name] = p.Str(k+"."+name, v.Content[i+1])
	}
	return env
}

// FieldErrors joins errs into one error ("" kind prefix), for a Plan that
// meets a block Check would have refused.
func FieldErrors(kind string, errs []adapter.FieldError) error {
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, fmt.Sprintf("line %d: %s: %s", e.Line, e.Key, e.Msg))
	}
	return fmt.Errorf("%s: %s", kind, strings.Join(msgs, "; "))
}
