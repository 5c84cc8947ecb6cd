// Command sandproof is the host side of sandproof: it builds the test images,
// certifies harness adapters (reading their captures), serves the scripted
// model, cleans up leftover containers, runs the soak, and writes, diffs and
// merges evidence reports. Each subcommand lives in a file of its own
// in this directory and registers itself with addCommand.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandproof/sandproof/reports"
	"github.com/sandproof/sandproof/runner/host/adapter"
	"github.com/sandproof/sandproof/runner/host/artifact"
	"github.com/sandproof/sandproof/runner/host/certify"
)

// commandFactories holds the subcommands; each file registers its own in init.
var commandFactories []func(stdout, stderr io.Writer) *cobra.Command

// addCommand registers a subcommand constructor.
func addCommand(f func(stdout, stderr io.Writer) *cobra.Command) {
	commandFactories = append(commandFactories, f)
}

// usageError marks an error caused by bad input on the command line; main
// exits 2 for it.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitError carries an exit status chosen by a subcommand (for example 1 when
// a report diff finds a regression) without printing anything more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Exit statuses (contract §9 exit statuses). When several apply, the first
// of interrupted, infrastructure, failed wins.
const (
	exitOK       = 0
	exitFailed   = 1 // a case failed or is unknown, a canary leaked, a regression
	exitUsage    = 2
	exitInfra    = 3 // engine unreachable, image missing, registry down, I/O
	exitSIGINT   = 130
	exitSIGTERM  = 143
	exitCodeHelp = `Exit statuses (the same for every subcommand):
  0    every case passed (skipped cases allowed); report diff: no regression
  1    a case failed or is unknown, a canary leaked, report diff found a
       regression, or no case passed (certify --allow-empty accepts that)
  2    usage: a bad flag or value, an unknown subcommand, bad evidence input,
       an adapter's runtime refused (a loader that is none, a link in a tarball)
       or not the version its manifest pins (its version check)
  3    infrastructure: engine unreachable, image missing, registry down when
       required, a file that cannot be read or written, a case certify left
       unknown because the engine failed it (--resume runs it again)
  130  interrupted by SIGINT; 143 by SIGTERM
When several apply: interrupted > infrastructure > failed.`
)

// infraError marks a failure of what sandproof runs on (the engine, an
// image, a registry, the disk) rather than a verdict; main exits 3.
type infraError struct{ err error }

func (e infraError) Error() string { return e.err.Error() }
func (e infraError) Unwrap() error { return e.err }

// interruptedError ends a command stopped by a signal; main exits 128+N.
type interruptedError struct {
	sig  string // "SIGINT" or "SIGTERM"
	code int
}

func (e interruptedError) Error() string { return "interrupted by " + e.sig }

// failedError is a verdict (a failed case, a leaked canary) that has a
// message worth printing; main exits 1.
type failedError struct{ err error }

func (e failedError) Error() string { return e.err.Error() }
func (e failedError) Unwrap() error { return e.err }

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "sandproof",
		Short:         "Certify that coding-agent harnesses run, stop and clean up correctly in sandboxes",
		Long:          "Certify that coding-agent harnesses run, stop and clean up correctly in sandboxes.\n\n" + exitCodeHelp,
		Version:       versionLine(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	for _, f := range commandFactories {
		root.AddCommand(f(stdout, stderr))
	}
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes a command that only groups subcommands
// ("images", "model") refuse an argument that names none of them: cobra
// itself checks that at the root only, and below it prints help and
// returns success, so a typo in CI would pass.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !c.HasParent() || !c.HasAvailableSubCommands() || c.Runnable() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		cmd.SuggestionsMinimumDistance = 2
		msg := fmt.Sprintf("%s: unknown subcommand %q", cmd.CommandPath(), args[0])
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf(" (did you mean %q?)", s[0])
		}
		var names []string
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		return usagef("%s; want one of %s", msg, strings.Join(names, ", "))
	}
}

// run executes the command line and returns the process exit status.
func run(stdout, stderr io.Writer, args []string) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// An error can carry text from a sandbox (a file name, a message).
	fmt.Fprintf(stderr, "sandproof: %s\n", reports.Printable(err.Error(), false))
	if s, ok := caught.Load().(os.Signal); ok {
		// The work failed because a signal cancelled it.
		return signalExit(s).code
	}
	return exitStatus(err)
}

// exitStatus classifies an error that was printed. What is not a usage
// error, a verdict or an interrupt is the machinery failing: exit 3, so
// CI tells a broken engine from a broken harness.
func exitStatus(err error) int {
	var ie interruptedError
	var ue usageError
	var fe failedError
	var infra infraError
	switch {
	case errors.As(err, &ie):
		return ie.code
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, artifact.ErrRefused), errors.Is(err, adapter.ErrVersion):
		// An adapter's runtime the host's readers refuse, or whose version
		// check answered another version than its pin (or exited non-zero,
		// or never ended): certify stops on it as on any runtime it could
		// not make (and marks that infrastructure), but it is bad input,
		// the package's or the manifest's: trying again cannot help. A
		// check the engine could not run is not ErrVersion (exit 3).
		return exitUsage
	case errors.As(err, &infra):
		// Marked infrastructure: it outranks a verdict it carries (a
		// leaked canary beside a case the engine failed), and its text
		// (an engine's "invalid argument") is no usage error.
		return exitInfra
	case errors.As(err, &fe), errors.Is(err, certify.ErrCanaryLeaked):
		// Before cobra's text match: a verdict's message may contain
		// "accepts " ("--allow-empty accepts that").
		return exitFailed
	case isCobraUsage(err):
		return exitUsage
	case errors.Is(err, reports.ErrInvalidEvidence), errors.Is(err, reports.ErrDuplicateCase), errors.Is(err, certify.ErrOutExists):
		// Bad input named by file and line.
		return exitUsage
	}
	return exitInfra
}

// isCobraUsage recognises cobra's own argument errors (unknown command,
// wrong number of arguments), which it does not route through the flag error
// function.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "unknown flag", "unknown shorthand flag", "flag needs an argument", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func main() {
	os.Exit(run(os.Stdout, os.Stderr, os.Args[1:]))
}
