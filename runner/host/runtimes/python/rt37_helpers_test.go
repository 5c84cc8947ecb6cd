package python

import "testing"

// rt37Tree is the staged interpreter tree the red team's attacks run
// against (the interp tests' shared one: skipped under -short).
func rt37Tree(t *testing.T) string {
	t.Helper()
	dir, _ := stagedTree(t)
	return dir
}
