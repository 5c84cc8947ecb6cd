package provider

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// DefaultName is the provider certify and clean use when none is named:
// the local Docker engine.
const DefaultName = "docker"

// Factory is what a provider implementation registers: how to make one,
// and what the CLI's other commands may ask of its kind.
type Factory struct {
	// New connects to the provider (for docker, the engine DOCKER_HOST
	// names); an error says what is missing.
	New func() (Provider, error)
	// RunArgs, when set, are the engine CLI's `run` arguments that give a
	// throwaway container the labels and limits every sandbox of this
	// provider has (the images' facts container is run with the engine's
	// own CLI). Nil: the provider has no such CLI.
	RunArgs func(labels map[string]string, l Limits) ([]string, error)
}

var (
	registryMu sync.Mutex
	registry   = map[string]Factory{}
)

// Register makes a provider implementation known by name; an
// implementation calls it from its package's init, and a binary links
// the implementations it offers with a blank import (cmd/sandproof's
// providers.go). A second registration of a name, an empty name or a
// Factory without New is a programming error and panics.
func Register(name string, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if name == "" || f.New == nil {
		panic(fmt.Sprintf("provider.Register(%q): a name and a New are required", name))
	}
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("provider.Register(%q): registered twice", name))
	}
	registry[name] = f
}

// Lookup is the Factory registered as name.
func Lookup(name string) (Factory, bool) {
	registryMu.Lock()
	defer registryMu.Unlock()
	f, ok := registry[name]
	return f, ok
}

// Names are the registered providers' names, sorted.
func Names() []string {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ErrUnknownProvider is a name no implementation registered.
var ErrUnknownProvider = errors.New("unknown provider")

// New makes the provider registered as name.
func New(name string) (Provider, error) {
	f, ok := Lookup(name)
	if !ok {
		return nil, UnknownName(name)
	}
	return f.New()
}

// UnknownName is the error for a provider name nothing registered, with
// the names that are.
func UnknownName(name string) error {
	known := Names()
	if len(known) == 0 {
		known = []string{"none registered"}
	}
	return fmt.Errorf("%w %q (known: %s)", ErrUnknownProvider, name, strings.Join(known, ", "))
}

// Cleaned is one sandbox (or volume) a clean-up looked at, and what it
// decided.
type Cleaned struct {
	ID     string
	Name   string
	Reason string
}

// CleanResult is what a clean-up did: what it removed and what it kept,
// each with the reason.
type CleanResult struct {
	Removed []Cleaned
	Kept    []Cleaned
}

// KeptCounts counts the kept ones by reason.
func (r CleanResult) KeptCounts() map[string]int {
	n := map[string]int{}
	for _, k := range r.Kept {
		n[k.Reason]++
	}
	return n
}

// KeptReasons returns the reasons of KeptCounts, sorted.
func (r CleanResult) KeptReasons() []string {
	var out []string
	for reason := range r.KeptCounts() {
		out = append(out, reason)
	}
	sort.Strings(out)
	return out
}

// Cleaner is a provider whose sandboxes (and caches) outlive a crashed
// owner, so `sandproof clean` can remove them: Clean judges each labelled
// sandbox by scope (CleanScope.Judge), CleanVolumes removes the unused
// caches; with scope.DryRun or dryRun nothing is removed and Removed lists
// what would have been.
type Cleaner interface {
	Clean(ctx context.Context, scope CleanScope) (CleanResult, error)
	CleanVolumes(ctx context.Context, dryRun bool) (CleanResult, error)
}
