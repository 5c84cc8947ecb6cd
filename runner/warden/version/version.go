// Package version holds warden's and sandproof's version, stamped at build
// time by the Makefile (-ldflags -X) with the build commit.
package version

// Version is the release; Commit the short build commit ("unknown" for a
// plain go build).
var (
	Version = "0.1.0"
	Commit  = "unknown"
)

// String returns "0.1.0+abc1234", the form receipts carry.
func String() string { return Version + "+" + Commit }
