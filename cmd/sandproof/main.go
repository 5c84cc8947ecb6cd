// Command sandproof is the host side of sandproof: it builds the test images,
// certifies harness adapters, serves the scripted model, reads captures, and
// writes and diffs evidence reports. Each subcommand lives in a file of its own
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

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "sandproof",
		Short:         "Certify that coding-agent harnesses run, stop and clean up correctly in sandboxes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	for _, f := range commandFactories {
		root.AddCommand(f(stdout, stderr))
	}
	return root
}

// run executes the command line and returns the process exit status.
func run(stdout, stderr io.Writer, args []string) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// An error can carry text from a sandbox (a file name, a message).
	fmt.Fprintf(stderr, "sandproof: %s\n", reports.Printable(err.Error(), false))
	var ue usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		return 2
	}
	return 1
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
