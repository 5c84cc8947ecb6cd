// Package testenv is how a test says what it needs from the machine (a
// Docker engine, a built image, root, a Debian package, a kernel feature)
// when the machine lacks it. A developer's ad-hoc `go test` skips such a
// test; the gate (`make test`, which sets SANDPROOF_STRICT=1) fails it with
// one line naming what is missing and how to get it, so a green gate never
// means "tested nothing".
//
// Tests never call t.Skip themselves: they call Missing (or a helper built
// on it) here, the one place where a skip can happen.
package testenv

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// StrictEnv is the variable `make test` sets to 1: a missing prerequisite
// fails the test instead of skipping it.
const StrictEnv = "SANDPROOF_STRICT"

// DockerEnv is the opt-in of the tests that build images or run containers
// in an ad-hoc `go test`; Strict implies it.
const DockerEnv = "SANDPROOF_DOCKER"

// Prereqs is the command that installs every Debian package a test needs.
const Prereqs = "bash images/prereqs.sh"

// Strict reports whether SANDPROOF_STRICT=1: no test may skip.
func Strict() bool { return os.Getenv(StrictEnv) == "1" }

// Line is the one line a missing prerequisite is reported with, under
// strict as a failure and otherwise as a skip. what names what is missing
// (and why, when known); how says how to get it, or that it cannot be
// installed. Newlines in either (an engine's error text) are folded.
func Line(what, how string) string {
	what, how = oneLine(what), oneLine(how)
	if Strict() {
		return fmt.Sprintf("missing %s; %s (%s=1: the gate fails instead of skipping)", what, how, StrictEnv)
	}
	return fmt.Sprintf("missing %s; %s (%s=1 makes this a failure)", what, how, StrictEnv)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Missing ends tb because the machine lacks what: under strict with
// tb.Fatal, otherwise with tb.Skip. It does not return.
func Missing(tb testing.TB, what, how string) {
	tb.Helper()
	if Strict() {
		tb.Fatal(Line(what, how))
	}
	tb.Skip(Line(what, how))
}

// NoEngine ends tb because no Docker engine answered (err says how it
// failed).
func NoEngine(tb testing.TB, err error) {
	tb.Helper()
	Missing(tb, fmt.Sprintf("a Docker engine (%v)", err), "start one with `bash images/engine.sh start`")
}

// NoImage ends tb because the test image ref (name) is not built.
func NoImage(tb testing.TB, name, ref string) {
	tb.Helper()
	Missing(tb, fmt.Sprintf("the test image %s (%s)", name, ref), "build it with `go run ./cmd/sandproof images build`")
}

// Package ends tb because what (a file or command) is missing; the Debian
// package pkg provides it and Prereqs installs it.
func Package(tb testing.TB, what, pkg string) {
	tb.Helper()
	Missing(tb, what, fmt.Sprintf("run `%s` as root (installs the Debian package %s)", Prereqs, pkg))
}

// Docker lets a test that builds images or runs containers go on only
// under SANDPROOF_DOCKER=1 or strict; an ad-hoc `go test` skips it.
func Docker(tb testing.TB) {
	tb.Helper()
	if os.Getenv(DockerEnv) == "1" || Strict() {
		return
	}
	tb.Skipf("set %s=1 to run against a Docker engine (%s=1 implies it)", DockerEnv, StrictEnv)
}

// OptedInEngine fails tb when a test Docker let go on finds no engine
// (err): the developer asked for the Docker tests, so they never skip.
func OptedInEngine(tb testing.TB, err error) {
	tb.Helper()
	tb.Fatalf("missing a Docker engine (%s); start one with `bash images/engine.sh start` (%s=1 or %s=1 asked for it)",
		oneLine(err.Error()), DockerEnv, StrictEnv)
}

// Long lets a slow test go on unless -short was given. Under strict,
// -short is an error: the gate runs every test.
func Long(tb testing.TB, why string) {
	tb.Helper()
	if !testing.Short() {
		return
	}
	if Strict() {
		tb.Fatalf("-short skips this test (%s); %s=1: the gate runs without -short", why, StrictEnv)
	}
	tb.Skipf("-short: %s", why)
}
