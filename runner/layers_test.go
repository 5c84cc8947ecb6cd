package runner_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
)

const module = "github.com/sandproof/sandproof/"

// inSandbox is the code that runs inside a sandbox as root or beside the
// harness: it must stay static and small and must never pull in the host
// side (Docker clients, SQLite, reports) by an innocent-looking import.
// runner/rmtree is the removal helper the session uploads into the
// sandbox, and runner/confine the confined primitive it and the agent
// share; the session agent's host end is runner/host/agenthost, not in
// this group.
func inSandbox(p string) bool {
	for _, pre := range []string{"runner/warden/", "cmd/warden", "runner/probe", "cmd/probe", "runner/witness", "runner/agent", "runner/agent/", "cmd/sandagent", "runner/rmtree", "runner/confine"} {
		if p == strings.TrimSuffix(pre, "/") || strings.HasPrefix(p, pre) && strings.HasSuffix(pre, "/") {
			return true
		}
	}
	return false
}

// testOnly is code only tests may import: the suite, the fixtures, the
// test support, fakeproc's simulated kernel and the provider contract suite.
func testOnly(p string) bool {
	for _, pre := range []string{"conformance", "fixtures", "internal/testsupport", "fakeproc", "runner/host/provider/providertest"} {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

func xsys(p string) bool { return p == "golang.org/x/sys" || strings.HasPrefix(p, "golang.org/x/sys/") }

// pkg is one package of the import graph: its path (the module's own
// without the module prefix), whether the standard library holds it, and
// what its non-test files import.
type pkg struct {
	std     bool
	imports []string
}

// rule is one import restriction: a package that from selects may not
// import one that forbids selects.
type rule struct {
	name    string
	from    func(string) bool
	forbids func(imp string, g map[string]pkg) bool
}

var rules = []rule{
	{"in-sandbox code imports only the standard library, golang.org/x/sys and the module", inSandbox,
		func(imp string, g map[string]pkg) bool { return !g[imp].std && !xsys(imp) && !isModule(imp, g) }},
	{"in-sandbox code imports no host (or other non-sandbox) package", inSandbox,
		func(imp string, g map[string]pkg) bool { return isModule(imp, g) && !inSandbox(imp) }},
	{"product code imports nothing of conformance/, fixtures/, internal/testsupport/, fakeproc/ or runner/host/provider/providertest", func(p string) bool { return !testOnly(p) },
		func(imp string, g map[string]pkg) bool { return testOnly(imp) }},
	{"runner/wire imports only the standard library (the model and the relay both import it; it holds no body shape)",
		func(p string) bool { return p == "runner/wire" },
		func(imp string, g map[string]pkg) bool { return !g[imp].std }},
	{"nothing imports upward: a product package outside runner/host/ and cmd/ (the reports, the model, the wire table, the in-sandbox code) imports nothing of them",
		func(p string) bool { return !testOnly(p) && !underHost(p) },
		func(imp string, g map[string]pkg) bool { return underHost(imp) }},
}

// underHost is the host's world and the commands above it.
func underHost(p string) bool {
	return p == "runner/host" || strings.HasPrefix(p, "runner/host/") || strings.HasPrefix(p, "cmd/")
}

// exempt are the known breaks of a rule, each with its reason; an
// exemption that no longer matches an import fails the test too, so the
// list cannot outlive its reason.
// None today: the session agent's host end moved to runner/host/agenthost.
var exempt = map[[2]string]string{}

// isModule says whether imp is one of the module's own packages (they are
// keyed without the module prefix; everything else keeps its full path).
func isModule(imp string, g map[string]pkg) bool {
	_, ok := g[imp]
	return ok && !g[imp].std && !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".")
}

// violations checks g against rules and exempt: one line per import a
// rule forbids, and one per exemption no import uses.
func violations(g map[string]pkg, rules []rule, exempt map[[2]string]string) []string {
	var out []string
	used := map[[2]string]bool{}
	for p, k := range g {
		if k.std || !isModule(p, g) {
			continue
		}
		for _, imp := range k.imports {
			for _, r := range rules {
				if !r.from(p) || !r.forbids(imp, g) {
					continue
				}
				if _, ok := exempt[[2]string{p, imp}]; ok {
					used[[2]string{p, imp}] = true
					continue
				}
				out = append(out, p+" imports "+imp+": "+r.name)
			}
		}
	}
	for e := range exempt {
		if !used[e] {
			out = append(out, "exemption "+e[0]+" -> "+e[1]+" is unused: remove it")
		}
	}
	slices.Sort(out)
	return out
}

// graph lists the module's packages and everything they link, with the
// non-test imports of each (`go list -deps ./...` at the module root).
func graph(t *testing.T) map[string]pkg {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "the go command", "install Go 1.26")
	}
	cmd := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./...: %v", err)
	}
	g := map[string]pkg{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			t.Fatalf("go list -deps ./...: line %q is not path, standard, imports", line)
		}
		k := pkg{std: f[1] == "true"}
		for _, imp := range f[2:] {
			k.imports = append(k.imports, strings.TrimPrefix(imp, module))
		}
		g[strings.TrimPrefix(f[0], module)] = k
	}
	return g
}

func TestLayers(t *testing.T) {
	g := graph(t)
	// Positive control: the listing is real (the packages the rules are
	// about are in it, with the imports they have today).
	for p, imp := range map[string]string{"cmd/warden": "runner/warden/wardencli", "runner/probe": "runner/witness", "runner/host/certify": "runner/model", "runner/agent": "golang.org/x/sys/unix"} {
		if !slices.Contains(g[p].imports, imp) {
			t.Fatalf("go list -deps ./... has %s without its import %s (%d packages): the listing is not what it seems", p, imp, len(g))
		}
	}
	for _, v := range violations(g, rules, exempt) {
		t.Error(v)
	}
}

