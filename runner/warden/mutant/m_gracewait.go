//go:build sandproof_mutant && mutant_gracewait

package mutant

// Active is the mutation this build carries.
const Active = GraceWait
