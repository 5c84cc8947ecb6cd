package npm

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/internal/testsupport/runtimestest"

	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/runtimes"
)

// pinnedKeys are the cache keys (NAME@VERSION-TARGET-HASH) of the shipped
// manifests' runtimes, for every target each covers and every Node a JS
// entry can be given. A key names a directory in every user's cache: a
// change evicts every runtime prepared before it, and two sandproofs of
// one release must agree. Changing one is a decision, made here.
var pinnedKeys = []string{
	"claude-code anthropic-ai+claude-code@2.1.332-linux-arm64-71738dcbdae9",
	"claude-code anthropic-ai+claude-code@2.1.332-linux-arm64-glibc-layer-71738dcbdae9",
	"claude-code anthropic-ai+claude-code@2.1.332-linux-arm64-musl-b17e786c1f66",
	"claude-code anthropic-ai+claude-code@2.1.332-linux-x64-f22ded407662",
	"claude-code anthropic-ai+claude-code@2.1.332-linux-x64-glibc-layer-f22ded407662",
	"claude-code anthropic-ai+claude-code@2.1.332-linux-x64-musl-7b7804353a3e",
	"cline cline+cli-linux-x64@3.0.65-linux-arm64-72da74e1dade",
	"cline cline+cli-linux-x64@3.0.65-linux-arm64-glibc-layer-72da74e1dade",
	"cline cline+cli-linux-x64@3.0.65-linux-arm64-musl-72da74e1dade",
	"cline cline+cli-linux-x64@3.0.65-linux-x64-72da74e1dade",
	"cline cline+cli-linux-x64@3.0.65-linux-x64-baseline-72da74e1dade",
	"cline cline+cli-linux-x64@3.0.65-linux-x64-baseline-glibc-layer-72da74e1dade",
	"cline cline+cli-linux-x64@3.0.65-linux-x64-baseline-musl-72da74e1dade",
	"cline cline+cli-linux-x64@3.0.65-linux-x64-glibc-layer-72da74e1dade",
	"cline cline+cli-linux-x64@3.0.65-linux-x64-musl-72da74e1dade",
	"codex openai+codex@0.171.0-linux-x64-linux-arm64-114cfac5574e",
	"codex openai+codex@0.171.0-linux-x64-linux-arm64-glibc-layer-114cfac5574e",
	"codex openai+codex@0.171.0-linux-x64-linux-arm64-musl-114cfac5574e",
	"codex openai+codex@0.171.0-linux-x64-linux-x64-114cfac5574e",
	"codex openai+codex@0.171.0-linux-x64-linux-x64-baseline-114cfac5574e",
	"codex openai+codex@0.171.0-linux-x64-linux-x64-baseline-glibc-layer-114cfac5574e",
	"codex openai+codex@0.171.0-linux-x64-linux-x64-baseline-musl-114cfac5574e",
	"codex openai+codex@0.171.0-linux-x64-linux-x64-glibc-layer-114cfac5574e",
	"codex openai+codex@0.171.0-linux-x64-linux-x64-musl-114cfac5574e",
	"gemini google+gemini-cli@0.61.0-linux-arm64-17d3dc96f86d",
	"gemini google+gemini-cli@0.61.0-linux-arm64-glibc-layer-17d3dc96f86d",
	"gemini google+gemini-cli@0.61.0-linux-arm64-musl-17d3dc96f86d",
	"gemini google+gemini-cli@0.61.0-linux-x64-17d3dc96f86d",
	"gemini google+gemini-cli@0.61.0-linux-x64-baseline-17d3dc96f86d",
	"gemini google+gemini-cli@0.61.0-linux-x64-baseline-glibc-layer-17d3dc96f86d",
	"gemini google+gemini-cli@0.61.0-linux-x64-baseline-musl-17d3dc96f86d",
	"gemini google+gemini-cli@0.61.0-linux-x64-glibc-layer-17d3dc96f86d",
	"gemini google+gemini-cli@0.61.0-linux-x64-musl-17d3dc96f86d",
	"kilo kilocode+cli@7.0.33-linux-x64-baseline-a862461a3d8e",
	"kilo kilocode+cli@7.0.33-linux-x64-baseline-glibc-layer-a862461a3d8e",
	"kilo kilocode+cli@7.0.33-linux-x64-c13d43e09bbc",
	"kilo kilocode+cli@7.0.33-linux-x64-glibc-layer-c13d43e09bbc",
	"openclaw openclaw@2026.9.6-linux-arm64-216bf96200f1",
	"openclaw openclaw@2026.9.6-linux-arm64-420dc769321d",
	"openclaw openclaw@2026.9.6-linux-arm64-glibc-layer-216bf96200f1",
	"openclaw openclaw@2026.9.6-linux-arm64-glibc-layer-420dc769321d",
	"openclaw openclaw@2026.9.6-linux-arm64-musl-420dc769321d",
	"openclaw openclaw@2026.9.6-linux-x64-420dc769321d",
	"openclaw openclaw@2026.9.6-linux-x64-baseline-420dc769321d",
	"openclaw openclaw@2026.9.6-linux-x64-baseline-f76a16619998",
	"openclaw openclaw@2026.9.6-linux-x64-baseline-glibc-layer-420dc769321d",
	"openclaw openclaw@2026.9.6-linux-x64-baseline-glibc-layer-f76a16619998",
	"openclaw openclaw@2026.9.6-linux-x64-baseline-musl-420dc769321d",
	"openclaw openclaw@2026.9.6-linux-x64-f76a16619998",
	"openclaw openclaw@2026.9.6-linux-x64-glibc-layer-420dc769321d",
	"openclaw openclaw@2026.9.6-linux-x64-glibc-layer-f76a16619998",
	"openclaw openclaw@2026.9.6-linux-x64-musl-420dc769321d",
	"opencode opencode-ai@1.18.33-linux-x64-672a0db60beb",
	"opencode opencode-ai@1.18.33-linux-x64-baseline-3e8935840412",
	"opencode opencode-ai@1.18.33-linux-x64-baseline-glibc-layer-3e8935840412",
	"opencode opencode-ai@1.18.33-linux-x64-glibc-layer-672a0db60beb",
	"pi mariozechner+pi-coding-agent@0.73.1-linux-arm64-cb43becf8369",
	"pi mariozechner+pi-coding-agent@0.73.1-linux-arm64-glibc-layer-cb43becf8369",
	"pi mariozechner+pi-coding-agent@0.73.1-linux-arm64-musl-cb43becf8369",
	"pi mariozechner+pi-coding-agent@0.73.1-linux-x64-baseline-cb43becf8369",
	"pi mariozechner+pi-coding-agent@0.73.1-linux-x64-baseline-glibc-layer-cb43becf8369",
	"pi mariozechner+pi-coding-agent@0.73.1-linux-x64-baseline-musl-cb43becf8369",
	"pi mariozechner+pi-coding-agent@0.73.1-linux-x64-cb43becf8369",
	"pi mariozechner+pi-coding-agent@0.73.1-linux-x64-glibc-layer-cb43becf8369",
	"pi mariozechner+pi-coding-agent@0.73.1-linux-x64-musl-cb43becf8369",
}