// The rules see a violation where one is: a graph with one planted break
// of each rule reports exactly those, and an exempt import is not one.
func TestLayersReportPlantedViolations(t *testing.T) {
	std := pkg{std: true}
	g := map[string]pkg{
		"os":                                std,
		"golang.org/x/sys/unix":             {},
		"github.com/docker/docker/client":   {},
		"runner/warden/proc":                {imports: []string{"os", "golang.org/x/sys/unix", "runner/host/hostfile"}},
		"runner/probe":                      {imports: []string{"runner/witness", "github.com/docker/docker/client"}},
		"runner/witness":                    {imports: []string{"os"}},
		"runner/agent":                      {imports: []string{"runner/agent/pax", "runner/warden/version"}},
		"runner/agent/pax":                  {imports: []string{"runner/host/provider"}},
		"runner/warden/version":             {},
		"runner/host/hostfile":              {imports: []string{"os"}},
		"runner/host/provider":              {imports: []string{"runner/host/hostfile"}},
		"runner/host/certify":               {imports: []string{"runner/model", "fixtures/model", "runner/warden/receipt"}},
		"runner/model":                      {},
		"runner/wire":                       {imports: []string{"os", "runner/model"}},
		"runner/warden/receipt":             {},
		"fixtures/model":                    {},
		"internal/testsupport/testenv":      {imports: []string{"runner/host/provider"}},
		"conformance/framework":             {imports: []string{"internal/testsupport/testenv", "fixtures/model"}},
		"fakeproc":                          {imports: []string{"runner/warden/proc"}},
		"runner/host/soak":                  {imports: []string{"fakeproc"}},
		"reports":                           {imports: []string{"os", "runner/host/certify"}},
		"cmd/sandproof":                     {imports: []string{"runner/host/certify", "reports"}},
		"runner/host/provider/providertest": {imports: []string{"runner/host/provider"}},
		"runner/host/session":               {imports: []string{"runner/host/provider/providertest"}},
	}
	want := []string{
		"runner/agent/pax imports runner/host/provider: " + rules[1].name,
		"runner/host/certify imports fixtures/model: " + rules[2].name,
		"runner/host/soak imports fakeproc: " + rules[2].name,
		"runner/host/session imports runner/host/provider/providertest: " + rules[2].name,
		"runner/probe imports github.com/docker/docker/client: " + rules[0].name,
		"runner/warden/proc imports runner/host/hostfile: " + rules[1].name,
		"runner/wire imports runner/model: " + rules[3].name,
		"reports imports runner/host/certify: " + rules[4].name,
		"runner/agent/pax imports runner/host/provider: " + rules[4].name,
		"runner/warden/proc imports runner/host/hostfile: " + rules[4].name,
	}
	slices.Sort(want)
	if got := violations(g, rules, exempt); !slices.Equal(got, want) {
		t.Errorf("planted violations:\n got %q\nwant %q", got, want)
	}
	// An exempt import is not a violation, and an exemption no import
	// uses is one.
	planted := map[[2]string]string{{"runner/agent/pax", "runner/host/provider"}: "planted"}
	if got := violations(g, rules, planted); slices.Contains(got, "runner/agent/pax imports runner/host/provider: "+rules[1].name) || len(got) != len(want)-2 {
		t.Errorf("an exempt import is reported: %q", got)
	}
	delete(g, "runner/agent/pax")
	if got := violations(g, rules, planted); !slices.Contains(got, "exemption runner/agent/pax -> runner/host/provider is unused: remove it") {
		t.Errorf("an unused exemption is not reported: %q", got)
	}
}

// What each in-sandbox binary links, all of it (`go list -deps`): its own
// group and golang.org/x/sys, nothing of the host.
func TestInSandboxBinariesLinkNoHostPackage(t *testing.T) {
	for _, c := range []struct {
		cmd     string
		allowed func(string) bool
	}{
		{"cmd/warden", func(p string) bool { return p == "cmd/warden" || strings.HasPrefix(p, "runner/warden/") }},
		// the probe reads the harness's files through the confined primitive.
		{"cmd/probe", func(p string) bool {
			return slices.Contains([]string{"cmd/probe", "runner/probe", "runner/witness", "runner/confine"}, p)
		}},
		// sandagent links the channel and its in-sandbox end, the PAX
		// names it shares with the host's tar consumer, the confined
		// primitive and warden's version stamp; the host end is
		// runner/host/agenthost.
		{"cmd/sandagent", func(p string) bool {
			return slices.Contains([]string{"cmd/sandagent", "runner/agent", "runner/agent/pax", "runner/confine", "runner/warden/version"}, p)
		}},
		// rmtree is the confined primitive's removal and nothing else.
		{"runner/rmtree", func(p string) bool {
			return p == "runner/rmtree" || p == "runner/confine"
		}},
	} {
		t.Run(c.cmd, func(t *testing.T) {
			deps := testenv.NonStandardDeps(t, "../"+c.cmd)
			// Positive control: the listing is real.
			if !slices.Contains(deps, module+c.cmd) || !slices.Contains(deps, "golang.org/x/sys/unix") {
				t.Fatalf("go list -deps ./%s lacks itself or golang.org/x/sys/unix: %q", c.cmd, deps)
			}
			for _, d := range deps {
				if !xsys(d) && !(strings.HasPrefix(d, module) && c.allowed(strings.TrimPrefix(d, module))) {
					t.Errorf("%s links %s: only its own group and golang.org/x/sys may be (runner/layers_test.go says why)", c.cmd, d)
				}
			}
		})
	}
}
