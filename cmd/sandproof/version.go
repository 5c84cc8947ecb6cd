package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/sandproof/sandproof/runner/warden/version"
)

func init() { addCommand(newVersionCmd) }

// commit is the build commit: the Makefile stamps it; a plain go build
// from a checkout still knows it from the module's VCS stamp.
func commit() string {
	if version.Commit != "unknown" {
		return version.Commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			if dirty {
				rev += "-dirty"
			}
			return rev
		}
	}
	return "unknown"
}

// versionLine is what --version and version print.
func versionLine() string {
	return fmt.Sprintf("sandproof %s (commit %s, %s %s/%s)", version.Version, commit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func newVersionCmd(stdout, _ io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the build commit and the Go version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(stdout, versionLine())
			return err
		},
	}
}
