// Command warden is sandproof's in-sandbox process supervisor and harness
// runner: one static binary that needs nothing from the image. All of its
// logic lives in runner/warden/wardencli and the packages under runner/.
package main

import (
	"os"

	"github.com/sandproof/sandproof/runner/warden/wardencli"
)

func main() {
	os.Exit(wardencli.Run(os.Args[1:], os.Stdout, os.Stderr))
}
