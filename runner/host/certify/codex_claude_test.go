package certify_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandproof/sandproof/internal/testsupport/testenv"
	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/host/runtimes"
	"github.com/sandproof/sandproof/runner/host/runtimes/npm"
)

// TestCertifyCodexAndClaudeCode certifies the real Codex (Responses API,
// its shell tool's string command) and Claude Code (Messages API, its Read
// and Write tools) on debian-12 and alpine-class: each passes through the
// challenge round trip with the tools its own request declared, and the
// evidence names its package and the CLI's own version. alpine-class is
// musl with BusyBox and no bash: Codex's static binary runs there, and
// Claude Code's musl build.
func TestCertifyCodexAndClaudeCode(t *testing.T) {
	testenv.Long(t, "prepares Codex's and Claude Code's npm runtimes (about 560 MB) and runs them")
	runtimeCache(t) // first: a parallel test's deadlines start once it runs
	imgs := needEngine(t, "debian-12", "alpine-class")
	warden, probe, _ := binaries(t)
	want := map[string]struct{ pkg, cli, read, write string }{
		"codex":       {"@openai/codex", "codex-cli 0.171.0", "exec_command", "exec_command"},
		"claude-code": {"@anthropic-ai/claude-code", "2.1.332 (Claude Code)", "Read", "Write"},
	}
	var ms []*adapter.Manifest
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	for _, name := range []string{"codex", "claude-code"} {
		m, err := adapter.Load(filepath.Join("..", "..", "..", "adapters", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		with := m.Runtime.Prepare.With
		if err := npm.RegistryReachable(ctx, with["package"], with["version"]); errors.Is(err, runtimes.ErrUnreachable) {
			testenv.Missing(t, fmt.Sprintf("the npm registry (%v)", err), "give this host npm and access to registry.npmjs.org")
		}
		ms = append(ms, m)
	}
	out := t.TempDir()
	// Two cases at once, as `make certify` runs them: every scenario of
	// both adapters runs, and their timeout cases wait out 40 s each.
	if _, err := certify.Run(ctx, certify.Options{Adapters: ms, Images: imgs, Warden: warden, Probe: probe,
		Bash: bashStatic(), Out: out, Parallel: 2}); err != nil {
		t.Fatal(err)
	}
	evs := readEvidence(t, out)
	for _, img := range []string{"debian-12", "alpine-class"} {
		for name, w := range want {
			id := img + "/" + name
			ev := evs[id]
			if ev == nil || ev.Status != reports.StatusPassed || ev.ModelSteps == nil {
				t.Errorf("%s: %+v; want passed", id, ev)
				continue
			}
			st := ev.ModelSteps
			if st.AskCall == 0 || st.ResultCall <= st.AskCall || st.WriteCall < st.ResultCall || ev.ModelCalls != 3 {
				t.Errorf("%s: ask %d, result %d, write %d, %d calls; want the round trip in 3 calls", id, st.AskCall, st.ResultCall, st.WriteCall, ev.ModelCalls)
			}
			var called []string
			for _, s := range st.Steps {
				called = append(called, s.ToolCalls...)
			}
			if strings.Join(called, ",") != w.read+","+w.write {
				t.Errorf("%s: tools called %v; want %s then %s (chosen from its own declared schemas)", id, called, w.read, w.write)
			}
			if h := ev.HarnessRuntime; h == nil || h.Package != w.pkg || h.CLIVersion != w.cli {
				t.Errorf("%s: harness runtime %+v; want package %s, --version %q", id, h, w.pkg, w.cli)
			}
		}
	}
}