// TestShippedManifestKeysArePinned computes the spec keys of the six
// shipped manifests over every target and Node source and compares them
// with pinnedKeys. The host's Node is replaced by a fixed one so that the
// keys do not depend on the host (the host's Node adds nothing to a key;
// npm's pinned Node adds its pins).
func TestShippedManifestKeysArePinned(t *testing.T) {
	files := runtimestest.ShippedFiles(t, filepath.Join("..", "..", "..", ".."), PreparerName)
	var targets []runtimes.Target
	for _, arch := range []string{"amd64", "arm64"} {
		for _, libc := range []string{"glibc", "musl"} {
			for _, baseline := range []bool{false, true} {
				for _, layer := range []bool{false, true} {
					if t := (runtimes.Target{Arch: arch, Libc: libc, Baseline: baseline, GlibcLayer: layer}); t.Valid() == nil {
						targets = append(targets, t)
					}
				}
			}
		}
	}
	hostNode := func(Config, runtimes.Target) (nodeSource, error) {
		return nodeSource{host: &Node{Path: "/usr/bin/node", Version: "v99.0.0", Arch: "amd64"}}, nil
	}
	npmNode := func(c Config, t runtimes.Target) (nodeSource, error) {
		if c.NodePackage == nil || t.Libc != "glibc" || c.NodePackage.Integrity[t.Arch] == "" {
			return nodeSource{}, fmt.Errorf("%w: no npm Node for %s", runtimes.ErrUnsupported, t)
		}
		return nodeSource{Package: NodePackageName(t.Arch), Version: c.NodePackage.Version, Integrity: c.NodePackage.Integrity[t.Arch]}, nil
	}
	var got []string
	manifests := 0
	for _, f := range files {
		m, err := adapter.Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		p := m.Runtime.Prepare
		if p == nil || p.Name != PreparerName {
			continue
		}
		manifests++
		c, errs := ParseConfig(m.Dir, p.Node)
		if len(errs) > 0 {
			t.Fatalf("%s: %v", f, errs)
		}
		for _, target := range targets {
			for _, choose := range []func(Config, runtimes.Target) (nodeSource, error){hostNode, npmNode} {
				s, err := specFor(c, target, choose)
				if errors.Is(err, adapter.ErrPlatform) {
					continue
				}
				if err != nil {
					t.Fatalf("%s for %s: %v", m.Name, target, err)
				}
				if k := m.Name + " " + s.Key(); !slices.Contains(got, k) {
					got = append(got, k)
				}
			}
		}
	}
	if manifests != 8 {
		t.Fatalf("%d npm manifests in adapters/, want the eight shipped (a new one: pin its keys here)", manifests)
	}
	slices.Sort(got)
	if !slices.Equal(got, pinnedKeys) {
		t.Errorf("the shipped manifests' cache keys changed:\n got:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(pinnedKeys, "\n\t"))
	}
}
