// Package procs holds the conformance suite's Ginkgo-flavoured process
// helpers: running warden, and cleanups and checks that fail the spec
// rather than return errors. What they read of /proc, receipts and the
// adversary's record comes from package witness, which shares no code with
// warden (runner/...), so a bug in warden's parsing cannot hide itself in
// the checks.
package procs

import (
	"syscall"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"github.com/sandproof/sandproof/runner/witness"
)

// Alive reports whether the process id names still runs (a zombie does
// not); a /proc that cannot be read fails the spec, since it proves
// neither.
func Alive(id witness.ID) bool {
	ginkgo.GinkgoHelper()
	alive, err := witness.Proc.Alive(id)
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "read /proc for %v", id)
	return alive
}

// KillOnCleanup registers a cleanup that SIGKILLs, by identity, whatever
// ids() returns then (processes a failed spec left behind). ids is called
// at cleanup time, so it can read a record file written later.
func KillOnCleanup(ids func() []witness.ID) {
	ginkgo.GinkgoHelper()
	ginkgo.DeferCleanup(func() {
		for _, id := range ids() {
			// An unreadable stat is killed too: Kill re-checks the
			// identity itself.
			if alive, err := witness.Proc.Alive(id); alive || err != nil {
				ginkgo.GinkgoWriter.Printf("cleanup: SIGKILL left-over %v (%s)\n", id, witness.Proc.State(id))
				if err := witness.Kill(id, syscall.SIGKILL); err != nil {
					ginkgo.GinkgoWriter.Printf("cleanup: %v\n", err)
				}
			}
		}
	})
}
