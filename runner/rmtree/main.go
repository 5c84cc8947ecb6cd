// Command rmtree removes, as root inside a sandbox whose image may have no
// rm, one sandproof session dir, or an adapter's scratch paths. It is a
// static binary the session uploads into the session dir's bin/ and runs
// at close when the sandbox has no session agent to ask. It is the
// confined primitive's (runner/confine) removal, the same code the session
// agent's remove runs: every path is opened once from a descriptor of /,
// following no link at any component, and everything is removed relative
// to the descriptors it opened, never by a path resolved again, never
// across a mount. A session dir is removed only when it holds bin/warden,
// so a wrong path cannot take anything else with it. With --scratch it
// removes every match of each pattern (absolute, a glob only in the last
// element, as the manifest's parse checked), printing each path it
// removed, one a line.
//
//	rmtree DIR
//	rmtree --scratch PATTERN...
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/sandproof/sandproof/runner/confine"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "rmtree: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	root, err := confine.OpenRoot("/")
	if err != nil {
		return err
	}
	return confine.Rmtree(context.Background(), root, args, func(p string) { fmt.Println(p) })
}
