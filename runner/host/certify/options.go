package certify

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandproof/sandproof/runner/host/provider"
)

// UsageError is an option certify refuses, named as `sandproof certify`
// spells it, so the CLI reports it as bad usage (exit 2) with the flag and
// the value quoted.
type UsageError struct {
	// Flag is the option's flag ("--network").
	Flag string
	// Value is the refused value as given ("bridge").
	Value string
	// Reason is the message after "FLAG: ".
	Reason string
}

func (e *UsageError) Error() string { return e.Flag + ": " + e.Reason }

// badValue is the UsageError of a value outside what flag accepts.
func badValue(flag, value, want string) *UsageError {
	return &UsageError{Flag: flag, Value: value, Reason: fmt.Sprintf("bad value %q (want %s)", value, want)}
}

// Validate checks o as a command line gives it, before Run fills in the
// defaults of its zero fields: Parallel and CaptureEntries >= 1, Baseline
// >= 0, Network none or host, ProviderName registered (when no Provider
// is given), each of Scenarios a scenario named once,
// and the static builds Warden, Probe and Agent
// present on the host (Agent "" is the sandagent beside Probe). The CLI
// calls it before it loads anything; Run calls it once the defaults are in.
// Each refusal is a *UsageError.
func (o Options) Validate() error {
	if o.Parallel < 1 {
		return badValue("--parallel", fmt.Sprint(o.Parallel), ">= 1")
	}
	if o.Baseline < 0 {
		return badValue("--baseline", fmt.Sprint(o.Baseline), ">= 0")
	}
	if o.CaptureEntries < 1 {
		return badValue("--capture-entries", fmt.Sprint(o.CaptureEntries), ">= 1")
	}
	if _, err := provider.Network(o.Network); err != nil || o.Network == "" {
		return badValue("--network", o.Network, "none or host")
	}
	if _, ok := provider.Lookup(o.ProviderName); o.Provider == nil && o.ProviderName != "" && !ok {
		return badValue("--provider", o.ProviderName, "one of "+strings.Join(provider.Names(), ", "))
	}
	if err := checkScenarios(o.Scenarios); err != nil {
		return err
	}
	for _, b := range []struct{ flag, path string }{{"--warden", o.Warden}, {"--probe", o.Probe}, {"--agent", o.agent()}} {
		if _, err := os.Stat(b.path); err != nil {
			return &UsageError{Flag: b.flag, Value: b.path,
				Reason: fmt.Sprintf("%q not found (build it with `make build`, or name the static build to use)", b.path)}
		}
	}
	return nil
}

// agent is Agent, or the sandagent beside Probe (bin/linux-ARCH/ holds
// both) when it is "".
func (o Options) agent() string {
	if o.Agent == "" {
		return filepath.Join(filepath.Dir(o.Probe), "sandagent")
	}
	return o.Agent
}

// withDefaults fills in the defaults of o's zero fields (each field's
// comment says which).
func (o Options) withDefaults() Options {
	if o.Parallel < 1 {
		o.Parallel = 1
	}
	if o.ModelName == "" {
		o.ModelName = "fake-model"
	}
	if o.User == "" {
		o.User = "1000:1000"
	}
	if o.TaskHome == "" {
		o.TaskHome = "/home/task"
	}
	o.Agent = o.agent()
	if o.Network == "" {
		o.Network = provider.NetworkNone
	}
	if o.CaptureEntries == 0 {
		o.CaptureEntries = provider.DefaultCaseEntries
	}
	return o
}
