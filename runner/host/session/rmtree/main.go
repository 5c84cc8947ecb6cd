// Command rmtree removes one sandproof session dir inside a sandbox whose
// image may have no rm. It is a static binary the session uploads into the
// session dir's bin/ and runs at close; it removes only a directory that
// holds bin/warden, so a wrong path cannot take anything else with it.
//
//	rmtree DIR
package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "rmtree: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("want one directory, got %d arguments", len(args))
	}
	dir := filepath.Clean(args[0])
	if !filepath.IsAbs(dir) || dir == "/" {
		return fmt.Errorf("refuse %q: not an absolute session dir", args[0])
	}
	if fi, err := os.Lstat(filepath.Join(dir, "bin", "warden")); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("refuse %q: not a session dir (no bin/warden)", args[0])
	}
	// RemoveAll never follows symlinks: a link the harness planted in the
	// session dir is removed, not its target.
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %q: %w", dir, err)
	}
	return nil
}
