// Command rmtree removes one sandproof session dir inside a sandbox whose
// image may have no rm. It is a static binary the session uploads into the
// session dir's bin/ and runs at close; it removes only a directory that
// holds bin/warden, so a wrong path cannot take anything else with it.
// With --scratch it removes an adapter's scratch paths instead (absolute,
// a glob only in the last element, as the manifest's parse checked),
// printing each path it removed, one a line.
//
//	rmtree DIR
//	rmtree --scratch PATTERN...
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "rmtree: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) > 0 && args[0] == "--scratch" {
		return scratch(args[1:])
	}
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

// scratch removes every path each pattern matches. A pattern's directory
// must be a real one, no link at any component (a link the harness made
// there would steer the removal anywhere); each match is removed with
// RemoveAll, which removes a link itself, never its target.
func scratch(patterns []string) error {
	var errs []string
	for _, p := range patterns {
		dir, last := filepath.Split(p)
		dir = filepath.Clean(dir)
		if !filepath.IsAbs(p) || filepath.Clean(p) != p || last == "" || strings.ContainsAny(dir, "*?[]\\") {
			errs = append(errs, fmt.Sprintf("refuse %q: not an absolute path with a glob only in its last element", p))
			continue
		}
		real, err := filepath.EvalSymlinks(dir)
		if os.IsNotExist(err) {
			continue // nothing was ever written there
		}
		if err != nil || real != dir {
			errs = append(errs, fmt.Sprintf("refuse %q: its directory is not a plain directory (resolves to %q: %v)", p, real, err))
			continue
		}
		matches, err := filepath.Glob(p)
		if err != nil {
			errs = append(errs, fmt.Sprintf("glob %q: %v", p, err))
			continue
		}
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
				errs = append(errs, fmt.Sprintf("remove %q: %v", m, err))
				continue
			}
			fmt.Println(m)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
