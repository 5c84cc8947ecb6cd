package main

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/artifact"
	"github.com/sandproof/sandproof/runner/host/certify"
	"github.com/sandproof/sandproof/runner/host/provider"
)

// Unknown subcommands are usage errors (cobra prints help and succeeds
// below the root unless told otherwise), with a suggestion.
func TestUnknownSubcommandIsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"images", "bogus"}, `sandproof images: unknown subcommand "bogus"; want one of build, clean, list`},
		{[]string{"model", "srve"}, `sandproof model: unknown subcommand "srve" (did you mean "serve"?)`},
		{[]string{"bogus"}, `unknown command "bogus"`},
	} {
		var out, errb bytes.Buffer
		if code := run(&out, &errb, tc.args); code != exitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("sandproof %s: exit %d, stderr %q; want 2 and %q", strings.Join(tc.args, " "), code, errb.String(), tc.want)
		}
	}
	// A bare group still shows its help, successfully.
	var out, errb bytes.Buffer
	if code := run(&out, &errb, []string{"images"}); code != 0 || !strings.Contains(out.String(), "Available Commands") {
		t.Errorf("sandproof images: exit %d, %q", code, out.String())
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		var out, errb bytes.Buffer
		code := run(&out, &errb, args)
		line := strings.TrimSpace(out.String())
		if code != 0 || !strings.HasPrefix(line, "sandproof 0.") || !strings.Contains(line, "commit ") || !strings.Contains(line, runtime.Version()) {
			t.Errorf("sandproof %s: exit %d, %q; want the version, the commit and %s", args[0], code, line, runtime.Version())
		}
	}
}

// The help states the exit statuses; the classification follows them,
// with interrupted > infrastructure > failed.
func TestExitStatuses(t *testing.T) {
	var out, errb bytes.Buffer
	run(&out, &errb, []string{"--help"})
	for _, want := range []string{"Exit statuses", "  3    infrastructure", "  130  interrupted by SIGINT; 143 by SIGTERM", "interrupted > infrastructure > failed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for _, tc := range []struct {
		err  error
		want int
	}{
		{usagef("--x: bad value"), exitUsage},
		{fmt.Errorf("certify: %w", certify.ErrCanaryLeaked), exitFailed},
		{failedError{errors.New("no case passed")}, exitFailed},
		// The message certify really returns (its "accepts " once read as
		// cobra's usage text: exit 2).
		{noCasePassed(3), exitFailed},
		{fmt.Errorf("f:1: %w", reports.ErrInvalidEvidence), exitUsage},
		{fmt.Errorf("x: %w", certify.ErrOutExists), exitUsage},
		// A runtime the host's readers refused stops certify like any
		// runtime it could not make, but it is bad input, not the engine.
		{infraError{fmt.Errorf("certify: prepare runtime: %w", artifact.ErrRefused)}, exitUsage},
		// A version check that answered: the package is not what the
		// manifest pins (another version, a non-zero exit, no end), bad
		// input; one the engine could not run is the engine's.
		{infraError{fmt.Errorf("certify: adapter pi (linux-x64-glibc): %w: /sandproof/runtime/pi/bin/pi --version in image debian-12 printed %q, want 0.70.2", adapter.ErrVersion, "0.70.3")}, exitUsage},
		{infraError{fmt.Errorf("certify: adapter pi (linux-x64-glibc): %w: /sandproof/runtime/pi/bin/pi --version in image debian-12: exit 1: %q", adapter.ErrVersion, "Error: no")}, exitUsage},
		{infraError{fmt.Errorf("certify: adapter pi (linux-x64-glibc): %w", provider.Errorf("exec", "x", provider.ErrGone))}, exitInfra},
		{errors.New("ping engine: connection refused"), exitInfra},
		{interruptedError{"SIGTERM", exitSIGTERM}, exitSIGTERM},
	} {
		if got := exitStatus(tc.err); got != tc.want {
			t.Errorf("exitStatus(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// A --warden that does not exist is named as a usage error, not an
// infrastructure one.
func TestCertifyMissingWardenIsUsage(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(&out, &errb, []string{"certify", "--adapter", "../../fixtures/adapters/fake-noloop.yaml", "--out", t.TempDir(), "--warden", "/nonexistent/warden"})
	if code != exitUsage || !strings.Contains(errb.String(), `--warden: "/nonexistent/warden" not found`) {
		t.Errorf("exit %d, %q", code, errb.String())
	}
}
