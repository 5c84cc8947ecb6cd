// Package wardencli is warden's command line: it parses and validates the
// flags of every subcommand (contract sections 2-5) and hands the work to the
// supervisor, launch and harness packages.
package wardencli

import (
	"fmt"
	"io"

	"github.com/sandproof/sandproof/runner/warden/harness"
	"github.com/sandproof/sandproof/runner/warden/supervisor"
	"github.com/sandproof/sandproof/runner/warden/version"
)

const usage = `usage: warden COMMAND [FLAGS]

commands:
  supervise --state DIR --deadline SECONDS [--grace SECONDS] [--launch-id ID]
            [--proc-root DIR] [--lease SECONDS] [--user UID[:GID]] [--detach]
            [--tier auto|subreaper] -- COMMAND [ARG...]
  stop      --state DIR [--wait SECONDS] [--services]
  wait      --state DIR [--timeout SECONDS]
  renew     --state DIR [--deadline SECONDS]
  service   --state DIR --name NAME -- COMMAND [ARG...]
  run       --params FILE
  --version
`

// Run executes warden with args (without the program name) and returns the
// exit status.
func Run(args []string, stdout, stderr io.Writer) int {
	// First, before any goroutine runs: the threads the runtime makes for
	// its Ps stay, and a supervisor's must all be accounted for (see
	// supervisor.MaxProcs).
	supervisor.BoundProcs()
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "--version", "version":
		fmt.Fprintf(stdout, "warden %s\n", version.String())
		return 0
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "run":
		return harness.Main(args[1:], stdout, stderr)
	case "supervise":
		return runSupervise(args[1:], stdout, stderr)
	case supervisorCommand:
		return runSupervisor(args[1:])
	case supervisor.ServiceReaperCommand:
		if len(args) != 2 {
			fmt.Fprintln(stderr, "warden: "+supervisor.ServiceReaperCommand+" is internal")
			return 2
		}
		return supervisor.RunServiceReaper(args[1])
	case "stop":
		return runStop(args[1:], stdout, stderr)
	case "wait":
		return runWait(args[1:], stdout, stderr)
	case "renew":
		return runRenew(args[1:], stdout, stderr)
	case "service":
		return runService(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "warden: unknown command %q\n%s", args[0], usage)
	return 2
}
